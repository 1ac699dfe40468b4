#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "vision/draw.h"

namespace vlrt::vision {

TEST(Draw, BoxEdgesAndALabelThatStaysInsideTheImage) {
  Image black{120, 60, std::vector<uint8_t>(120 * 60 * 3, 0)};
  Detection d;
  d.label = "purple star";
  d.score = 0.9f;
  d.x1 = 100, d.y1 = 30, d.x2 = 118, d.y2 = 50;
  Image out = draw_detections(black, {d});
  auto lit = [&](int x, int y) {
    const uint8_t* p = &out.rgb[(size_t(y) * out.width + x) * 3];
    return p[0] + p[1] + p[2] > 0;
  };
  EXPECT_TRUE(lit(100, 40));   // left edge
  EXPECT_TRUE(lit(117, 40));   // right edge
  EXPECT_FALSE(lit(109, 40));  // inside the box
  // The label above the box is wider than the room right of x1: it is moved left to fit.
  EXPECT_TRUE(lit(119, 25));
  EXPECT_TRUE(lit(70, 25));
  EXPECT_FALSE(lit(10, 40));  // nothing drawn elsewhere
}

TEST(Draw, MasksBlendHalfTheirColourOverTheirPixelsOnly) {
  Image white{4, 2, std::vector<uint8_t>(4 * 2 * 3, 255)};
  Mask mask{4, 2, {0, 1, 1, 0, 0, 0, 1, 0}};
  Image out = draw_masks(white, {mask}, {"prompt 1"});
  for (int i = 0; i < 8; i++) {
    const uint8_t* p = &out.rgb[size_t(i) * 3];
    bool tinted = p[0] != 255 || p[1] != 255 || p[2] != 255;
    EXPECT_EQ(tinted, mask.pixels[size_t(i)] == 1) << "pixel " << i;
    EXPECT_GE(std::min({p[0], p[1], p[2]}), 127) << "half the image's own colour stays";
  }
  try {
    draw_masks(white, {Mask{3, 2, std::vector<uint8_t>(6, 1)}}, {"a"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a 3x2 mask cannot be drawn on a 4x2 image"), std::string::npos);
  }
}

}  // namespace vlrt::vision

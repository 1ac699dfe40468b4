#include <gtest/gtest.h>

#include "cli_util.h"
#include "vision/image.h"

namespace vlrt::vision {

namespace {
std::string fixture(const std::string& name) { return test::source_path("tests/fixtures/image/" + name); }

std::string error_of(const std::string& path) {
  try {
    load_image(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Image, ResizeMatchesPilBilinearExactly) {
  Image src = load_image(fixture("src.png"));
  ASSERT_EQ(src.width, 37);
  ASSERT_EQ(src.height, 23);
  for (auto [w, h] : {std::pair{80, 50}, {18, 11}, {37, 60}, {25, 23}}) {
    Image want = load_image(fixture("pil_" + std::to_string(w) + "x" + std::to_string(h) + ".png"));
    Image got = resize_bilinear(src, w, h);
    ASSERT_EQ(got.width, w);
    ASSERT_EQ(got.height, h);
    size_t diff = 0;
    for (size_t i = 0; i < got.rgb.size(); i++) diff += got.rgb[i] != want.rgb[i];
    EXPECT_EQ(diff, 0u) << w << "x" << h;
  }
}

TEST(Image, TargetSizeFollowsReference) {
  ResizeOptions o;  // short side 800, long side at most 1333
  EXPECT_EQ(target_size(640, 480, o), (std::pair{1066, 800}));
  EXPECT_EQ(target_size(480, 640, o), (std::pair{800, 1066}));
  EXPECT_EQ(target_size(2000, 500, o), (std::pair{1332, 333}));
  EXPECT_EQ(target_size(1333, 800, o), (std::pair{1333, 800}));
  o.fixed_width = 320;
  o.fixed_height = 240;
  EXPECT_EQ(target_size(1000, 10, o), (std::pair{320, 240}));
}

TEST(Image, ExifOrientationIsApplied) {
  Image img = load_image(fixture("orient6.jpg"));  // stored 8 wide x 16 high, rotate 90 clockwise
  EXPECT_EQ(img.width, 16);
  EXPECT_EQ(img.height, 8);
  // Stored rows get brighter downwards; after the rotation columns get darker to the right.
  EXPECT_GT(img.rgb[0], img.rgb[(15) * 3] + 100);
}

TEST(Image, BadFilesAreNamedErrors) {
  EXPECT_NE(error_of(fixture("not_an_image.png")).find("not an image"), std::string::npos);
  EXPECT_NE(error_of(fixture("truncated.jpg")).find("truncated"), std::string::npos);
  std::string huge = error_of(fixture("huge_header.png"));
  EXPECT_NE(huge.find("50000x50000"), std::string::npos) << huge;
  EXPECT_NE(error_of(fixture("missing.png")).find("no such file"), std::string::npos);
}

TEST(Image, NormalizesWithImageNetStatistics) {
  Image img{2, 1, {255, 0, 128, 0, 255, 64}};
  Tensor t = normalize_images({&img});
  ASSERT_EQ(t.shape(), (Shape{1, 3, 1, 2}));
  EXPECT_NEAR(t.data<float>()[0], (1.0f - 0.485f) / 0.229f, 1e-6);
  EXPECT_NEAR(t.data<float>()[2], (0.0f - 0.456f) / 0.224f, 1e-6);
}

}  // namespace vlrt::vision

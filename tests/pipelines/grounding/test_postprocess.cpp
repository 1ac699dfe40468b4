#include <gtest/gtest.h>

#include "pipelines/grounding/detector.h"

namespace vlrt::grounding {

TEST(Postprocess, ThresholdsPhrasesAndNms) {
  // Two queries over a caption "red circle . blue star ." (tokens: [CLS] red circle . blue star . [SEP]).
  EncodedCaption cap;
  cap.phrases = {{"red circle", 1, 3}, {"blue star", 4, 6}};
  const int64_t T = 8;
  std::vector<float> logits(3 * T, -10.f);
  logits[0 * T + 1] = 2.f;   // query 0: "red" strong
  logits[0 * T + 2] = 1.f;   // "circle" passes too
  logits[1 * T + 5] = 3.f;   // query 1: "star" only -> the whole phrase "blue star"
  logits[2 * T + 2] = 1.5f;  // query 2: a weaker duplicate of query 0
  std::vector<float> boxes = {0.5f, 0.5f, 0.2f, 0.2f, 0.25f, 0.25f, 0.1f, 0.1f, 0.5f, 0.5f, 0.21f, 0.2f};
  DetectOptions o;
  auto dets = postprocess(logits.data(), boxes.data(), 3, T, cap, 200, 100, o);
  ASSERT_EQ(dets.size(), 3u);
  EXPECT_EQ(dets[0].label, "blue star");
  EXPECT_NEAR(dets[0].x1, 40.f, 1e-4);
  EXPECT_NEAR(dets[0].y2, 30.f, 1e-4);
  EXPECT_EQ(dets[1].label, "red circle");
  o.nms_iou = 0.5f;
  EXPECT_EQ(postprocess(logits.data(), boxes.data(), 3, T, cap, 200, 100, o).size(), 2u);
  o.box_threshold = 0.99f;
  EXPECT_TRUE(postprocess(logits.data(), boxes.data(), 3, T, cap, 200, 100, o).empty());
}

}  // namespace vlrt::grounding

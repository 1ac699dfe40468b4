#include <gtest/gtest.h>

#include <cmath>

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

// One object boxed as "car" (0.9) and as "truck" (0.8), and a "car" elsewhere.
TEST(Postprocess, ClassAgnosticNmsKeepsTheHigherScoreAcrossLabels) {
  EncodedCaption cap;
  cap.phrases = {{"car", 1, 2}, {"truck", 3, 4}};
  const int64_t T = 6;
  std::vector<float> logits(3 * T, -10.f);
  logits[0 * T + 1] = 2.2f;  // car
  logits[1 * T + 3] = 1.4f;  // truck, the same box
  logits[2 * T + 1] = 1.0f;  // car, apart
  std::vector<float> boxes = {0.3f, 0.3f, 0.2f, 0.2f, 0.3f, 0.31f, 0.2f, 0.2f, 0.8f, 0.8f, 0.1f, 0.1f};
  DetectOptions o;
  o.nms_iou = 0.5f;
  auto per_label = postprocess(logits.data(), boxes.data(), 3, T, cap, 100, 100, o);
  EXPECT_EQ(per_label.size(), 3u);
  o.nms_agnostic = true;
  auto agnostic = postprocess(logits.data(), boxes.data(), 3, T, cap, 100, 100, o);
  ASSERT_EQ(agnostic.size(), 2u);
  EXPECT_EQ(agnostic[0].label, "car");
  EXPECT_NEAR(agnostic[0].score, 1 / (1 + std::exp(-2.2f)), 1e-6);
  EXPECT_EQ(agnostic[1].label, "car");
  EXPECT_NEAR(agnostic[1].x1, 75.f, 1e-4);
}

// Two phrases of one class: labelled with the class name and its index, and suppressed per class.
TEST(Postprocess, OntologyLabelsWithClassNames) {
  EncodedCaption cap;
  cap.phrases = {{"sedan", 1, 2}, {"van", 3, 4}, {"ring", 5, 6}};
  Ontology classes = parse_class_list("sedan=vehicle, van=vehicle, ring");
  const int64_t T = 8;
  std::vector<float> logits(3 * T, -10.f);
  logits[0 * T + 1] = 2.f;  // sedan
  logits[1 * T + 3] = 1.f;  // van, the same box
  logits[2 * T + 5] = 3.f;  // ring
  std::vector<float> boxes = {0.3f, 0.3f, 0.2f, 0.2f, 0.3f, 0.3f, 0.2f, 0.2f, 0.8f, 0.8f, 0.1f, 0.1f};
  DetectOptions o;
  auto dets = postprocess(logits.data(), boxes.data(), 3, T, cap, 100, 100, o, &classes);
  ASSERT_EQ(dets.size(), 3u);
  EXPECT_EQ(dets[0].label, "ring");
  EXPECT_EQ(dets[0].category, 1);
  EXPECT_EQ(dets[1].label, "vehicle");
  EXPECT_EQ(dets[1].category, 0);
  EXPECT_EQ(dets[2].label, "vehicle");
  o.nms_iou = 0.5f;  // per label: the two "vehicle" boxes are one label now
  EXPECT_EQ(postprocess(logits.data(), boxes.data(), 3, T, cap, 100, 100, o, &classes).size(), 2u);
}

}  // namespace vlrt::grounding

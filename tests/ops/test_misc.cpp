// NonMaxSuppression: box formats, per-class selection, limits and thresholds.
#include <optional>

#include "op_test_util.h"

namespace vlrt::test {
namespace {

Tensor nms(const Tensor& boxes, const Tensor& scores, int64_t max_out, float iou,
           std::optional<float> min_score, int64_t center_point_box = 0) {
  std::vector<Tensor> in = {boxes, scores, i64({max_out}, {1}), f32({iou}, {1})};
  if (min_score) in.push_back(f32({*min_score}, {1}));
  return run_op("NonMaxSuppression", in, {{"center_point_box", attr_i(center_point_box)}})[0];
}

TEST(NonMaxSuppression, PerClassInScoreOrderWithLimitAndThresholds) {
  // Boxes 0 and 1 overlap (IoU 0.81); box 2 is apart.
  Tensor boxes = f32({0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6}, {1, 3, 4});
  Tensor scores = f32({0.9f, 0.95f, 0.5f,  // class 0
                       0.1f, 0.2f, 0.8f},  // class 1
                      {1, 2, 3});
  Tensor y = nms(boxes, scores, 5, 0.5f, std::nullopt);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_EQ(y.to_int64_vector(), (std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1}));
  Tensor limited = nms(boxes, scores, 1, 0.5f, 0.3f);
  EXPECT_EQ(limited.to_int64_vector(), (std::vector<int64_t>{0, 0, 1, 0, 1, 2}));
  Tensor nan_scores = f32({NAN, 0.5f, 0.4f}, {1, 1, 3});
  EXPECT_EQ(nms(boxes, nan_scores, 5, 0.5f, std::nullopt).to_int64_vector(),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
  Tensor none = nms(boxes, scores, 0, 0.5f, std::nullopt);
  EXPECT_EQ(none.shape(), (Shape{0, 3}));
}

TEST(NonMaxSuppression, CenterPointBoxesMatchCorners) {
  Tensor corners = f32({0, 0, 2, 2, 0.2f, 0.2f, 2.2f, 2.2f}, {1, 2, 4});
  Tensor centers = f32({1, 1, 2, 2, 1.2f, 1.2f, 2, 2}, {1, 2, 4});
  Tensor scores = f32({0.6f, 0.7f}, {1, 1, 2});
  EXPECT_EQ(nms(corners, scores, 2, 0.5f, std::nullopt).to_int64_vector(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(nms(centers, scores, 2, 0.5f, std::nullopt, 1).to_int64_vector(),
            (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(nms(centers, scores, 2, 0.9f, std::nullopt, 1).to_int64_vector(),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
}

TEST(NonMaxSuppression, RefusesMismatchedShapesAndBadThresholds) {
  Tensor boxes = f32({0, 0, 1, 1}, {1, 1, 4});
  EXPECT_THROW(nms(boxes, f32({0.5f, 0.5f}, {1, 1, 2}), 1, 0.5f, std::nullopt), Error);
  EXPECT_THROW(nms(boxes, f32({0.5f}, {1, 1, 1}), 1, 1.5f, std::nullopt), Error);
  EXPECT_THROW(nms(boxes, f32({0.5f}, {1, 1, 1}), 1, 0.5f, std::nullopt, 2), Error);
}

}  // namespace
}  // namespace vlrt::test

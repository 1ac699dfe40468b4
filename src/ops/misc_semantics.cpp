#include "ops/misc_semantics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.h"

namespace vlrt {

namespace {

float float_scalar(const Tensor& t, const char* what) {
  VLRT_CHECK(t.dtype() == DType::f32, what, " must be float32, got ", dtype_name(t.dtype()));
  VLRT_CHECK(t.rank() <= 1 && t.numel() == 1, what, " must be a scalar, got shape ", shape_str(t.shape()));
  return t.data<float>()[0];
}

struct Corners {
  float y0, x0, y1, x1;
};

Corners corners(const float* b, bool center_point_box) {
  if (center_point_box) return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// True when the IoU of a and b exceeds the threshold; empty boxes suppress nothing.
bool suppresses(const Corners& a, const Corners& b, float threshold) {
  float iw = std::max(0.0f, std::min(a.x1, b.x1) - std::max(a.x0, b.x0));
  float ih = std::max(0.0f, std::min(a.y1, b.y1) - std::max(a.y0, b.y0));
  float inter = iw * ih;
  if (inter <= 0) return false;
  float area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

}  // namespace

std::vector<std::array<int64_t, 3>> non_max_suppression(const Node& node, const Tensor& boxes,
                                                        const Tensor& scores, const Tensor* max_per_class,
                                                        const Tensor* iou_threshold,
                                                        const Tensor* score_threshold) {
  VLRT_CHECK(boxes.dtype() == DType::f32 && scores.dtype() == DType::f32,
             "boxes and scores must be float32, got ", dtype_name(boxes.dtype()), " and ",
             dtype_name(scores.dtype()));
  const Shape& bs = boxes.shape();
  const Shape& ss = scores.shape();
  VLRT_CHECK(bs.size() == 3 && bs[2] == 4, "boxes must be [num_batches, spatial_dimension, 4], got ",
             shape_str(bs));
  VLRT_CHECK(ss.size() == 3 && ss[0] == bs[0] && ss[2] == bs[1], "scores must be [num_batches, num_classes, ",
             "spatial_dimension] = [", bs[0], ", C, ", bs[1], "] to match boxes ", shape_str(bs), ", got ",
             shape_str(ss));
  int64_t cpb = node.attr_int("center_point_box", 0);
  VLRT_CHECK(cpb == 0 || cpb == 1, "center_point_box must be 0 or 1, got ", cpb);
  int64_t max_out = 0;
  if (max_per_class) {
    VLRT_CHECK(
        max_per_class->dtype() == DType::i64 && max_per_class->numel() == 1 && max_per_class->rank() <= 1,
        "max_output_boxes_per_class must be an int64 scalar, got ", max_per_class->describe());
    max_out = std::max<int64_t>(0, max_per_class->data<int64_t>()[0]);
  }
  float iou = iou_threshold ? float_scalar(*iou_threshold, "iou_threshold") : 0.0f;
  VLRT_CHECK(iou >= 0 && iou <= 1, "iou_threshold must be in [0, 1], got ", iou);
  std::optional<float> min_score;
  if (score_threshold) min_score = float_scalar(*score_threshold, "score_threshold");

  int64_t batches = bs[0], classes = ss[1], n = bs[1];
  std::vector<std::array<int64_t, 3>> selected;
  if (max_out == 0) return selected;
  const float* bp = boxes.data<float>();
  const float* sp = scores.data<float>();
  std::vector<Corners> c(n);
  for (int64_t b = 0; b < batches; b++) {
    for (int64_t i = 0; i < n; i++) c[i] = corners(bp + (b * n + i) * 4, cpb == 1);
    for (int64_t k = 0; k < classes; k++) {
      const float* s = sp + (b * classes + k) * n;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; i++)
        if (!std::isnan(s[i]) && (!min_score || s[i] > *min_score)) order.push_back(i);  // NaN has no rank
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_out) break;
        bool keep =
            std::none_of(kept.begin(), kept.end(), [&](int64_t j) { return suppresses(c[j], c[i], iou); });
        if (keep) kept.push_back(i);
      }
      for (int64_t i : kept) selected.push_back({b, k, i});
    }
  }
  return selected;
}

}  // namespace vlrt

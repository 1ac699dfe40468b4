// Semantics of the misc family that shape inference and every backend share.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// NonMaxSuppression over boxes [batches, n, 4] and scores [batches, classes, n] (float32),
// with the optional scalar inputs max_output_boxes_per_class (int64, default 0),
// iou_threshold and score_threshold (float32; nullptr when omitted). Returns the selected
// [batch, class, box] triples, per batch and class in order of descending score (ties: the
// lower box index first), as ONNX Runtime selects them.
std::vector<std::array<int64_t, 3>> non_max_suppression(const Node& node, const Tensor& boxes,
                                                        const Tensor& scores, const Tensor* max_per_class,
                                                        const Tensor* iou_threshold,
                                                        const Tensor* score_threshold);

}  // namespace vlrt

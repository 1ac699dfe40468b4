// One form per op: rewrites the older-opset forms of ONNX ops into their opset-18 form once, on the
// graph, so that shape inference and every backend's kernels implement a single form.
#pragma once

#include <cstddef>
#include <cstdint>

#include "graph/graph.h"

namespace vlrt {

// The opset whose forms canonicalize() produces.
inline constexpr int64_t kCanonicalOpset = 18;

// Rewrites every default-domain node written for an opset older than 18: attributes that later became
// inputs (Pad's pads, Slice's starts, Clip's bounds, Split's split, Reduce*'s and Squeeze's axes, TopK's
// k) become initializers named "<node>__<attribute>"; Softmax, LogSoftmax and Hardmax before 13 get
// their coercion to 2-D spelled out (Flatten, op, Reshape); Upsample and Resize-10 become Resize;
// attributes that did not exist yet at the model's opset are dropped. The model's default-domain opset
// is then 18: the graph follows the opset-18 forms, and a second call changes nothing.
// A malformed old form fails naming the node. Returns the number of nodes rewritten.
size_t canonicalize(Model& model);

}  // namespace vlrt

// Shape inference with constant folding: given what is known of the graph inputs,
// infer dtype and shape of every value and compute every value that depends only
// on known values (the Shape -> Gather -> Concat -> Reshape chains of exported
// transformers), so that each node's output shape is known before anything runs.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/backend.h"
#include "graph/graph.h"
#include "ops/op_schema.h"

namespace vlrt {

struct InferredGraph {
  std::unordered_map<std::string, ValueInfo> values;  // every named value
  std::vector<bool> folded;                           // per node: outputs computed here
};

// Values up to this many elements are folded when all their inputs are known;
// larger ones only when they depend on initializers alone.
inline constexpr int64_t kFoldLimit = 1 << 16;

// `inputs` gives dtype and shape (and possibly a value) per graph input. Values are
// folded by `host` (a backend whose memory the host reads: the CPU).
// Errors name the node, the op and the input shapes.
InferredGraph infer_shapes(const Model& model, const std::unordered_map<std::string, ValueInfo>& inputs,
                           Backend& host);

// Replaces every node whose outputs depend only on initializers by initializers
// holding its outputs, computed by `host`, except the nodes whose one output is in `keep`.
// Returns the number of nodes removed.
size_t fold_constants(Model& model, Backend& host, const std::unordered_set<std::string>& keep = {});

}  // namespace vlrt

// Export lint: shape constants that hold the export-time size of a dimension the model declares
// dynamic. A traced export that calls int() on a size (Swin's window_reverse computing B) writes
// that size into a Reshape's shape constant; at another size the graph then fails, or runs and
// mixes the items of a batch with no error at all.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/graph.h"

namespace vlrt {

struct BakedSizeFinding {
  std::string node;       // the node whose shape is baked, or that fails at the second probe
  std::string op_type;
  std::string constant;   // the value holding the baked entry (empty when unknown)
  std::string dimension;  // "'batch'", or "axis 0 of input 'x'" when the axis has no name
  std::string message;    // what is wrong and what to do
};

struct ExportLintReport {
  std::vector<BakedSizeFinding> findings;
  // Why some or all of the graph was not linted (an input without a declared shape, shape
  // inference failing at the first probe size).
  std::vector<std::string> notes;
};

// The graph is shape-inferred with every dynamic input dimension at one probe size, then once per
// dimension with that one at another size, or at a small one where that fails (`host` folds the
// small values, as in infer_shapes).
// Flagged: a Reshape whose shape constant holds a small export-time size s of the dimension where,
// at size s, the input's axes carrying the dimension map onto output axes that are all fixed (so
// another size lands in a -1 elsewhere); where a node fails at the second size, such a Reshape
// among the nodes it depends on (inferred alone at that size), else the failing node itself when
// it is a shape op whose shape input is a constant (other failures are notes).
// Subgraphs are not linted.
ExportLintReport lint_baked_sizes(const Model& model, Backend& host);

}  // namespace vlrt

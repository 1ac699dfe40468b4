// Where two runs of a model part ways: runs two sessions (one model on two devices, or two
// models whose value names match) on the same inputs and compares every intermediate value
// both make, node by node, in the topological order of the first. `vlrt check` prints it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "exec/session.h"

namespace vlrt {

// A value is within tolerance when max |a - b| <= atol + rtol * max |a|: numpy's allclose,
// with the peak magnitude of a's tensor in place of each element's own (a near-zero element
// alone does not flag a node).
struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-3;
};

// Where max |a| is below this, the relative error divides by it instead.
inline constexpr double kRelativeErrorFloor = 1e-12;

// One value made by both runs.
struct ValueDiff {
  DType dtype_a = DType::undefined, dtype_b = DType::undefined;
  Shape shape_a, shape_b;
  bool comparable = false;  // same dtype and shape: the errors below are defined
  double max_abs = 0;       // max |a - b| (infinite where only one side is NaN or they differ in an infinity)
  double max_rel = 0;       // max |a - b| / max(max |a|, kRelativeErrorFloor)
  double peak_a = 0;        // max |a|
  bool nan_a = false, nan_b = false;  // a NaN on that side
};

// Compares two host tensors element by element (as doubles).
ValueDiff compare_values(const Tensor& a, const Tensor& b);
// False for a dtype or shape mismatch, else the Tolerance rule.
bool within(const ValueDiff& d, const Tolerance& tol);

// One row: an output of a node of the first run's graph that both runs made.
struct NodeComparison {
  std::string node, op_type, value;
  std::string device_a, device_b;  // where each run computed it
  ValueDiff diff;
  bool within = true;
};

struct RunComparison {
  std::vector<NodeComparison> rows;  // topological order of the first run's graph
  int first_over = -1;               // index into rows of the first value out of tolerance; -1: none
  size_t non_tensor_skipped = 0;     // sequences and optionals both runs made (not compared)
  size_t only_a = 0, only_b = 0;     // node outputs one run made and the other did not
  // Indices into rows of the `n` largest relative errors among comparable rows, largest first.
  std::vector<size_t> worst(size_t n) const;
};

// Runs `a` then `b` on `inputs` (each must accept them) and compares each node output whose
// name both runs make. `a`'s values are kept on the host until `b` has made its own: in memory
// up to `memory_budget` bytes, the tensors past it in an unnamed temporary file (in $TMPDIR,
// else /tmp), so that a model whose intermediate values outgrow memory (GroundingDINO at
// 1333x800 makes over 20 GiB of them unfused) can still be checked.
inline constexpr size_t kDefaultCheckMemory = size_t(2) << 30;
RunComparison compare_runs(Session& a, Session& b, const TensorMap& inputs, const Tolerance& tol,
                           size_t memory_budget = kDefaultCheckMemory);

// Node output names the two graphs have in common (none: the two models cannot be compared).
size_t shared_value_names(const Graph& a, const Graph& b);

}  // namespace vlrt

// Values that depend only on some of a model's inputs (a text encoder's, on the text inputs)
// computed once per distinct content of those inputs and reused. The branch is the plan's steps
// whose inputs are those inputs, constants, or other branch steps' outputs; the values it hands
// to the rest of the graph are kept, keyed by the plan and the inputs' bytes and shapes, in a
// small LRU cache. A run with the values cached skips the branch and puts them in place.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "plan/plan.h"

namespace vlrt {

struct Branch {
  std::vector<std::string> inputs;  // the declared inputs it depends on
  std::vector<bool> in_branch;      // per plan step
  std::vector<int> boundary;        // slots made in the branch and read outside it (or graph outputs)
  size_t steps = 0;                 // steps in the branch
  size_t boundary_bytes = 0;        // planned bytes of the boundary values (dynamic ones not counted)
};

// The branch of `plan` that depends only on `inputs` (graph input names). A step reading
// nothing but constants is not in it (it may be random; it is cheap).
Branch find_branch(const Plan& plan, const std::vector<std::string>& inputs);

// One entry: the branch's values for one content of its inputs.
struct BranchValues {
  std::vector<Tensor> inputs;    // the inputs' content, compared on a lookup
  std::map<int, Tensor> values;  // boundary slot -> host copy
  bool complete = true;          // false: a value was not a tensor, the entry is not kept
};

// What one run asks of the branch: the cached values to put in place, or where to keep them.
struct BranchRun {
  const Branch* branch = nullptr;
  const BranchValues* cached = nullptr;  // hit: skip the branch's steps
  BranchValues* captured = nullptr;      // miss: filled with the boundary values
  double ms = 0;                         // time in the branch's steps, or in putting values in place
};

struct BranchStats {
  int64_t hits = 0, misses = 0;
  double ms = 0;  // summed BranchRun::ms
  size_t entries = 0, capacity = 0;
};

class BranchCache {
 public:
  explicit BranchCache(size_t capacity) { stats_.capacity = capacity; }
  // The entry of this plan for these inputs' content (most recently used first), or nullptr.
  std::shared_ptr<const BranchValues> find(const std::string& plan_key, const std::vector<Tensor>& inputs);
  // Keeps a complete entry, letting go of the least recently used beyond the capacity.
  void insert(const std::string& plan_key, BranchValues values);
  void add_time(double ms) { stats_.ms += ms; }
  const BranchStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::string plan_key;
    uint64_t hash;
    std::shared_ptr<const BranchValues> values;
  };
  std::list<Entry> entries_;  // most recently used first
  BranchStats stats_;
};

// A hash of the tensors' dtypes, shapes and bytes.
uint64_t content_hash(const std::vector<Tensor>& tensors);

}  // namespace vlrt

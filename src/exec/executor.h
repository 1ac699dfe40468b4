// Executes a plan: runs each step on its device, with every intermediate value
// at its planned offset in that device's arena, and checks that each kernel
// receives only tensors on its own device. Values are the plan's integer slots.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "core/precision.h"
#include "exec/branch_cache.h"
#include "plan/plan.h"

namespace vlrt {

using TensorMap = std::map<std::string, Tensor>;

// One device's activation memory: a single buffer; tensors are views at planned offsets.
struct Arena {
  std::shared_ptr<Buffer> buffer;
  size_t high_water = 0;  // highest end offset handed out
};

// Kernel time per op type, summed over the runs made while profiling was on.
struct OpProfile {
  double ms = 0;
  int64_t calls = 0;
};
using Profile = std::map<std::string, OpProfile>;

// What one plan needs before its first run, made once by Executor::prepare: every
// constant on the device that reads it, and each node's prepared state.
struct PreparedPlan {
  std::vector<Tensor> constants;                     // per slot (undefined for non-constants)
  std::vector<std::unique_ptr<KernelState>> states;  // per step (nullptr: none)
};

class ControlFlowRunner;

// Called after each node runs with each value it made, as a host copy the observer may keep
// (a sequence or an optional as it is held). For tools that look inside a run (`vlrt check`).
using ValueObserver = std::function<void(const Node& node, const std::string& value, const Tensor& host_copy)>;

class Executor {
 public:
  // host: the backend of the host device (Device{}) when it is shared with another session; nullptr:
  // the executor makes its own.
  Executor(const Model& model, int threads, int64_t max_loop_iterations,
           std::shared_ptr<Backend> host = nullptr);
  ~Executor();

  // Puts the plan's constants on their devices and prepares each node's state; the
  // bytes of that state must be what the plan counted.
  PreparedPlan prepare(const InferredGraph& inferred, const Plan& plan);
  // Runs every step of `plan` (made for these inputs' shapes); returns the graph
  // outputs as host tensors the caller owns. With `branch`: skips the branch's steps and puts
  // its cached values in place, or keeps its values as they are made.
  TensorMap run(const Plan& plan, const PreparedPlan& prepared, const TensorMap& inputs,
                BranchRun* branch = nullptr);

  Backend& backend(const Device& d);
  // Highest arena offset used on a device since the last reset (0 if none).
  size_t arena_high_water(const Device& d) const;
  void reset_high_water();
  size_t transfers_executed() const { return transfers_executed_; }
  // Times every kernel (after waiting for its device) into `profile`; nullptr: off.
  // Kernel time is added per op type to by_op and, when given, per node (keyed by its label) to by_node.
  void set_profile(Profile* by_op, Profile* by_node = nullptr) {
    profile_ = by_op;
    node_profile_ = by_node;
  }
  // Shows every node's outputs to `observer` (waiting for the device and copying each to the
  // host); an empty function: off, and the run pays one test per step.
  void set_value_observer(ValueObserver observer) { observer_ = std::move(observer); }
  // Rounds every float32 value a top-level node makes to this precision (fp32: off).
  void set_precision(Precision p) { precision_ = p; }

 private:
  // Per device of the plan being run: its backend and its arena.
  struct Lane {
    Backend* backend = nullptr;
    Arena* arena = nullptr;
  };

  std::vector<Lane> bind_lanes(const Plan& plan);
  const Tensor& slot_value(const PreparedPlan& prepared, int slot) const;
  Tensor allocate(const Plan& plan, int slot, DType dtype, const Shape& shape, const char* what);
  void run_copy(const Plan& plan, const PreparedPlan& prepared, const Step& s);
  void run_node_step(const Plan& plan, const PreparedPlan& prepared, size_t step);
  void run_control_flow_step(const Plan& plan, const PreparedPlan& prepared, size_t step);
  void add_profile(const Node& node, double ms);
  TensorMap collect_outputs(const Plan& plan, const PreparedPlan& prepared) const;
  void observe_outputs(const Plan& plan, const Step& s);
  void restore_branch_values(const Plan& plan, const Step& s, const BranchValues& cached);
  void capture_branch_values(const Plan& plan, const Step& s, const Branch& branch, BranchValues& captured);

  const Model& model_;
  int threads_;
  int64_t max_loop_iterations_;
  std::map<std::string, std::shared_ptr<Backend>> backends_;
  std::map<std::string, Arena> arenas_;
  // Initializers copied to devices that are not the host: device -> name -> tensor (kept across plans).
  std::map<std::string, std::unordered_map<std::string, Tensor>> device_constants_;
  // The run in progress: one tensor per slot, and each plan device's lane.
  std::vector<Tensor> values_;
  std::vector<Lane> lanes_;
  size_t transfers_executed_ = 0;
  Profile* profile_ = nullptr;
  Profile* node_profile_ = nullptr;
  ValueObserver observer_;
  Precision precision_ = Precision::fp32;
  // Per control-flow node (by index): the runner of its subgraphs, made at its first run.
  std::map<size_t, std::unique_ptr<ControlFlowRunner>> control_flow_;
};

// Invariant 1: every tensor handed to a kernel lives on the kernel's device.
// Fails with the node, the device and the offending tensor's name.
void check_on_device(const Node& node, const Device& device, const std::vector<const Tensor*>& inputs);

}  // namespace vlrt

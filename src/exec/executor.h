// Executes a plan: runs each step on its device, with every intermediate value
// at its planned offset in that device's arena, and checks that each kernel
// receives only tensors on its own device.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
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

class Executor {
 public:
  Executor(const Model& model, int threads);

  // Runs every step of `plan` (made for these inputs' shapes); returns the graph
  // outputs as host tensors the caller owns.
  TensorMap run(const InferredGraph& inferred, const Plan& plan, const TensorMap& inputs);

  Backend& backend(const Device& d);
  // Highest arena offset used on a device since the last reset (0 if none).
  size_t arena_high_water(const Device& d) const;
  void reset_high_water();
  size_t transfers_executed() const { return transfers_executed_; }
  // Times every kernel (after waiting for its device) into `profile`; nullptr: off.
  void set_profile(Profile* profile) { profile_ = profile; }

 private:
  const Tensor& constant_on(const std::string& name, const Tensor& host_value, const Device& d, bool per_run);
  Tensor arena_tensor(const Device& d, const Allocation& a, DType dtype, const Shape& shape,
                      const std::string& what);

  const Model& model_;
  int threads_;
  std::map<std::string, std::shared_ptr<Backend>> backends_;
  std::map<std::string, Arena> arenas_;
  // Constants copied to non-host devices: device name -> value name -> tensor.
  std::map<std::string, std::unordered_map<std::string, Tensor>> device_constants_;
  std::map<std::string, std::unordered_map<std::string, Tensor>> run_constants_;
  size_t transfers_executed_ = 0;
  Profile* profile_ = nullptr;
};

// Invariant 1: every tensor handed to a kernel lives on the kernel's device.
// Fails with the node, the device and the offending tensor's name.
void check_on_device(const Node& node, const Device& device, const std::vector<const Tensor*>& inputs);

}  // namespace vlrt

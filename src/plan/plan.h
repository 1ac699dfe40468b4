// The execution plan: where each node runs, every transfer between devices, and
// where in each device's arena every intermediate value lives — all computed
// before the first kernel runs, printable by `vlrt plan`.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "passes/shape_inference.h"

namespace vlrt {

struct PlanOptions {
  std::vector<Device> devices{Device{}};    // in order of preference
  std::map<std::string, size_t> memory_caps;  // device name -> bytes for weights + activations
};

// Whether a device can run a node: true, or false with the reason.
using SupportsFn = std::function<bool(const Device&, const Node&, const std::vector<DType>&, std::string*)>;

struct Step {
  enum class Kind { run, copy };
  Kind kind = Kind::run;
  size_t node = 0;      // run: index into graph.nodes
  Device device;        // run: where it runs; copy: destination
  std::string value;    // copy: the value copied
  Device from;          // copy: source device
};

// Where one value lives on one device.
struct Allocation {
  Device device;
  size_t offset = 0;
  size_t bytes = 0;
  bool dynamic = false;  // shape known only at execution: allocated then, outside the arena
  std::string alias_of;  // a view of another value's memory (Reshape, Squeeze ...)
};

struct Transfer {
  std::string value;
  Device from, to;
  size_t bytes = 0;
};

struct Fallback {
  std::string node, op_type;
  Device preferred, placed;
  std::string reason;
};

struct DevicePlan {
  Device device;
  size_t nodes = 0;
  std::map<std::string, int> ops;  // op type -> node count
  size_t weight_bytes = 0;         // initializers and folded constants the device holds
  size_t peak_activation_bytes = 0;  // the arena size
  size_t dynamic_values = 0;
  size_t cap = 0;                  // 0: no cap
};

struct Plan {
  std::vector<Step> steps;
  std::vector<DevicePlan> devices;  // in the order of PlanOptions::devices
  std::vector<Transfer> transfers;
  std::vector<Fallback> fallbacks;
  std::vector<Device> node_device;  // per node; folded nodes stay on the host (cpu)
  // "value@device" -> its allocation, for every value a step produces.
  std::unordered_map<std::string, Allocation> allocations;
  // Per step: "value@device" keys whose last reader is that step.
  std::vector<std::vector<std::string>> release_after;
  // Constants (initializers, folded values) each device needs: device name -> value names.
  std::map<std::string, std::vector<std::string>> weights;

  const DevicePlan& device_plan(const Device& d) const;
};

inline std::string value_key(const std::string& value, const Device& d) { return value + "@" + d.str(); }

// Places the graph on the devices (first device that supports a node; a pipeline
// split in topological order when the memory caps require it), inserts transfers
// and plans every device's arena. Fails when the model cannot fit the caps.
Plan make_plan(const Model& model, const InferredGraph& inferred, const PlanOptions& options,
               const SupportsFn& supports);

// Parses "opencl:0=2GiB" (B, KB, MB, GB, KiB, MiB, GiB; plain number = bytes).
std::pair<std::string, size_t> parse_memory_cap(const std::string& arg);
size_t parse_bytes(const std::string& s);

}  // namespace vlrt

// The execution plan: where each node runs, every transfer between devices, and
// where in each device's arena every intermediate value lives — all computed
// before the first kernel runs, printable by `vlrt plan`. Values are integer
// slots (a value on one device), so executing a step needs no name lookup.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "passes/shape_inference.h"

namespace vlrt {

struct PlanOptions {
  std::vector<Device> devices{Device{}};    // in order of preference
  std::map<std::string, size_t> memory_caps;  // device name -> bytes for weights + activations + prepared state
  // Graph inputs whose memory the caller keeps on the device that reads them across runs (a
  // decoder's KV cache), with the bytes each holds at most: counted against the cap of the
  // device of the first node that reads its data, so that a split leaves room for them.
  std::map<std::string, size_t> resident_inputs;
  // Conv, MatMul and Gemm with constant float32 weights multiply bfloat16 values with float32 sums
  // on the CPU devices that have kernels for it (Backend::use_bf16_products), their weights held
  // in bfloat16; float32 elsewhere.
  bool bf16_products = false;
};

// What the planner asks of the backends of the listed devices.
struct PlanHooks {
  // Whether a device can run a node: true, or false with the reason.
  std::function<bool(const Device&, const Node&, const std::vector<DType>&, std::string*)> supports;
  // The state the device's backend would prepare for a node (absent: none).
  std::function<PrepareInfo(const Device&, const Node&, const std::vector<const ValueInfo*>&)> prepare_info;
  // The device's arena alignment (absent: 64 bytes).
  std::function<size_t(const Device&)> alignment;
};

// One value on one device: where it lives and what it is.
struct Slot {
  std::string value;
  Device device;
  size_t lane = 0;  // index of its device in Plan::devices
  DType dtype = DType::undefined;
  Shape shape;           // as inferred; empty when dynamic
  size_t offset = 0;     // in the device's arena
  size_t bytes = 0;
  bool dynamic = false;   // shape known only at execution: allocated then, outside the arena
  bool constant = false;  // an initializer or folded value, put on the device before the first run
  bool replaced = false;  // a constant every reader's prepared state holds: never put on the device
  bool input = false;     // a graph input: the caller's memory
  int alias_of = -1;      // a view of (or in place in) another slot's memory
};

struct Step {
  enum class Kind { run, copy };
  Kind kind = Kind::run;
  size_t node = 0;    // run: index into graph.nodes
  Device device;      // run: where it runs; copy: destination
  size_t lane = 0;    // index of `device` in Plan::devices
  Device from;        // copy: source device
  // run: slot of each node input (-1: omitted), then of each outer-scope value its
  // subgraphs read (implicit_inputs() order); copy: {source}
  std::vector<int> inputs;
  std::vector<int> outputs;  // run: slot of each node output (-1: unused); copy: {destination}
  std::vector<int> release;  // slots whose last reader is this step
  bool dynamic = false;      // run: output shapes inferred from the real inputs
  int alias_input = -1;      // run: output 0 is a view of this input (no kernel for it)
  bool control_flow = false;  // run: If, Loop, Scan: the executor runs its subgraphs on the host
  size_t prepared_bytes = 0;  // run: the node's prepared state on its device
  std::string kernel;         // run: the prepared kernel that runs it ("" the backend's plain one)
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
  size_t prepared_bytes = 0;         // per-node state its backend prepares (packed weights ...)
  std::map<std::string, int> kernels;  // prepared kernel -> node count
  size_t resident_bytes = 0;         // PlanOptions::resident_inputs read here
  size_t dynamic_values = 0;
  size_t cap = 0;                  // 0: no cap
  size_t total_bytes() const { return weight_bytes + peak_activation_bytes + prepared_bytes + resident_bytes; }
};

struct Plan {
  std::vector<Step> steps;
  std::vector<DevicePlan> devices;  // the listed devices in order, then any other a node landed on
  std::vector<Transfer> transfers;
  std::vector<Fallback> fallbacks;
  std::vector<Device> node_device;  // per node; folded nodes stay on the host (cpu)
  std::vector<Slot> slots;
  std::vector<std::pair<std::string, int>> inputs;  // graph input -> its slot on the host
  std::vector<int> outputs;                         // per graph output: its slot on the host
  // PlanOptions::resident_inputs: the device each is counted on (the first node reading its
  // data, not only its shape).
  std::map<std::string, Device> resident_devices;

  const DevicePlan& device_plan(const Device& d) const;
  // The slot of a value on a device, -1 when there is none (a scan: for tests and tools).
  int slot(const std::string& value, const Device& d) const;
};

// Places the graph on the devices (first device that supports a node; a pipeline
// split in topological order when the memory caps require it), inserts transfers
// and plans every device's arena. Fails when the model cannot fit the caps.
Plan make_plan(const Model& model, const InferredGraph& inferred, const PlanOptions& options,
               const PlanHooks& hooks);

// Parses "opencl:0=2GiB" (B, KB, MB, GB, KiB, MiB, GiB; plain number = bytes).
std::pair<std::string, size_t> parse_memory_cap(const std::string& arg);
size_t parse_bytes(const std::string& s);

}  // namespace vlrt

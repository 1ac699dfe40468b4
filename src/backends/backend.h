// The interface every backend implements, and the registry backends add themselves to.
// A backend owns its memory: tensors on its device live in buffers it allocated, and
// cross to another device only by the copies below, called by explicit transfer steps
// of a plan. docs/ARCHITECTURE.md describes the whole contract.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/op_schema.h"

namespace vlrt {

// Per-node state a backend makes once per plan and input shapes: packed weights,
// descriptors, compiled kernels, chosen algorithms. The session owns it.
class KernelState {
 public:
  virtual ~KernelState() = default;
  // Device memory the state holds: what prepare_info() promised the planner.
  virtual size_t bytes() const { return 0; }
};

// What prepare() will hold for a node, known while planning.
struct PrepareInfo {
  size_t bytes = 0;                   // device memory the state holds
  std::vector<size_t> replaced_inputs;  // constant inputs the state holds a copy of (packed)
  std::string kernel;                   // the prepared kernel's name, for `vlrt plan` ("" none)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  // True when the device's memory is the host's (a plain pointer the CPU can read).
  virtual bool host_visible() const = 0;
  // Total memory the device offers (0: unknown).
  virtual size_t memory_capacity() const = 0;
  // Offsets and sizes in this device's arena are multiples of this.
  virtual size_t alignment() const { return 64; }

  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  // `dst` lives on this device, `src` on the host (or the reverse); same dtype and shape.
  virtual void copy_from_host(const Tensor& src, Tensor& dst) = 0;
  virtual void copy_to_host(const Tensor& src, Tensor& dst) = 0;
  // A copy between two devices of this backend (src's device may be another index)
  // without staging through the host; false where the backend cannot.
  virtual bool copy_on_device(const Tensor& /*src*/, Tensor& /*dst*/) { return false; }

  // Whether a kernel exists for this node with these input dtypes (empty: not known
  // yet, asked at load); `why` says why not.
  virtual bool supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const = 0;

  // The state prepare() would make for this node with these inputs (constants carry
  // their values); asked while planning, before anything is allocated.
  virtual PrepareInfo prepare_info(const Node& /*node*/, int64_t /*opset*/,
                                   const std::vector<const ValueInfo*>& /*inputs*/) const {
    return {};
  }
  // Makes that state (nullptr: the node needs none).
  virtual std::unique_ptr<KernelState> prepare(const Node& /*node*/, int64_t /*opset*/,
                                               const std::vector<const ValueInfo*>& /*inputs*/) {
    return nullptr;
  }

  // The block of channels in which this backend's convolutions read and write activations
  // fastest (vlrt.BlockedConv, src/ops/layout_semantics.h); 0: it has no such layout.
  virtual int64_t conv_channel_block() const { return 0; }
  // Whether the prepared kernels of vlrt.FusedMatMul (and Gather), and of vlrt.BlockedConv, read
  // a float16 or bfloat16 weight as stored, half the bytes (passes/half_weights.h); false: such
  // weights are widened at load.
  virtual bool reads_half_product_weights() const { return false; }
  virtual bool reads_half_conv_weights() const { return false; }
  // Whether 8-bit integer products run faster here than float32 ones, and exactly: a QDQ model
  // then runs as integer ops unless asked otherwise (SessionOptions::fuse_qdq).
  virtual bool fast_integer_products() const { return false; }
  // From now on, Conv, MatMul and Gemm with constant float32 weights multiply bfloat16 values with
  // float32 sums (their weights held in bfloat16), where this backend has kernels for it; returns
  // whether it does what was asked. Call before any node is prepared.
  virtual bool use_bf16_products(bool on) { return !on; }
  // Whether its QLinearConv kernels read and write activations channels-last ([N, H, W, C]) without
  // converting them: quantized convolutions then run so (passes/qlinear_channels_last.cpp).
  virtual bool channels_last_integer_convs() const { return false; }

  // Runs one node. Inputs and outputs are on this device, outputs allocated with their
  // final shapes; an input the state replaced may be nullptr. Work may be queued:
  // copies and kernels run in order, synchronize() waits for them.
  virtual void execute(const Node& node, int64_t opset, KernelState* state,
                       const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) = 0;
  virtual void synchronize() {}
};

// Options every backend factory receives.
struct BackendConfig {
  int threads = 0;  // host threads a CPU-side backend may use (<= 0: all cores)
};

// A backend kind as it registers itself from its own folder.
struct BackendInfo {
  std::string kind;         // "cpu", "opencl", ...: the device name before ':'
  std::string description;  // one line for `vlrt doctor`
  // The backend for device `index`; fails naming the device when it is not available.
  std::function<std::shared_ptr<Backend>(int index, const BackendConfig& config)> create;
  // Devices of this kind present here (0: none); `why` says why there are none.
  std::function<int(std::string* why)> device_count;
};

// Adds a kind; a second registration of the same kind is an error.
void register_backend(BackendInfo info);
// Every registered kind, in registration order (cpu first).
const std::vector<BackendInfo>& registered_backends();
// nullptr when no backend of this kind is in this build.
const BackendInfo* find_backend(const std::string& kind);

// Registers a backend at program start: VLRT_REGISTER_BACKEND(opencl, "...", create, count).
#define VLRT_REGISTER_BACKEND(kind_, description_, create_, count_)              \
  static const bool vlrt_backend_registered_##kind_ = [] {                       \
    ::vlrt::register_backend({#kind_, description_, create_, count_});           \
    return true;                                                                 \
  }()

// Parses "cpu", "cpu:1", "opencl:0"; fails on a kind no backend registered.
Device parse_device(const std::string& s);

// The kinds of the backends in this build ("cpu", "opencl", ...).
std::vector<std::string> built_backends();

// A new backend for a device; fails naming the device when it is not available.
std::shared_ptr<Backend> create_backend(const Device& d, int threads = 0);

// Runs one node on `b` outside any plan: infers output shapes from the real inputs
// (on the host), allocates them on b, prepares and executes. Output i is undefined
// (Tensor{}) where node.outputs[i] is empty; a view's output shares its input's memory.
// Errors are prefixed with the node's label and input shapes. Used by constant folding.
std::vector<Tensor> run_node(Backend& b, const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs);

}  // namespace vlrt

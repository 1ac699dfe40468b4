// The CPU backend's kernel interface. A kernel receives inputs and outputs already
// allocated on the host with the shapes inferred by the op's schema.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "graph/graph.h"

namespace vlrt {

struct PackedIntegerWeight;

class KernelContext {
 public:
  KernelContext(const Node& node, int64_t opset, ThreadPool& pool, std::vector<const Tensor*> inputs,
                std::vector<Tensor*> outputs)
      : node(node), opset(opset), pool(pool), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

  const Node& node;
  const int64_t opset;
  ThreadPool& pool;

  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& input(size_t i) const;
  size_t output_count() const { return outputs_.size(); }
  // False for an optional output the model does not use.
  bool has_output(size_t i) const { return i < outputs_.size() && outputs_[i] != nullptr; }
  Tensor& output(size_t i);

  // The node's constant weight as a prepared kernel packed it once (the integer products of
  // backends/cpu/packed_integer.h); nullptr: a kernel that wants it packed packs it per call.
  const PackedIntegerWeight* packed_weight = nullptr;

 private:
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor*> outputs_;
};

using KernelFn = void (*)(KernelContext&);

struct CpuKernel {
  KernelFn fn = nullptr;
  // false: float16/bfloat16 inputs and outputs are converted to float32 around the call.
  bool handles_half = false;
};

// Keyed like the schemas: op_key(domain, op_type).
using CpuKernelTable = std::map<std::string, CpuKernel>;

const CpuKernelTable& cpu_kernels();
// nullptr when the CPU backend has no kernel for this op.
const CpuKernel* find_cpu_kernel(const std::string& domain, const std::string& op_type);

// Family registration, one per file of src/backends/cpu/ops/.
void register_elementwise_kernels(CpuKernelTable& t);
void register_linalg_kernels(CpuKernelTable& t);
void register_normalization_kernels(CpuKernelTable& t);
void register_reduction_kernels(CpuKernelTable& t);
void register_spatial_kernels(CpuKernelTable& t);
void register_tensor_kernels(CpuKernelTable& t);
void register_loss_kernels(CpuKernelTable& t);
void register_misc_kernels(CpuKernelTable& t);
void register_recurrent_kernels(CpuKernelTable& t);
void register_contrib_kernels(CpuKernelTable& t);
void register_signal_kernels(CpuKernelTable& t);
void register_quantization_kernels(CpuKernelTable& t);
void register_quantization_contrib_kernels(CpuKernelTable& t);
void register_sequence_kernels(CpuKernelTable& t);
void register_tfidf_kernels(CpuKernelTable& t);
void register_fused_kernels(CpuKernelTable& t);
void register_layout_kernels(CpuKernelTable& t);

}  // namespace vlrt

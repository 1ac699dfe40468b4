// The CPU backend on host memory: oneDNN's kernels for convolutions and products with
// constant weights (onednn.h), the reference kernels of src/backends/cpu/ops for the rest.
// VLRT_REFERENCE_KERNELS=1 in the environment runs the reference kernels alone.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "core/thread_pool.h"

namespace vlrt {

class CpuBackend : public Backend {
 public:
  // With its own pool of `threads` workers (<= 0: all cores).
  CpuBackend(int index, int threads);
  // On a pool the caller owns and keeps alive.
  CpuBackend(int index, ThreadPool& pool);
  Device device() const override { return Device{kCpuKind, index_}; }
  bool host_visible() const override { return true; }
  size_t memory_capacity() const override;
  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void copy_from_host(const Tensor& src, Tensor& dst) override;
  void copy_to_host(const Tensor& src, Tensor& dst) override;
  bool copy_on_device(const Tensor& src, Tensor& dst) override;
  bool supports(const Node& node, const std::vector<DType>& input_dtypes, std::string* why) const override;
  // Weights oneDNN's kernel packs; the reference kernels hold nothing.
  PrepareInfo prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs) const override;
  // The node's oneDNN kernel with its packed weights, or its reference kernel looked up
  // once per plan instead of at every run.
  std::unique_ptr<KernelState> prepare(const Node& node, int64_t opset,
                                       const std::vector<const ValueInfo*>& inputs) override;
  // oneDNN's block; 0 on the reference kernels.
  int64_t conv_channel_block() const override;
  bool reads_half_product_weights() const override;
  bool reads_half_conv_weights() const override;
  // oneDNN's uint8 x int8 kernels with VNNI (onednn_exact_integer_products); not on the reference kernels.
  bool fast_integer_products() const override;
  bool channels_last_integer_convs() const override;
  // oneDNN's bfloat16 kernels, where it has them for this CPU (onednn_bf16_products); not on the
  // reference kernels.
  bool use_bf16_products(bool on) override;
  void execute(const Node& node, int64_t opset, KernelState* state, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs) override;
  ThreadPool& pool() { return *pool_; }
  // Whether every node runs its reference kernel (set from VLRT_REFERENCE_KERNELS).
  bool reference_kernels() const { return reference_kernels_; }
  void set_reference_kernels(bool on) { reference_kernels_ = on; }

 private:
  int index_;
  bool reference_kernels_;
  bool bf16_products_ = false;
  std::unique_ptr<ThreadPool> owned_pool_;
  ThreadPool* pool_;
};

// Whether the CPU backend computes this node: a kernel, or a view (Reshape, Unsqueeze ...).
bool cpu_computes(const Node& node);

struct CpuKernel;

// Calls the CPU kernel of `node` (`kernel`, or looked up when nullptr) on allocated
// outputs (nullptr: output not used). float16/bfloat16 tensors are converted to
// float32 around kernels that ask for it.
void call_cpu_kernel(const Node& node, int64_t opset, ThreadPool& pool, const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs, const CpuKernel* kernel = nullptr);

// run_node on the CPU with `pool`: the reference result of one node (tests, tools).
std::vector<Tensor> run_node_cpu(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                                 ThreadPool& pool);

}  // namespace vlrt

#include "backends/cpu/kernel.h"

#include "ops/op_schema.h"

namespace vlrt {

const Tensor& KernelContext::input(size_t i) const {
  if (!has_input(i)) fail("required input ", i, " is missing");
  return *inputs_[i];
}

Tensor& KernelContext::output(size_t i) {
  if (!has_output(i)) fail("output ", i, " is not produced by this node");
  return *outputs_[i];
}

const CpuKernelTable& cpu_kernels() {
  static const CpuKernelTable table = [] {
    CpuKernelTable t;
    register_elementwise_kernels(t);
    register_linalg_kernels(t);
    register_normalization_kernels(t);
    register_reduction_kernels(t);
    register_spatial_kernels(t);
    register_tensor_kernels(t);
    register_loss_kernels(t);
    register_misc_kernels(t);
    register_recurrent_kernels(t);
    register_contrib_kernels(t);
    register_signal_kernels(t);
    register_quantization_kernels(t);
    register_quantization_contrib_kernels(t);
    register_sequence_kernels(t);
    register_tfidf_kernels(t);
    register_fused_kernels(t);
    register_layout_kernels(t);
    return t;
  }();
  return table;
}

const CpuKernel* find_cpu_kernel(const std::string& domain, const std::string& op_type) {
  auto& t = cpu_kernels();
  auto it = domain.empty() ? t.find(op_type) : t.find(op_key(domain, op_type));
  return it == t.end() ? nullptr : &it->second;
}

}  // namespace vlrt

#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "backends/cpu/direct_conv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/packed_integer.h"
#include "backends/cpu/packed_matmul.h"
#include "backends/cpu/winograd_conv.h"
#include "core/reference_mode.h"

namespace vlrt {

namespace {

void f32_to_half(const Tensor& src, Tensor& dst) {
  const float* s = src.data<float>();
  auto d = static_cast<uint16_t*>(dst.raw());
  for (int64_t i = 0; i < src.numel(); i++)
    d[i] = dst.dtype() == DType::f16 ? float_to_half(s[i]) : float_to_bf16(s[i]);
}

int count_cpus(std::string*) { return 1; }

// cpu:N (N >= 1) is a simulated second CPU device with its own memory, for trying
// placements, splits and transfers on a machine with one CPU.
std::shared_ptr<Backend> make_cpu_backend(int index, const BackendConfig& config) {
  cpu_isa();  // a bad VLRT_CPU_ISA fails here, before any kernel runs
  return std::make_shared<CpuBackend>(index, config.threads);
}

}  // namespace

VLRT_REGISTER_BACKEND(cpu, "the host CPU: oneDNN, OpenBLAS and reference kernels", make_cpu_backend, count_cpus);

CpuBackend::CpuBackend(int index, int threads)
    : index_(index), reference_kernels_(reference_kernels_requested()), owned_pool_(std::make_unique<ThreadPool>(threads)), pool_(owned_pool_.get()) {}

CpuBackend::CpuBackend(int index, ThreadPool& pool)
    : index_(index), reference_kernels_(reference_kernels_requested()), pool_(&pool) {}

size_t CpuBackend::memory_capacity() const {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

std::shared_ptr<Buffer> CpuBackend::allocate(size_t bytes) {
  auto b = host_alloc(bytes);
  b->device = device();
  return b;
}

void CpuBackend::copy_from_host(const Tensor& src, Tensor& dst) {
  VLRT_CHECK(src.nbytes() == dst.nbytes(), "copy of ", src.describe(), " into ", dst.describe());
  if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

void CpuBackend::copy_to_host(const Tensor& src, Tensor& dst) { copy_from_host(src, dst); }

bool CpuBackend::copy_on_device(const Tensor& src, Tensor& dst) {
  copy_from_host(src, dst);
  return true;
}

bool cpu_computes(const Node& node) {
  const OpSchema* s = find_schema(node.domain, node.op_type);
  return s && (s->alias_input >= 0 || find_cpu_kernel(node.domain, node.op_type));
}

bool CpuBackend::supports(const Node& node, const std::vector<DType>&, std::string* why) const {
  if (cpu_computes(node)) return true;
  if (why) *why = cat("no CPU kernel for ", node.op_type);
  return false;
}

namespace {

struct ResolvedKernel : KernelState {
  explicit ResolvedKernel(const CpuKernel* k) : kernel(k) {}
  const CpuKernel* kernel;
};

}  // namespace

PrepareInfo CpuBackend::prepare_info(const Node& node, int64_t opset,
                                     const std::vector<const ValueInfo*>& inputs) const {
  if (reference_kernels_) return {};
  if (bf16_products_)
    if (PrepareInfo bf16 = onednn_prepare_info(node, opset, inputs, pool_->size(), true); bf16.bytes)
      return bf16;
  if (PrepareInfo winograd = winograd_prepare_info(node, opset, inputs); winograd.bytes) return winograd;
  if (PrepareInfo packed = packed_matmul_prepare_info(node, inputs); packed.bytes) return packed;
  if (PrepareInfo direct = direct_conv_prepare_info(node, opset, inputs); direct.bytes) return direct;
  if (PrepareInfo onednn = onednn_prepare_info(node, opset, inputs, pool_->size()); onednn.bytes)
    return onednn;
  return packed_integer_prepare_info(node, inputs);
}

std::unique_ptr<KernelState> CpuBackend::prepare(const Node& node, int64_t opset,
                                                 const std::vector<const ValueInfo*>& inputs) {
  if (!reference_kernels_) {
    if (bf16_products_)
      if (std::unique_ptr<PreparedKernel> bf16 =
              make_onednn_kernel(node, opset, inputs, pool_->size(), true)) {
        pool_->use_openmp();
        return bf16;
      }
    if (std::unique_ptr<PreparedKernel> fast = make_winograd_conv(node, opset, inputs)) return fast;
    if (std::unique_ptr<PreparedKernel> fast = make_packed_matmul(node, inputs)) return fast;
    if (std::unique_ptr<PreparedKernel> fast = make_direct_conv(node, opset, inputs)) return fast;
    if (std::unique_ptr<PreparedKernel> fast = make_onednn_kernel(node, opset, inputs, pool_->size())) {
      pool_->use_openmp();  // oneDNN runs on OpenMP's threads: the pool's loops join them
      return fast;
    }
    if (std::unique_ptr<PreparedKernel> fast = make_packed_integer(node, opset, inputs, *pool_)) return fast;
  }
  const CpuKernel* k = find_cpu_kernel(node.domain, node.op_type);
  return k ? std::make_unique<ResolvedKernel>(k) : nullptr;
}

// vlrt's direct, Winograd and depthwise convolutions read blocks of 8 channels, and run on every
// AVX2 CPU, AVX-512 ones included: on a Zen 4 (AVX-512, 2 threads) they ran mobilenet_v3_large
// in 4.2 ms and resnet50 in 37.7 ms against 6.5 and 58.5 on oneDNN's blocks of 16. Without
// them the block is oneDNN's; VLRT_ONEDNN_CONV_LAYOUT=plain or nhwc turns blocks off for both.
int64_t CpuBackend::conv_channel_block() const {
  if (reference_kernels_) return 0;
  int64_t onednn_block = onednn_conv_channel_block();
  return onednn_block != 0 && direct_conv_available() ? 8 : onednn_block;
}

// bfloat16 products come before vlrt's own float32 kernels: on a Zen 4 (AVX512-BF16, 2 threads,
// medians of interleaved runs) they ran resnet50 in 23.7 ms against 36.5, convnext_tiny 29.5
// against 52.2, mobilenet_v3_large 3.2 against 4.2 (its depthwise convolutions stay float32), and
// bert_base at 32 tokens in 17.6 against 33.4. The converted activations (oneDNN's bfloat16
// convolutions read channels-last) cost less than the float32 kernels they replace.
bool CpuBackend::use_bf16_products(bool on) {
  bf16_products_ = on && !reference_kernels_ && onednn_bf16_products();
  return bf16_products_ == on;
}

// With VNNI a QDQ resnet50 (onnxruntime's quantize_static) ran in 12.3 ms as integer ops against
// 45 ms as fake-quantized float32 convolutions, and the demo detector's int8 copy in 4.0 against
// 6.0 ms (Zen 4, 2 threads). Without VNNI the exact integer products are no faster than float ones.
bool CpuBackend::fast_integer_products() const {
  return !reference_kernels_ && onednn_exact_integer_products();
}

// oneDNN's integer convolutions compute channels-last: on plain NCHW activations each QLinearConv
// converted its input and output (QDQ resnet50: a third of its time in those conversions).
bool CpuBackend::channels_last_integer_convs() const { return fast_integer_products(); }

bool CpuBackend::reads_half_product_weights() const {
  return !reference_kernels_ && packed_matmul_available();
}

// The direct and Winograd convolutions take blocks of 8 channels (oneDNN's block on AVX2).
bool CpuBackend::reads_half_conv_weights() const { return !reference_kernels_ && direct_conv_available(); }

void CpuBackend::execute(const Node& node, int64_t opset, KernelState* state,
                         const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
  if (auto* fast = dynamic_cast<PreparedKernel*>(state)) return fast->run(inputs, outputs, *pool_);
  call_cpu_kernel(node, opset, *pool_, inputs, outputs, state ? static_cast<ResolvedKernel*>(state)->kernel : nullptr);
}

void call_cpu_kernel(const Node& node, int64_t opset, ThreadPool& pool, const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs, const CpuKernel* kernel) {
  if (!kernel) kernel = find_cpu_kernel(node.domain, node.op_type);
  if (!kernel) unsupported(node.label(), ": the CPU backend has no kernel for ", node.op_type);
  bool convert = false;
  if (!kernel->handles_half) {
    for (auto* t : inputs) convert = convert || (t && dtype_is_half(t->dtype()));
    for (auto* t : outputs) convert = convert || (t && dtype_is_half(t->dtype()));
  }
  if (!convert) {
    KernelContext ctx(node, opset, pool, inputs, outputs);
    kernel->fn(ctx);
    return;
  }
  // float16/bfloat16 storage, float32 compute.
  std::vector<Tensor> conv_in(inputs.size()), conv_out(outputs.size());
  std::vector<const Tensor*> k_in = inputs;
  std::vector<Tensor*> k_out = outputs;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (inputs[i] && dtype_is_half(inputs[i]->dtype())) {
      conv_in[i] = inputs[i]->converted(DType::f32);
      k_in[i] = &conv_in[i];
    }
  }
  for (size_t i = 0; i < outputs.size(); i++) {
    if (outputs[i] && dtype_is_half(outputs[i]->dtype())) {
      conv_out[i] = Tensor(DType::f32, outputs[i]->shape());
      k_out[i] = &conv_out[i];
    }
  }
  KernelContext ctx(node, opset, pool, k_in, k_out);
  kernel->fn(ctx);
  for (size_t i = 0; i < outputs.size(); i++)
    if (conv_out[i].defined()) f32_to_half(conv_out[i], *outputs[i]);
}

std::vector<Tensor> run_node_cpu(const Node& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                                 ThreadPool& pool) {
  CpuBackend cpu(0, pool);
  return run_node(cpu, node, opset, inputs);
}

}  // namespace vlrt

#include "backends/cpu/packed_matmul.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/ops/fused.h"
#include "backends/cpu/prepare_util.h"
#include "core/error.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

namespace {


struct Plan {
  int64_t k = 0, n = 0;
  bool transposed = false;  // B given as [N, K]
  bool bias = false, sum = false;
  FusedActivation act;
  DType weight = DType::f32;  // f16 or bf16: B held as stored

  int64_t panels() const { return (n + 15) / 16; }
  size_t packed_values() const { return size_t(panels() * k * 16); }
  size_t packed_bytes() const { return packed_values() * dtype_size(weight); }
};

std::optional<Plan> plan_packed(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (!packed_matmul_available()) return std::nullopt;
  bool gemm = node.domain.empty() && node.op_type == "Gemm";
  bool fused = node.domain == "vlrt" && node.op_type == "FusedMatMul";
  if (!gemm && !fused && !(node.domain.empty() && node.op_type == "MatMul")) return std::nullopt;
  const ValueInfo *a = input_info(inputs, 0), *w = input_info(inputs, 1),
                  *c = gemm || fused ? input_info(inputs, 2) : nullptr, *z = fused ? input_info(inputs, 3) : nullptr;
  if (!is_f32(a) || a->shape.size() < 2 || !(is_f32_constant(w) || (fused && is_half_constant(w))) || w->shape.size() != 2)
    return std::nullopt;
  Plan p;
  p.weight = w->dtype;
  p.transposed = (gemm || fused) && node.attr_int("transB", 0) != 0;
  if (gemm) {
    if (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.0f) != 1.0f) return std::nullopt;
    if (a->shape.size() != 2) return std::nullopt;
    float beta = node.attr_float("beta", 1.0f);
    if (c && beta == 0) c = nullptr;
    if (c && beta != 1) return std::nullopt;
  }
  p.k = p.transposed ? w->shape[1] : w->shape[0];
  p.n = p.transposed ? w->shape[0] : w->shape[1];
  if (p.k == 0 || p.n == 0) return std::nullopt;
  if (a->shape.back() != p.k) return std::nullopt;
  if (c && !(is_f32(c) && shape_numel(c->shape) == p.n && (c->shape.size() == 1 || c->shape == Shape{1, p.n})))
    return std::nullopt;
  // The residual must be the product's shape (the reference kernel refuses a broadcast one).
  if (z && !(is_f32(z) && shape_numel(z->shape) == shape_numel(a->shape) / p.k * p.n))
    return std::nullopt;
  p.bias = c != nullptr;
  p.sum = z != nullptr;
  if (fused) p.act = fused_conv_activation(node);
  return p;
}

// A 2-D Conv whose kernel tiles the image (stride = kernel, no padding, no dilation, one
// group: a vision transformer's patch embedding) is the product of its patches [N*OH*OW,
// C*KH*KW] with W [OC, C*KH*KW] transposed: it runs on the same packed product, so a model
// whose only convolution is that one needs no oneDNN kernel.
struct PatchPlan {
  Plan product;  // k = C*KH*KW, n = OC, B transposed
  int64_t kh = 0, kw = 0;
};

std::optional<PatchPlan> plan_patches(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (!packed_matmul_available()) return std::nullopt;
  if (!node.domain.empty() || node.op_type != "Conv") return std::nullopt;
  const ValueInfo *x = input_info(inputs, 0), *w = input_info(inputs, 1), *b = input_info(inputs, 2);
  if (!is_f32(x) || x->shape.size() != 4 || !is_f32_constant(w) || w->shape.size() != 4)
    return std::nullopt;
  int64_t kh = w->shape[2], kw = w->shape[3];
  auto ints = [&](const char* name, std::vector<int64_t> fallback) { return node.attr_ints(name, std::move(fallback)); };
  if (node.attr_int("group", 1) != 1 || ints("strides", {1, 1}) != std::vector<int64_t>{kh, kw} ||
      ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1} || ints("pads", {0, 0, 0, 0}) != std::vector<int64_t>{0, 0, 0, 0} ||
      node.attr_string("auto_pad", "NOTSET") != "NOTSET" || x->shape[1] != w->shape[1] || kh * kw == 1 ||
      x->shape[2] % kh != 0 || x->shape[3] % kw != 0 || shape_numel(x->shape) == 0)
    return std::nullopt;
  if (b && !(is_f32(b) && shape_numel(b->shape) == w->shape[0])) return std::nullopt;
  PatchPlan p;
  p.kh = kh;
  p.kw = kw;
  p.product.k = w->shape[1] * kh * kw;
  p.product.n = w->shape[0];
  p.product.transposed = true;
  p.product.bias = b != nullptr;
  return p;
}

template <class W>
using Panels = std::vector<W, CacheLineAllocator<W>>;

// B in panels of 16 columns, k rows of 16 values each, the last panel padded with zeros.
template <class W>
Panels<W> pack(const Plan& p, const Tensor& weights) {
  Panels<W> panels(p.packed_values(), W{});
  const W* w = weights.data<W>();
  for (int64_t j = 0; j < p.n; j++)
    for (int64_t t = 0; t < p.k; t++)
      panels[size_t((j / 16 * p.k + t) * 16 + j % 16)] = p.transposed ? w[j * p.k + t] : w[t * p.n + j];
  return panels;
}

template <class W>
class PackedMatMul : public PreparedKernel {
 public:
  PackedMatMul(Plan p, const Tensor& weights) : plan_(std::move(p)), panels_(pack<W>(plan_, weights)) {}

  size_t bytes() const override { return panels_.size() * sizeof(W); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    const Tensor& a = *in[0];
    Tensor& y = *out[0];
    const int64_t k = plan_.k, n = plan_.n, m = a.numel() / k;
    VLRT_CHECK(a.rank() >= 2 && a.shape().back() == k && y.numel() == m * n, "MatMul prepared for K=", k,
               " and N=", n, " got A ", shape_str(a.shape()), " and Y ", shape_str(y.shape()));
    if (plan_.sum)
      VLRT_CHECK(in[3]->numel() == y.numel(), "the residual Z ", shape_str(in[3]->shape()),
                 " is not the product's shape ", shape_str(y.shape()));
    if (m > 0) {
      const packed::ProductJobs jobs(m, k, n);
      // Bias, residual and activation on each block as its job finishes it, while it is in cache.
      const float* bias = plan_.bias ? in[2]->data<float>() : nullptr;
      const float* z = plan_.sum ? in[3]->data<float>() : nullptr;
      float* py = y.data<float>();
      const packed::FinishBlock finish = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        apply_fused_epilogue_block(plan_.act, py, bias, z, n, r0, r1, c0, c1);
      };
      const bool epilogue = bias || z || plan_.act.kind != FusedActivation::none;
      pool.parallel_for(jobs.count(), [&](int64_t begin, int64_t end) {
        packed::products_here(a.data<float>(), k, panels_.data(), n, py, jobs, begin, end,
                              epilogue ? &finish : nullptr);
      });
    }
  }

 private:
  Plan plan_;
  Panels<W> panels_;
};

class PatchConv : public PreparedKernel {
 public:
  PatchConv(PatchPlan p, const Tensor& weights) : plan_(std::move(p)), panels_(pack<float>(plan_.product, weights)) {}

  size_t bytes() const override { return panels_.size() * sizeof(float); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    const int64_t batch = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), kh = plan_.kh, kw = plan_.kw;
    const int64_t oh = h / kh, ow = w / kw, patches = oh * ow, k = plan_.product.k, n = plan_.product.n;
    VLRT_CHECK(k == c * kh * kw && y.numel() == batch * n * patches, "patch convolution prepared for ", k,
               " values per patch got X ", shape_str(x.shape()));
    thread_local AlignedFloats t_rows, t_products;
    float *rows = grown(t_rows, size_t(patches * k)), *products = grown(t_products, size_t(patches * n));
    const float* bias = plan_.product.bias ? in[2]->data<float>() : nullptr;
    for (int64_t img = 0; img < batch; img++) {
      const float* xi = x.data<float>() + img * c * h * w;
      pool.parallel_for(patches, [&](int64_t begin, int64_t end) {  // each patch as one row (c, i, j)
        for (int64_t p = begin; p < end; p++) {
          float* row = rows + p * k;
          for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < kh; i++) {
              const float* src = xi + (ch * h + p / ow * kh + i) * w + p % ow * kw;
              std::copy(src, src + kw, row + (ch * kh + i) * kw);
            }
        }
      });
      const packed::ProductJobs jobs(patches, k, n);
      pool.parallel_for(jobs.count(), [&](int64_t begin, int64_t end) {
        packed::products_here(rows, k, panels_.data(), n, products, jobs, begin, end);
      });
      float* yi = y.data<float>() + img * n * patches;
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {  // [patches, OC] -> [OC, patches], plus the bias
        for (int64_t o = begin; o < end; o++)
          for (int64_t p = 0; p < patches; p++) yi[o * patches + p] = products[p * n + o] + (bias ? bias[o] : 0.f);
      });
    }
  }

 private:
  PatchPlan plan_;
  Panels<float> panels_;
};

}  // namespace

namespace packed {

namespace {
constexpr int64_t kCachedA = int64_t(4) << 20;       // bytes of A read from the last-level cache
constexpr int64_t kRangeBytes = int64_t(256) << 10;  // bytes of A one range keeps in L2
}  // namespace

ProductJobs::ProductJobs(int64_t m, int64_t k, int64_t n)
    : m_(m), panels_((n + 15) / 16), by_range_(m * k * int64_t(sizeof(float)) > kCachedA) {
  rows_ = by_range_ ? std::max(kRowBlock, kRangeBytes / (k * int64_t(sizeof(float)))) : kRowBlock;
  ranges_ = (m + rows_ - 1) / rows_;
}

void ProductJobs::at(int64_t j, int64_t& panel, int64_t& r0, int64_t& r1) const {
  int64_t range = by_range_ ? j / panels_ : j % ranges_;
  panel = by_range_ ? j % panels_ : j / ranges_;
  r0 = range * rows_;
  r1 = std::min(m_, r0 + rows_);
}

template <class W>
void products_here(const float* a, int64_t k, const W* panels, int64_t n, float* y, const ProductJobs& jobs,
                   int64_t begin, int64_t end, const FinishBlock* finish) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<W, float>) {
    if (cpu_isa() == CpuIsa::avx512) return products_avx512(a, k, panels, n, y, jobs, begin, end, finish);
  }
#endif
  products(a, k, panels, n, y, jobs, begin, end, finish);
}

template void products_here(const float*, int64_t, const float*, int64_t, float*, const ProductJobs&, int64_t,
                            int64_t, const FinishBlock*);
template void products_here(const float*, int64_t, const half_t*, int64_t, float*, const ProductJobs&,
                            int64_t, int64_t, const FinishBlock*);
template void products_here(const float*, int64_t, const bf16_t*, int64_t, float*, const ProductJobs&,
                            int64_t, int64_t, const FinishBlock*);

}  // namespace packed

bool packed_matmul_available() {
  // VLRT_PACKED_MATMUL=0 leaves the products to oneDNN (for measurements).
  static const bool on = enabled_by_env("VLRT_PACKED_MATMUL");
  return on && cpu_isa() >= CpuIsa::avx2;
}

PrepareInfo packed_matmul_prepare_info(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_packed(node, inputs))
    return {p->packed_bytes(), {1}, p->weight == DType::f32 ? "packed product" : cat("packed product (", dtype_name(p->weight), " weight)")};
  if (auto p = plan_patches(node, inputs)) return {p->product.packed_bytes(), {1}, "packed patch conv"};
  return {};
}

std::unique_ptr<PreparedKernel> make_packed_matmul(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_packed(node, inputs)) {
    const Tensor& w = *inputs[1]->value;
    switch (p->weight) {
      case DType::f16: return std::make_unique<PackedMatMul<half_t>>(std::move(*p), w);
      case DType::bf16: return std::make_unique<PackedMatMul<bf16_t>>(std::move(*p), w);
      default: return std::make_unique<PackedMatMul<float>>(std::move(*p), w);
    }
  }
  if (auto p = plan_patches(node, inputs)) return std::make_unique<PatchConv>(std::move(*p), *inputs[1]->value);
  return nullptr;
}

}  // namespace vlrt

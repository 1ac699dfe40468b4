#include "backends/cpu/packed_matmul.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "backends/cpu/isa.h"
#include "backends/cpu/ops/fused.h"
#include "core/error.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

namespace {

// VLRT_PACKED_MATMUL=0 leaves the products to oneDNN (for measurements).
bool packed_matmul_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VLRT_PACKED_MATMUL");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

const ValueInfo* input_at(const std::vector<const ValueInfo*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}

bool is_f32(const ValueInfo* v) { return v && v->dtype == DType::f32 && v->shape_known; }

struct Plan {
  int64_t k = 0, n = 0;
  bool transposed = false;  // B given as [N, K]
  bool bias = false, sum = false;
  FusedActivation act;

  int64_t panels() const { return (n + 15) / 16; }
  size_t packed_floats() const { return size_t(panels() * k * 16); }
};

std::optional<Plan> plan_packed(const Node& node, const std::vector<const ValueInfo*>& inputs) {
#if !defined(__x86_64__)
  return std::nullopt;
#endif
  if (!packed_matmul_enabled() || cpu_isa() < CpuIsa::avx2) return std::nullopt;
  bool gemm = node.domain.empty() && node.op_type == "Gemm";
  bool fused = node.domain == "vlrt" && node.op_type == "FusedMatMul";
  if (!gemm && !fused && !(node.domain.empty() && node.op_type == "MatMul")) return std::nullopt;
  const ValueInfo *a = input_at(inputs, 0), *w = input_at(inputs, 1),
                  *c = gemm || fused ? input_at(inputs, 2) : nullptr, *z = fused ? input_at(inputs, 3) : nullptr;
  if (!a || a->dtype != DType::f32 || !is_f32(w) || !w->value || !w->value->defined() || w->shape.size() != 2)
    return std::nullopt;
  Plan p;
  p.transposed = (gemm || fused) && node.attr_int("transB", 0) != 0;
  if (gemm) {
    if (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.0f) != 1.0f) return std::nullopt;
    if (!a->shape_known || a->shape.size() != 2) return std::nullopt;
    float beta = node.attr_float("beta", 1.0f);
    if (c && beta == 0) c = nullptr;
    if (c && beta != 1) return std::nullopt;
  }
  p.k = p.transposed ? w->shape[1] : w->shape[0];
  p.n = p.transposed ? w->shape[0] : w->shape[1];
  if (p.k == 0 || p.n == 0) return std::nullopt;
  if (a->shape_known && (a->shape.size() < 2 || a->shape.back() != p.k)) return std::nullopt;
  if (c && !(is_f32(c) && shape_numel(c->shape) == p.n && (c->shape.size() == 1 || c->shape == Shape{1, p.n})))
    return std::nullopt;
  // The residual must be the product's shape (the reference kernel refuses a broadcast one).
  if (z && !(is_f32(z) && a->shape_known && shape_numel(z->shape) == shape_numel(a->shape) / p.k * p.n))
    return std::nullopt;
  p.bias = c != nullptr;
  p.sum = z != nullptr;
  if (fused) p.act = fused_conv_activation(node);
  return p;
}

std::vector<float> pack(const Plan& p, const Tensor& weights) {
  std::vector<float> panels(p.packed_floats(), 0.f);
  const float* w = weights.data<float>();
  for (int64_t j = 0; j < p.n; j++)
    for (int64_t t = 0; t < p.k; t++)
      panels[size_t((j / 16 * p.k + t) * 16 + j % 16)] = p.transposed ? w[j * p.k + t] : w[t * p.n + j];
  return panels;
}

class PackedMatMul : public PreparedKernel {
 public:
  PackedMatMul(Plan p, const Tensor& weights) : plan_(std::move(p)), panels_(pack(plan_, weights)) {}

  size_t bytes() const override { return panels_.size() * sizeof(float); }

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
      int64_t jobs = plan_.panels() * ((m + packed::kRowBlock - 1) / packed::kRowBlock);
      pool.parallel_for(jobs, [&](int64_t begin, int64_t end) {
        packed::products(a.data<float>(), m, k, panels_.data(), n, y.data<float>(), begin, end);
      });
    }
    apply_fused_epilogue(pool, plan_.act, y, plan_.bias ? in[2] : nullptr, plan_.sum ? in[3] : nullptr);
  }

 private:
  Plan plan_;
  std::vector<float> panels_;
};

}  // namespace

PrepareInfo packed_matmul_prepare_info(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_packed(node, inputs)) return {p->packed_floats() * sizeof(float), {1}};
  return {};
}

std::unique_ptr<PreparedKernel> make_packed_matmul(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_packed(node, inputs)) return std::make_unique<PackedMatMul>(std::move(*p), *inputs[1]->value);
  return nullptr;
}

}  // namespace vlrt

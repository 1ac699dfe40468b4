#include "backends/cpu/packed_integer.h"

#include <optional>

#include "backends/cpu/integer_gemm.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/quantization.h"
#include "backends/cpu/prepare_util.h"

namespace vlrt {

namespace {

// Where the node's weight and its zero point are, and whether it is a convolution's.
struct WeightSlot {
  size_t weight = 0, zero_point = 0;
  bool conv = false;
  bool transposed = false;  // a matrix given as [n, k]
};

std::optional<WeightSlot> weight_slot(const Node& node) {
  bool onnx = node.domain.empty(), ms = node.domain == "com.microsoft";
  if (onnx && node.op_type == "ConvInteger") return WeightSlot{1, 3, true};
  if (onnx && node.op_type == "QLinearConv") return WeightSlot{3, 5, true};
  if (onnx && node.op_type == "MatMulInteger") return WeightSlot{1, 3, false};
  if (onnx && node.op_type == "QLinearMatMul") return WeightSlot{3, 5, false};
  if (ms && node.op_type == "DynamicQuantizeMatMul") return WeightSlot{1, 3, false};
  if (ms && node.op_type == "MatMulIntegerToFloat") return WeightSlot{1, 5, false};
  if (ms && node.op_type == "QGemm") return WeightSlot{3, 5, false, node.attr_int("transB", 0) != 0};
  return std::nullopt;
}

bool is_8bit_constant(const ValueInfo* v) {
  return v && (v->dtype == DType::u8 || v->dtype == DType::i8) && v->value && v->value->defined();
}

struct Plan {
  WeightSlot slot;
  size_t bytes = 0;
};

std::optional<Plan> plan_packed(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (!integer_gemm_available()) return std::nullopt;
  std::optional<WeightSlot> slot = weight_slot(node);
  if (!slot) return std::nullopt;
  const ValueInfo *w = input_info(inputs, slot->weight), *zp = input_info(inputs, slot->zero_point);
  if (!is_8bit_constant(w) || (zp && !(is_8bit_constant(zp) && zp->value->rank() <= 1))) return std::nullopt;
  const Shape& s = w->value->shape();
  Plan p{*slot};
  if (slot->conv) {
    int64_t group = node.attr_int("group", 1);
    if (s.size() < 3 || group < 1 || s[0] % group != 0) return std::nullopt;
    p.bytes = size_t(group) * integer_gemm_a_elements(s[0] / group, shape_numel(s) / s[0]) * sizeof(int32_t);
  } else {
    if (s.size() != 2) return std::nullopt;
    int64_t k = slot->transposed ? s[1] : s[0], n = slot->transposed ? s[0] : s[1];
    p.bytes = integer_gemm_b_elements(k, n) * sizeof(int16_t);
  }
  return p;
}

std::vector<int32_t> zero_points(const ValueInfo* zp) {
  if (!zp) return {0};
  std::vector<double> v = zp->value->to_double_vector();
  return std::vector<int32_t>(v.begin(), v.end());
}

class PackedIntegerKernel : public PreparedKernel {
 public:
  PackedIntegerKernel(const Node& node, int64_t opset, PackedIntegerWeight weight)
      : node_(node),
        opset_(opset),
        weight_(std::move(weight)),
        kernel_(find_cpu_kernel(node.domain, node.op_type)) {}

  size_t bytes() const override { return weight_.bytes(); }

  void run(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
           ThreadPool& pool) override {
    KernelContext ctx(node_, opset_, pool, inputs, outputs);
    ctx.packed_weight = &weight_;
    kernel_->fn(ctx);
  }

 private:
  Node node_;
  int64_t opset_;
  PackedIntegerWeight weight_;
  const CpuKernel* kernel_;
};

}  // namespace

PrepareInfo packed_integer_prepare_info(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_packed(node, inputs)) return {p->bytes, {}, "packed 8-bit weight (AVX2)"};
  return {};
}

std::unique_ptr<PreparedKernel> make_packed_integer(const Node& node, int64_t opset,
                                                    const std::vector<const ValueInfo*>& inputs,
                                                    ThreadPool& pool) {
  std::optional<Plan> p = plan_packed(node, inputs);
  if (!p || !find_cpu_kernel(node.domain, node.op_type)) return nullptr;
  const Tensor& w = *inputs[p->slot.weight]->value;
  std::vector<int32_t> zp = zero_points(input_info(inputs, p->slot.zero_point));
  PackedIntegerWeight packed = p->slot.conv ? pack_conv_weight(w, node.attr_int("group", 1), zp, pool)
                                            : pack_matmul_weight(w, zp, p->slot.transposed, pool);
  return std::make_unique<PackedIntegerKernel>(node, opset, std::move(packed));
}

}  // namespace vlrt

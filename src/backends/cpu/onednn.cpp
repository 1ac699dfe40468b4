#include "backends/cpu/onednn.h"

#include <omp.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

#include "backends/cpu/isa.h"
#include "backends/cpu/ops/quantization.h"
#include "backends/cpu/prepare_util.h"
#include "backends/cpu/vnni_products.h"
#include "ops/contrib_semantics.h"
#include "ops/fused_semantics.h"
#include "ops/layout_semantics.h"
#include "ops/linalg_semantics.h"
#include "ops/quantization_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A per-thread buffer that grows to the largest size asked of it: the kernels' scratchpads
// and the activations they convert to and from oneDNN's blocked layouts.
class ScratchBuffer {
 public:
  void* get(size_t bytes) {
    if (bytes > size_) {
      data_ = host_alloc(bytes);  // fails (an Error) when memory runs out; the old buffer stays
      size_ = bytes;
    }
    return data_ ? data_->data : nullptr;
  }

 private:
  std::shared_ptr<Buffer> data_;
  size_t size_ = 0;
};

thread_local ScratchBuffer t_scratchpad, t_src, t_dst, t_acc;

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// oneDNN's OpenMP threads follow the session's thread count.
void use_threads(int threads) {
  if (threads > 0 && omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

// A primitive of fewer multiply-adds runs on the calling thread alone: waking OpenMP's team and
// waiting for it costs more than the other threads save (a voice detector's 1-D convolutions).
bool single_threaded(int64_t macs) { return macs < (int64_t(1) << 19); }

memory::dims to_dims(const Shape& s) { return memory::dims(s.begin(), s.end()); }

// How convolutions take their activations: as they are (NCHW: oneDNN then runs im2col +
// GEMM), converted to channels-last, or to the layout oneDNN picks (blocked, the default:
// fastest on resnet50, mobilenet_v3 and convnext even converted around every convolution).
// VLRT_ONEDNN_CONV_LAYOUT=plain|nhwc|blocked picks one for measurements.
enum class ConvLayout { plain, nhwc, blocked };
ConvLayout conv_layout() {
  static const ConvLayout layout = [] {
    const char* v = std::getenv("VLRT_ONEDNN_CONV_LAYOUT");
    std::string s = v ? v : "";
    if (s.empty() || s == "blocked") return ConvLayout::blocked;
    if (s == "nhwc") return ConvLayout::nhwc;
    if (s == "plain") return ConvLayout::plain;
    fail("VLRT_ONEDNN_CONV_LAYOUT=", s, " is not a convolution layout: use plain, nhwc or blocked");
  }();
  return layout;
}

Tag plain_tag(size_t rank) { return rank == 3 ? Tag::ncw : rank == 4 ? Tag::nchw : Tag::ncdhw; }
Tag channels_last_tag(size_t rank) { return rank == 3 ? Tag::nwc : rank == 4 ? Tag::nhwc : Tag::ndhwc; }
Tag weights_tag(size_t rank, bool grouped) {
  if (grouped) return rank == 3 ? Tag::goiw : rank == 4 ? Tag::goihw : Tag::goidhw;
  return rank == 3 ? Tag::oiw : rank == 4 ? Tag::oihw : Tag::oidhw;
}

// Whether oneDNN's post-ops compute the fused node's epilogue exactly: not QuantizeDequantize (it
// divides by its scale and rounds halves to even), and no activation before the sum.
bool onednn_takes_activation(const Node& node) {
  return fused_conv_activation(node).kind != FusedActivation::quantize_dequantize &&
         fused_conv_activation(node, "pre_activation").kind == FusedActivation::none;
}

// FusedConv's activation as oneDNN post-ops after the sum with Z.
void append_activation(const FusedActivation& a, dnnl::post_ops& ops) {
  using A = dnnl::algorithm;
  switch (a.kind) {
    case FusedActivation::none:
      return;
    case FusedActivation::relu:
      return ops.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f);
    case FusedActivation::tanh:
      return ops.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f);
    case FusedActivation::sigmoid:
      return ops.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f);
    case FusedActivation::leaky_relu:
      return ops.append_eltwise(1.f, A::eltwise_relu, a.alpha, 0.f);
    case FusedActivation::clip:
      return ops.append_eltwise(1.f, A::eltwise_clip, a.alpha, a.beta);
    case FusedActivation::hard_sigmoid:
      ops.append_eltwise(1.f, A::eltwise_linear, a.alpha, a.beta);
      return ops.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
    case FusedActivation::hard_swish:  // x * clip(x / 6 + 1/2, 0, 1), as ONNX's HardSwish
      return ops.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f);
    case FusedActivation::silu:
      return ops.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f);
    case FusedActivation::gelu:
      return ops.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f);
    case FusedActivation::fast_gelu:
      return ops.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f);
    case FusedActivation::quantize_dequantize:
      return;  // not taken: onednn_takes_activation
  }
}

// Whether oneDNN's implementation of a bfloat16 primitive is a kernel for this CPU (brgemm or jit on
// AVX512-BF16 or AMX), not its reference loops, slower than the float32 kernels they would replace.
bool native_bf16(const char* impl) { return std::string(impl).find("ref") == std::string::npos; }

// The type in which a float weight is handed to the packing reorder: bfloat16 weights as stored
// when the products are bfloat16 too, everything else widened to float32 first.
memory::data_type stored_weight_type(const ValueInfo* w, bool bf16) {
  return bf16 && w->dtype == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// The weight tensor as stored_weight_type hands it over.
Tensor packing_source(const Tensor& w, bool bf16) {
  return w.dtype() == DType::f32 || (bf16 && w.dtype() == DType::bf16) ? w : w.converted(DType::f32);
}

// A primitive's descriptor with the plain layouts of the node's tensors, or nothing
// where oneDNN does not take the node.
struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  memory::desc x, w, y, z;  // as the node's tensors lie
  bool bias = false, sum = false;
  bool src_zero_point = false;  // ConvInteger, QLinearConv: input 2 is the runtime zero point of x
  bool requantize = false;      // QLinearConv: y is the int32 sum, requantized after
  // QLinearConv with constant scales and y zero point: oneDNN adds the int32 bias (input 8), scales by
  // x_scale * w_scale / y_scale (output scales fixed when the primitive is made) and rounds; with the
  // zero point 0 it saturates into y itself, otherwise into int32 sums to which the zero point is
  // added after.
  bool scaled_output = false;
  int32_t y_zero_point = 0;
  bool channels_last = false;  // com.microsoft QLinearConv with channels_last: x and y [N, D..., C]
  size_t weights() const { return requantize || scaled_output ? 3 : 1; }  // QLinearConv's W is input 3
};

struct MatMulPlan {
  dnnl::matmul::primitive_desc pd;
  memory::desc a, w, y;
  bool bias = false, sum = false;
};

memory::desc activation_desc(const Shape& logical, int64_t block) {
  Tag tag = block == 16 ? Tag::nChw16c : block == 8 ? Tag::nChw8c : plain_tag(logical.size());
  return memory::desc(to_dims(logical), memory::data_type::f32, tag);
}

// A convolution's geometry as oneDNN spells it; grouped weights get a leading group axis.
struct ConvDims {
  memory::dims strides, dilates, pad_l, pad_r, weights;

  dnnl::convolution_forward::desc forward(const memory::desc& src, const memory::desc& w, const memory::desc& bias,
                                          const memory::desc& dst) const {
    return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                           w, bias, dst, strides, dilates, pad_l, pad_r);
  }
};

ConvDims conv_dims(const ConvGeometry& g, const Shape& w) {
  ConvDims d;
  for (size_t i = 3 - (w.size() - 2); i < 3; i++) {
    d.strides.push_back(g.stride[i]);
    d.dilates.push_back(g.dil[i] - 1);
    d.pad_l.push_back(g.pad[i]);
    d.pad_r.push_back((g.out[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] + 1 - g.in[i] - g.pad[i]);
  }
  d.weights = to_dims(w);
  if (g.group > 1) {
    d.weights[0] /= g.group;
    d.weights.insert(d.weights.begin(), g.group);
  }
  return d;
}

// With `bf16` the primitive multiplies bfloat16 activations (converted on the way in) by bfloat16
// weights and sums in float32 into a float32 output.
std::optional<ConvPlan> plan_conv(const Node& node, int64_t opset,
                                  const std::vector<const ValueInfo*>& inputs, bool bf16) {
  bool blocked = node.domain == "vlrt" && node.op_type == "BlockedConv";
  bool fused = blocked || (node.domain == "com.microsoft" && node.op_type == "FusedConv");
  if (!fused && !(node.domain.empty() && node.op_type == "Conv")) return std::nullopt;
  if (fused && !onednn_takes_activation(node)) return std::nullopt;
  const ValueInfo *x = input_info(inputs, 0), *w = input_info(inputs, 1), *b = input_info(inputs, 2),
                  *z = fused ? input_info(inputs, 3) : nullptr;
  // BlockedConv's weights stored in half precision (passes/half_weights.h) are widened when packed.
  if (!is_f32(x) || !(is_f32_constant(w) || (blocked && is_half_constant(w))) || (b && !is_f32(b)) ||
      (z && !is_f32(z)))
    return std::nullopt;
  ConvBlocks blocks = blocked ? conv_blocks(node) : ConvBlocks{};
  for (int64_t block : {blocks.src, blocks.sum, blocks.dst})
    if (block != 0 && block != 8 && block != 16) return std::nullopt;
  std::vector<ValueInfo> out = infer_node(node, opset, inputs);
  if (out.empty() || !out[0].shape_known || out[0].dtype != DType::f32) return std::nullopt;
  size_t rank = w->shape.size();
  if (rank < 3 || rank > 5 || (blocked && rank != 4)) return std::nullopt;
  int64_t in_channels = w->shape[1] * node.attr_int("group", 1), out_channels = w->shape[0];
  // The logical shapes; blocked tensors have one more axis.
  Shape xs = blocks.src ? channel_logical_shape(x->shape, blocks.src, in_channels) : x->shape;
  Shape ys = blocks.dst ? channel_logical_shape(out[0].shape, blocks.dst, out_channels) : out[0].shape;
  if (xs.size() != rank) return std::nullopt;
  if (shape_numel(xs) == 0 || shape_numel(w->shape) == 0 || shape_numel(ys) == 0) return std::nullopt;
  if (z && (blocks.sum ? channel_logical_shape(z->shape, blocks.sum, out_channels) : z->shape) != ys)
    return std::nullopt;
  ConvDims d = conv_dims(conv_geometry(node, xs, w->shape, ys, false), w->shape);
  bool grouped = d.weights.size() > rank;
  if (bf16 && grouped) return std::nullopt;  // depthwise: memory-bound, vlrt's float32 kernels are faster
  memory::dims wd = d.weights;
  ConvPlan p;
  p.x = activation_desc(xs, blocks.src);
  p.y = activation_desc(ys, blocks.dst);
  p.z = activation_desc(ys, blocks.sum);
  p.w = memory::desc(wd, stored_weight_type(w, bf16), weights_tag(rank, grouped));
  p.bias = b != nullptr;
  p.sum = z != nullptr;
  Tag act_tag = conv_layout() == ConvLayout::plain  ? plain_tag(rank)
                : conv_layout() == ConvLayout::nhwc ? channels_last_tag(rank)
                                                    : Tag::any;
  const memory::data_type product_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  // oneDNN's bfloat16 convolutions read and write channels-last (brgconv): they convert, whatever we pass.
  memory::desc src(to_dims(xs), product_type, bf16 ? Tag::any : act_tag),
      dst(to_dims(ys), memory::data_type::f32, act_tag), wany(wd, product_type, Tag::any),
      bias_md = b ? memory::desc({w->shape[0]}, memory::data_type::f32, Tag::x) : memory::desc();
  dnnl::post_ops ops;
  if (p.sum) ops.append_sum(1.f);
  if (fused) append_activation(fused_conv_activation(node), ops);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    p.pd = dnnl::convolution_forward::primitive_desc(d.forward(src, wany, bias_md, dst), attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  if (bf16 && !native_bf16(p.pd.impl_info_str())) return std::nullopt;
  return p;
}

// MatMul, Gemm and vlrt.FusedMatMul (Y = act(A B' + Bias + Z)) with a constant 2-D B.
// With `bf16` as plan_conv's.
std::optional<MatMulPlan> plan_matmul(const Node& node, const std::vector<const ValueInfo*>& inputs,
                                      bool bf16) {
  bool gemm = node.domain.empty() && node.op_type == "Gemm";
  bool fused = node.domain == "vlrt" && node.op_type == "FusedMatMul";
  if (!gemm && !fused && !(node.domain.empty() && node.op_type == "MatMul")) return std::nullopt;
  if (fused && !onednn_takes_activation(node)) return std::nullopt;
  const ValueInfo *a = input_info(inputs, 0), *w = input_info(inputs, 1),
                  *c = gemm || fused ? input_info(inputs, 2) : nullptr, *z = fused ? input_info(inputs, 3) : nullptr;
  // FusedMatMul's B stored in half precision (passes/half_weights.h) is widened when packed.
  if (!is_f32(a) || !(is_f32_constant(w) || (fused && is_half_constant(w))) || w->shape.size() != 2 ||
      a->shape.size() < 2)
    return std::nullopt;
  bool tb = fused && node.attr_int("transB", 0) != 0;
  if (gemm) {
    if (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.0f) != 1.0f || a->shape.size() != 2)
      return std::nullopt;
    tb = node.attr_int("transB", 0) != 0;
    float beta = node.attr_float("beta", 1.0f);
    if (c && beta == 0) c = nullptr;
    if (c && beta != 1) return std::nullopt;
  }
  int64_t k = a->shape.back(), m = shape_numel(a->shape) / std::max<int64_t>(k, 1);
  int64_t n = tb ? w->shape[0] : w->shape[1];
  if ((tb ? w->shape[1] : w->shape[0]) != k || m == 0 || n == 0 || k == 0) return std::nullopt;
  // C as a bias: one value per column.
  if (c && !(is_f32(c) && shape_numel(c->shape) == n && (c->shape.size() == 1 || c->shape == Shape{1, n})))
    return std::nullopt;
  if (z && !(is_f32(z) && shape_numel(z->shape) == m * n)) return std::nullopt;
  MatMulPlan p;
  p.a = memory::desc({m, k}, memory::data_type::f32, Tag::ab);
  p.w = memory::desc({k, n}, stored_weight_type(w, bf16), tb ? Tag::ba : Tag::ab);
  p.y = memory::desc({m, n}, memory::data_type::f32, Tag::ab);
  p.bias = c != nullptr;
  p.sum = z != nullptr;
  const memory::data_type product_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  memory::desc src({m, k}, product_type, Tag::ab), wany({k, n}, product_type, Tag::any),
      bias_md = c ? memory::desc({1, n}, memory::data_type::f32, Tag::ab) : memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (fused) {  // Z is in the output before the product adds to it; then the activation
    dnnl::post_ops ops;
    if (p.sum) ops.append_sum(1.f);
    append_activation(fused_conv_activation(node), ops);
    attr.set_post_ops(ops);
  }
  try {
    p.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wany, bias_md, p.y), attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  if (bf16 && !native_bf16(p.pd.impl_info_str())) return std::nullopt;
  return p;
}

// MatMulInteger(A uint8, B a constant int8 or uint8 [K, N], A_zp one value, B_zp constant) and
// com.microsoft DynamicQuantizeMatMul (A float32, quantized on the fly as DynamicQuantizeLinear
// does; the product dequantized with per-tensor or per-column B scales and a bias): a u8s8s32
// matmul whose A zero point is a runtime value of the primitive. oneDNN takes int8 weights
// without zero points; B - B_zp = B8 + c with B8 = B - 128 (uint8 B) or B (int8 B), so
// (A - A_zp)(B - B_zp) = (A - A_zp) B8 + c[j] * rowsum(A - A_zp), c[j] = 128 - B_zp[j] or -B_zp[j],
// the second term added after the matmul where c is not all 0. Where c is all 0 and A has thousands
// of rows, oneDNN also dequantizes DynamicQuantizeMatMul's product: float(sum) * (A_scale * B_scale[j]), then
// + bias[j], the same two roundings as the reference kernel, written as float32 straight into the output.
struct IntegerMatMulPlan {
  dnnl::matmul::primitive_desc pd;
  // y: int32 (the node's output or a scratch accumulator), or float32 where scaled_output.
  memory::desc a, w, y;
  bool quantize_a = false;
  // QLinearMatMul: inputs as ONNX orders them, y requantized from the int32 sum.
  bool requantize = false;
  // DynamicQuantizeMatMul dequantized by oneDNN's output scales, its bias (if any) a post-op.
  bool scaled_output = false, bias = false;
  // The product on vlrt's own VNNI kernel (vnni_products.h) instead of oneDNN's: pd is then not made.
  bool vnni = false;
  size_t weights() const { return requantize ? 3 : 1; }
  size_t weight_bytes() const {
    return vnni ? vnni_panel_bytes(w.dims()[0], w.dims()[1]) : pd.weights_desc().get_size();
  }
  const char* engine() const { return vnni ? "VNNI integer matmul" : "oneDNN integer matmul"; }
};

// B_zp as one value per column (zeros when absent), or nothing when it is not a constant of one or N values.
std::optional<std::vector<int32_t>> column_zero_points(const ValueInfo* zp, int64_t n) {
  if (!zp) return std::vector<int32_t>(size_t(n), 0);
  if (!zp->value || !zp->value->defined() || zp->shape.size() > 1) return std::nullopt;
  std::vector<double> v = zp->value->to_double_vector();
  if (int64_t(v.size()) != n && v.size() != 1) return std::nullopt;
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; j++) out[size_t(j)] = int32_t(v[v.size() == 1 ? 0 : size_t(j)]);
  return out;
}

// The c[j] of IntegerMatMulPlan for B of type `type` with n columns: empty when all are 0.
std::vector<int32_t> column_offsets(DType type, int64_t n, const ValueInfo* zero_point) {
  std::vector<int32_t> c = *column_zero_points(zero_point, n);
  for (int32_t& v : c) v = (type == DType::u8 ? 128 : 0) - v;
  if (std::all_of(c.begin(), c.end(), [](int32_t v) { return v == 0; })) c.clear();
  return c;
}

// oneDNN 2.6 runs a product with runtime output scales on its unpacked gemm kernel: slower than
// the packed brgemm one and a pass of our own until the product has thousands of rows, where the
// pass over the int32 sums costs more (BERT-base int8 at 32 tokens: 12.0 ms packed against 15.7
// scaled; at 128 tokens 42 against 45; GroundingDINO's 22223-row encoder products gain).
constexpr int64_t kScaledOutputRows = 2048;

std::optional<IntegerMatMulPlan> plan_integer_matmul(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  bool dynamic = node.domain == "com.microsoft" && node.op_type == "DynamicQuantizeMatMul";
  bool qlinear = node.domain.empty() && node.op_type == "QLinearMatMul";
  if (!dynamic && !qlinear && !(node.domain.empty() && node.op_type == "MatMulInteger")) return std::nullopt;
  if (!onednn_exact_integer_products()) return std::nullopt;
  const ValueInfo *a = input_info(inputs, 0), *w = input_info(inputs, qlinear ? 3 : 1);
  if (!a || !a->shape_known || a->dtype != (dynamic ? DType::f32 : DType::u8) || a->shape.size() < 2) return std::nullopt;
  if (!w || !w->shape_known || (w->dtype != DType::i8 && w->dtype != DType::u8) || !w->value ||
      !w->value->defined() || w->shape.size() != 2)
    return std::nullopt;
  int64_t k = a->shape.back(), m = shape_numel(a->shape) / std::max<int64_t>(k, 1), n = w->shape[1];
  if (w->shape[0] != k || m == 0 || n == 0 || k == 0) return std::nullopt;
  if (!column_zero_points(input_info(inputs, qlinear ? 5 : 3), n)) return std::nullopt;
  if (qlinear) {  // per-row A scales and zero points are declined
    const ValueInfo *a_scale = input_info(inputs, 1), *a_zp = input_info(inputs, 2), *b_scale = input_info(inputs, 4),
                    *y_scale = input_info(inputs, 6), *y_zp = input_info(inputs, 7);
    if (!is_f32(a_scale) || shape_numel(a_scale->shape) != 1 || !is_f32(y_scale) || shape_numel(y_scale->shape) != 1)
      return std::nullopt;
    if (!is_f32(b_scale) || (shape_numel(b_scale->shape) != 1 && shape_numel(b_scale->shape) != n)) return std::nullopt;
    if (!a_zp || !a_zp->shape_known || a_zp->dtype != DType::u8 || shape_numel(a_zp->shape) != 1) return std::nullopt;
    if (!y_zp || !y_zp->shape_known || shape_numel(y_zp->shape) != 1) return std::nullopt;
  } else if (dynamic) {
    const ValueInfo *scale = input_info(inputs, 2), *bias = input_info(inputs, 4);
    if (!is_f32(scale) || (shape_numel(scale->shape) != 1 && shape_numel(scale->shape) != n)) return std::nullopt;
    if (bias && !(is_f32(bias) && shape_numel(bias->shape) == n)) return std::nullopt;
  } else if (const ValueInfo* a_zp = input_info(inputs, 2)) {  // per-row zero points are declined
    if (!a_zp->shape_known || a_zp->dtype != DType::u8 || shape_numel(a_zp->shape) != 1) return std::nullopt;
  }
  IntegerMatMulPlan p;
  p.quantize_a = dynamic;
  p.requantize = qlinear;
  // Below kScaledOutputRows rows vlrt's VNNI kernel, its dequantization part of the product, is the
  // faster (BERT-base int8 at 32 tokens: 10.3 -> 9.1 ms); above, oneDNN's scaled product (GroundingDINO's
  // encoder products, 22,223 rows: 1061 ms on oneDNN against 1180 ms on the VNNI kernel per run).
  p.vnni = !qlinear && k % 4 == 0 && m < kScaledOutputRows && vnni_products_available();
  p.scaled_output = !p.vnni && dynamic && m >= kScaledOutputRows &&
                    column_offsets(w->dtype, n, input_info(inputs, 3)).empty();
  p.bias = p.scaled_output && input_info(inputs, 4);
  p.a = memory::desc({m, k}, memory::data_type::u8, Tag::ab);
  p.w = memory::desc({k, n}, memory::data_type::s8, Tag::ab);
  if (p.vnni) {
    p.y = memory::desc({m, n}, memory::data_type::s32, Tag::ab);
    return p;
  }
  p.y = memory::desc({m, n}, p.scaled_output ? memory::data_type::f32 : memory::data_type::s32, Tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (p.scaled_output) {
    attr.set_output_scales(shape_numel(input_info(inputs, 2)->shape) == 1 ? 0 : 1 << 1,
                           {DNNL_RUNTIME_F32_VAL});
    if (p.bias) {
      dnnl::post_ops ops;
      ops.append_binary(dnnl::algorithm::binary_add, memory::desc({1, n}, memory::data_type::f32, Tag::ab));
      attr.set_post_ops(ops);
    }
  }
  try {
    memory::desc wany({k, n}, memory::data_type::s8, Tag::any);
    p.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a, wany, p.y), attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  return p;
}

// B as int8 (uint8 B less 128), and its column offsets.
std::pair<Tensor, std::vector<int32_t>> int8_weights(const Tensor& w, const ValueInfo* zero_point) {
  std::vector<int32_t> c = column_offsets(w.dtype(), w.dim(1), zero_point);
  if (w.dtype() != DType::u8) return {w, c};
  Tensor w8(DType::i8, w.shape());
  const uint8_t* from = w.data<uint8_t>();
  int8_t* to = w8.data<int8_t>();
  for (int64_t i = 0; i < w.numel(); i++) to[i] = int8_t(int32_t(from[i]) - 128);
  return {std::move(w8), c};
}

// QLinearConv's and QLinearMatMul's requantization multipliers, x_scale * w_scale / y_scale per output
// channel (or one), as their reference kernels compute them.
std::vector<float> requantize_multipliers(const Tensor& x_scale, const Tensor& w_scale,
                                          const Tensor& y_scale) {
  float xs = float(x_scale.to_double_vector()[0]), ys = float(y_scale.to_double_vector()[0]);
  std::vector<double> ws = w_scale.to_double_vector();
  std::vector<float> multiplier(ws.begin(), ws.end());
  for (float& m : multiplier) m = xs * m / ys;
  return multiplier;
}

// ConvInteger(x uint8, w a constant int8 with zero points 0, x_zp one value) and QLinearConv
// (the same, with per-tensor x and y scales, per-tensor or per-channel w scales, an int32 bias):
// a u8s8s32 convolution with x's zero point a runtime value of the primitive. Padding contributes
// nothing, in oneDNN (whose padding holds the zero point) as in ONNX. With constant scales and y
// zero point oneDNN scales and rounds (ConvPlan::scaled_output); otherwise QLinearConv's int32 sum
// is requantized by the reference kernels' `requantize` (round half to even, then the zero point).
// com.microsoft QLinearConv with channels_last=1 is the same on [N, H, W, C] activations.
std::optional<ConvPlan> plan_conv_integer(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs) {
  bool qlinear = (node.domain.empty() || node.domain == "com.microsoft") && node.op_type == "QLinearConv";
  if (!(qlinear || (node.domain.empty() && node.op_type == "ConvInteger")) || !onednn_exact_integer_products())
    return std::nullopt;
  const ValueInfo *x = input_info(inputs, 0), *w = input_info(inputs, qlinear ? 3 : 1), *x_zp = input_info(inputs, 2);
  if (!x || !x->shape_known || x->dtype != DType::u8) return std::nullopt;
  if (!w || !w->shape_known || w->dtype != DType::i8 || !w->value || !w->value->defined()) return std::nullopt;
  size_t rank = w->shape.size();
  if (rank < 3 || rank > 5 || x->shape.size() != rank) return std::nullopt;
  // com.microsoft QLinearConv with channels_last: the standard node on the channels-first shapes, its
  // tensors described to oneDNN as lying channels-last.
  const bool last = is_channels_last(node);
  ValueInfo x_first;
  std::vector<const ValueInfo*> first_inputs = inputs;
  if (last) {
    x_first = *x;
    x_first.value.reset();
    x_first.shape = channels_first(x->shape);
    first_inputs[0] = x = &x_first;
  }
  const Tag layout = last ? channels_last_tag(rank) : plain_tag(rank);
  std::optional<std::vector<int32_t>> w_zp = column_zero_points(input_info(inputs, qlinear ? 5 : 3), w->shape[0]);
  if (!w_zp || std::any_of(w_zp->begin(), w_zp->end(), [](int32_t v) { return v != 0; })) return std::nullopt;
  if (x_zp && (!x_zp->shape_known || x_zp->dtype != DType::u8 || shape_numel(x_zp->shape) != 1)) return std::nullopt;
  if (qlinear) {
    auto scale = [&](size_t i, int64_t count) {
      const ValueInfo* v = input_info(inputs, i);
      return is_f32(v) && (shape_numel(v->shape) == 1 || shape_numel(v->shape) == count);
    };
    const ValueInfo *y_zp = input_info(inputs, 7), *bias = input_info(inputs, 8);
    if (!scale(1, 1) || !scale(4, w->shape[0]) || !scale(6, 1) || !y_zp || !y_zp->shape_known ||
        shape_numel(y_zp->shape) != 1)
      return std::nullopt;
    if (bias && !(bias->shape_known && bias->dtype == DType::i32 && shape_numel(bias->shape) == w->shape[0]))
      return std::nullopt;
  }
  std::vector<ValueInfo> out = infer_node(last ? as_channels_first(node) : node, opset, first_inputs);
  if (out.empty() || !out[0].shape_known || out[0].dtype != (qlinear ? input_info(inputs, 7)->dtype : DType::i32))
    return std::nullopt;
  const Shape& ys = out[0].shape;
  if (shape_numel(x->shape) == 0 || shape_numel(w->shape) == 0 || shape_numel(ys) == 0) return std::nullopt;
  ConvDims d = conv_dims(conv_geometry(node, x->shape, w->shape, ys, false), w->shape);
  ConvPlan p;
  // With constant scales, oneDNN's epilogue is the reference's requantization to the bit up to the
  // zero point: float(sum) + float(bias) is the int32 sum (both below 2^24 in magnitude), one product
  // by the multiplier, round half to even. A zero point it would add before rounding, which can round a
  // tie the other way: one other than 0 is added to its rounded int32 products after.
  auto constant = [&](size_t i) {
    const ValueInfo* v = input_info(inputs, i);
    return v && v->value && v->value->defined();
  };
  p.scaled_output = qlinear && constant(1) && constant(4) && constant(6) && constant(7);
  if (p.scaled_output) p.y_zero_point = int32_t(input_info(inputs, 7)->value->to_double_vector()[0]);
  memory::data_type y_type = p.scaled_output && p.y_zero_point == 0
                                 ? (out[0].dtype == DType::u8 ? memory::data_type::u8 : memory::data_type::s8)
                                 : memory::data_type::s32;
  p.x = memory::desc(to_dims(x->shape), memory::data_type::u8, layout);
  p.y = p.z = memory::desc(to_dims(ys), y_type, layout);
  p.channels_last = last;
  p.w = memory::desc(d.weights, memory::data_type::s8, weights_tag(rank, d.weights.size() > rank));
  p.src_zero_point = true;
  p.requantize = qlinear && !p.scaled_output;
  p.bias = p.scaled_output && input_info(inputs, 8);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (p.scaled_output) {  // oneDNN's int8 convolutions take the scales when the primitive is made
    std::vector<float> m = requantize_multipliers(
        *input_info(inputs, 1)->value, *input_info(inputs, 4)->value, *input_info(inputs, 6)->value);
    attr.set_output_scales(m.size() == 1 ? 0 : 1 << 1, m);
  }
  try {
    memory::desc src(to_dims(x->shape), memory::data_type::u8, Tag::any), dst(to_dims(ys), y_type, Tag::any),
        wany(d.weights, memory::data_type::s8, Tag::any),
        bias = p.bias ? memory::desc({ys[1]}, memory::data_type::s32, Tag::x) : memory::desc();
    p.pd = dnnl::convolution_forward::primitive_desc(d.forward(src, wany, bias, dst), attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  return p;
}

// The weights in the primitive's layout, copied (and reordered) from the initializer.
memory pack_weights(const memory::desc& plain, const memory::desc& packed, const Tensor& value) {
  memory src(plain, cpu_engine(), const_cast<void*>(value.raw()));
  memory dst(packed, cpu_engine());
  dnnl::reorder(src, dst).execute(thread_stream(), src, dst);
  thread_stream().wait();
  return dst;
}

memory wrap(const memory::desc& d, const Tensor* t) {
  return memory(d, cpu_engine(), const_cast<void*>(t->raw()));
}

// A reorder from `from` to `to`, or none when they are the same layout.
std::optional<dnnl::reorder> reorder_between(const memory::desc& from, const memory::desc& to) {
  if (from == to) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
}

class ConvKernel : public PreparedKernel {
 public:
  ConvKernel(ConvPlan p, const Tensor& weights)
      : plan_(std::move(p)),
        conv_(plan_.pd),
        weights_(pack_weights(plan_.w, plan_.pd.weights_desc(), weights)),
        to_src_(reorder_between(plan_.x, plan_.pd.src_desc())),
        to_dst_(reorder_between(plan_.z, plan_.pd.dst_desc())),
        from_dst_(reorder_between(plan_.pd.dst_desc(), plan_.y)),
        // Every output element takes one weight per input channel of its group and kernel position.
        single_threaded_(single_threaded(shape_numel(plan_.y.dims()) *
                                         (shape_numel(plan_.w.dims()) / plan_.y.dims()[1]))) {}

  size_t bytes() const override { return plan_.pd.weights_desc().get_size(); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    use_threads(single_threaded_ ? 1 : pool.size());
    dnnl::stream& s = thread_stream();
    memory x = wrap(plan_.x, in[0]);
    const bool own_acc = plan_.requantize || plan_.y_zero_point != 0;
    memory y(plan_.y, cpu_engine(), own_acc ? t_acc.get(plan_.y.get_size()) : out[0]->raw());
    memory src = x, dst = y;
    if (to_src_) {
      src = memory(plan_.pd.src_desc(), cpu_engine(), t_src.get(plan_.pd.src_desc().get_size()));
      to_src_->execute(s, x, src);
    }
    if (from_dst_) dst = memory(plan_.pd.dst_desc(), cpu_engine(), t_dst.get(plan_.pd.dst_desc().get_size()));
    if (plan_.sum) {  // Z goes where the convolution adds its result
      if (to_dst_) {
        memory z = wrap(plan_.z, in[3]);
        to_dst_->execute(s, z, dst);
      } else if (dst.get_data_handle() != in[3]->raw()) {
        std::memcpy(dst.get_data_handle(), in[3]->raw(), plan_.z.get_size());
      }
    }
    memory scratch(plan_.pd.scratchpad_desc(), cpu_engine(),
                   t_scratchpad.get(plan_.pd.scratchpad_desc().get_size()));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratch}};
    int32_t x_zp = plan_.src_zero_point && in.size() > 2 && in[2] ? in[2]->data<uint8_t>()[0] : 0;
    if (plan_.src_zero_point)
      args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] =
          memory(memory::desc({1}, memory::data_type::s32, Tag::x), cpu_engine(), &x_zp);
    if (plan_.scaled_output) {
      if (plan_.bias)
        args[DNNL_ARG_BIAS] = wrap(memory::desc({plan_.y.dims()[1]}, memory::data_type::s32, Tag::x), in[8]);
    } else if (plan_.bias) {
      args[DNNL_ARG_BIAS] = wrap(memory::desc({plan_.y.dims()[1]}, memory::data_type::f32, Tag::x), in[2]);
    }
    conv_.execute(s, args);
    if (from_dst_) from_dst_->execute(s, dst, y);
    s.wait();
    if (plan_.requantize) requantize_sum(static_cast<int32_t*>(y.get_data_handle()), in, *out[0], pool);
    if (plan_.y_zero_point != 0)  // the rounded products, plus the zero point, saturated
      requantize(static_cast<int32_t*>(y.get_data_handle()), out[0]->numel(), {1.f}, 1, plan_.y_zero_point,
                 *out[0], &pool);
  }

 private:
  // QLinearConv's epilogue, as its reference kernel: the bias, then y = requantize(sum * x_scale * w_scale / y_scale).
  void requantize_sum(int32_t* acc, const std::vector<const Tensor*>& in, Tensor& y, ThreadPool& pool) const {
    int64_t channels = plan_.y.dims()[1], spatial = y.numel() / std::max<int64_t>(1, y.dim(0) * channels);
    if (plan_.channels_last) {  // rows of `channels` values: one bias and multiplier per column
      if (in.size() > 8 && in[8]) {
        const int32_t* bias = in[8]->data<int32_t>();
        pool.parallel_for(
            y.numel() / std::max<int64_t>(channels, 1),
            [&](int64_t r0, int64_t r1) {
              for (int64_t r = r0; r < r1; r++)
                for (int64_t c = 0; c < channels; c++) acc[r * channels + c] += bias[c];
            },
            grain_for(channels));
      }
      requantize(acc, y.numel(), requantize_multipliers(*in[1], *in[4], *in[6]), 1,
                 int32_t(in[7]->to_double_vector()[0]), y, &pool);
      return;
    }
    if (in.size() > 8 && in[8]) {
      const int32_t* bias = in[8]->data<int32_t>();
      pool.parallel_for(
          y.numel() / std::max<int64_t>(spatial, 1),
          [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; r++) {
              const int32_t b = bias[r % channels];
              for (int32_t* a = acc + r * spatial; a < acc + (r + 1) * spatial; a++) *a += b;
            }
          },
          grain_for(spatial));
    }
    requantize(acc, y.numel(), requantize_multipliers(*in[1], *in[4], *in[6]), spatial,
               int32_t(in[7]->to_double_vector()[0]), y, &pool);
  }

  ConvPlan plan_;
  dnnl::convolution_forward conv_;
  memory weights_;
  std::optional<dnnl::reorder> to_src_, to_dst_, from_dst_;
  bool single_threaded_;
};

class MatMulKernel : public PreparedKernel {
 public:
  MatMulKernel(MatMulPlan p, const Tensor& weights)
      : plan_(std::move(p)),
        matmul_(plan_.pd),
        weights_(pack_weights(plan_.w, plan_.pd.weights_desc(), weights)),
        to_src_(reorder_between(plan_.a, plan_.pd.src_desc())),
        single_threaded_(single_threaded(shape_numel(plan_.y.dims()) * plan_.a.dims().back())) {}

  size_t bytes() const override { return plan_.pd.weights_desc().get_size(); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    use_threads(single_threaded_ ? 1 : pool.size());
    dnnl::stream& s = thread_stream();
    memory scratch(plan_.pd.scratchpad_desc(), cpu_engine(),
                   t_scratchpad.get(plan_.pd.scratchpad_desc().get_size()));
    memory src = wrap(plan_.a, in[0]);
    if (to_src_) {  // bfloat16 products: A rounded to bfloat16
      memory converted(plan_.pd.src_desc(), cpu_engine(), t_src.get(plan_.pd.src_desc().get_size()));
      to_src_->execute(s, src, converted);
      src = converted;
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, weights_},
                                         {DNNL_ARG_DST, wrap(plan_.y, out[0])},
                                         {DNNL_ARG_SCRATCHPAD, scratch}};
    if (plan_.bias)
      args[DNNL_ARG_BIAS] = wrap(memory::desc({1, plan_.y.dims()[1]}, memory::data_type::f32, Tag::ab), in[2]);
    if (plan_.sum && in[3]->raw() != out[0]->raw()) std::memcpy(out[0]->raw(), in[3]->raw(), plan_.y.get_size());
    matmul_.execute(s, args);
    s.wait();
  }

 private:
  MatMulPlan plan_;
  dnnl::matmul matmul_;
  memory weights_;
  std::optional<dnnl::reorder> to_src_;
  bool single_threaded_;
};

class IntegerMatMulKernel : public PreparedKernel {
 public:
  IntegerMatMulKernel(IntegerMatMulPlan p, std::pair<Tensor, std::vector<int32_t>> weights)
      : plan_(std::move(p)), column_offset_(std::move(weights.second)) {
    if (plan_.vnni) {
      vnni_ = pack_vnni_panels(weights.first.data<int8_t>(), weights.first.dim(0), weights.first.dim(1));
    } else {
      matmul_ = dnnl::matmul(plan_.pd);
      weights_ = pack_weights(plan_.w, plan_.pd.weights_desc(), weights.first);
    }
  }

  size_t bytes() const override { return plan_.weight_bytes() + column_offset_.size() * sizeof(int32_t); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    if (!plan_.vnni) use_threads(pool.size());
    int64_t m = plan_.a.dims()[0], k = plan_.a.dims()[1], n = plan_.y.dims()[1];
    const uint8_t* a = nullptr;
    int32_t a_zp = 0;
    float a_scale = 1;
    if (plan_.quantize_a) {  // as DynamicQuantizeLinear
      const float* x = in[0]->data<float>();
      auto* aq = static_cast<uint8_t*>(t_src.get(size_t(m * k)));
      DynamicQuant q = dynamic_quantize(x, m * k, aq, pool);
      a = aq;
      a_zp = q.zero_point;
      a_scale = q.scale;
    } else {
      a = in[0]->data<uint8_t>();
      if (in.size() > 2 && in[2]) a_zp = in[2]->data<uint8_t>()[0];
    }
    if (plan_.vnni) return run_vnni(a, a_zp, a_scale, m, k, n, in, out, pool);
    bool own_acc = (plan_.quantize_a && !plan_.scaled_output) || plan_.requantize;
    auto* acc = static_cast<int32_t*>(own_acc ? t_dst.get(plan_.y.get_size()) : out[0]->raw());
    dnnl::stream& s = thread_stream();
    memory scratch(plan_.pd.scratchpad_desc(), cpu_engine(),
                   t_scratchpad.get(plan_.pd.scratchpad_desc().get_size()));
    memory zp(memory::desc({1}, memory::data_type::s32, Tag::x), cpu_engine(), &a_zp);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(plan_.a, cpu_engine(), const_cast<uint8_t*>(a))},
        {DNNL_ARG_WEIGHTS, weights_},
        {DNNL_ARG_DST, memory(plan_.y, cpu_engine(), acc)},
        {DNNL_ARG_SCRATCHPAD, scratch},
        {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp}};
    std::vector<float> scale;
    if (plan_.scaled_output) {
      scale = product_scales(*in[2], a_scale);
      args[DNNL_ARG_ATTR_OUTPUT_SCALES] = memory(
          memory::desc({int64_t(scale.size())}, memory::data_type::f32, Tag::x), cpu_engine(), scale.data());
      if (plan_.bias)
        args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
            wrap(memory::desc({1, plan_.y.dims()[1]}, memory::data_type::f32, Tag::ab), in[4]);
    }
    matmul_.execute(s, args);
    s.wait();
    if (plan_.scaled_output) return;
    if (!column_offset_.empty()) add_column_offsets(a, a_zp, m, k, n, acc, pool);
    if (plan_.requantize) {  // as QLinearMatMul's reference kernel: sum * (a_scale * b_scale / y_scale)
      requantize(acc, m * n, requantize_multipliers(*in[1], *in[4], *in[6]), 1,
                 int32_t(in[7]->to_double_vector()[0]), *out[0]);
      return;
    }
    if (!plan_.quantize_a) return;
    scale = product_scales(*in[2], a_scale);
    std::vector<float> bias = product_bias(in);
    // Several outputs: vlrt.DynamicQuantizeMatMuls's products, each its own columns of the one product.
    pool.parallel_for(
        m,
        [&](int64_t r0, int64_t r1) {
          int64_t c0 = 0;
          for (Tensor* y : out) {
            int64_t columns = out.size() == 1 ? n : y->dim(-1);
            dequantize_columns_into(acc, n, r0, r1, c0, c0 + columns, scale, bias, y->data<float>(), columns);
            c0 += columns;
          }
        },
        grain_for(n));
  }

 private:
  // The product on the VNNI kernel, each block finished while it is in cache: B's column offsets
  // added, then dequantized into the outputs (DynamicQuantizeMatMul, several for
  // vlrt.DynamicQuantizeMatMuls) or copied into the int32 output (MatMulInteger).
  void run_vnni(const uint8_t* a, int32_t a_zp, float a_scale, int64_t m, int64_t k, int64_t n,
                const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out,
                ThreadPool& pool) const {
    std::vector<uint32_t> row_sums;  // sum_t (A[i, t] - a_zp), for the column offsets
    if (!column_offset_.empty()) {
      row_sums.resize(size_t(m));
      pool.parallel_for(
          m,
          [&](int64_t r0, int64_t r1) {
            for (int64_t i = r0; i < r1; i++) row_sums[size_t(i)] = row_sum(a + i * k, a_zp, k);
          },
          grain_for(k));
    }
    VnniEpilogue e;
    if (!row_sums.empty()) {
      e.column_offsets = column_offset_.data();
      e.row_sums = row_sums.data();
    }
    std::vector<float> scale, bias;
    if (plan_.quantize_a) {
      scale = product_scales(*in[2], a_scale);
      if (scale.size() == 1) scale.assign(size_t(n), scale[0]);
      e.scale = scale.data();
      bias = product_bias(in);
      if (!bias.empty()) e.bias = bias.data();
      int64_t first = 0;  // each output's first column in the product
      for (Tensor* y : out) {
        int64_t columns = out.size() == 1 ? n : y->dim(-1);
        e.outputs.push_back({y->data<float>(), first, columns});
        first += columns;
      }
    } else {
      e.int_out = out[0]->data<int32_t>();
    }
    vnni_products(a, k, m, a_zp, vnni_, e, pool);
  }

  // DynamicQuantizeMatMul's dequantization scales: A's scale times each of B's, as the reference kernel
  // multiplies them.
  static std::vector<float> product_scales(const Tensor& b_scale, float a_scale) {
    std::vector<double> b = b_scale.to_double_vector();
    std::vector<float> scale(b.begin(), b.end());
    for (float& v : scale) v *= a_scale;
    return scale;
  }

  // sum_t (row[t] - a_zp) over k values, wrapped to 32 bits as the products wrap.
  static uint32_t row_sum(const uint8_t* row, int32_t a_zp, int64_t k) {
    uint32_t sum = uint32_t(-a_zp) * uint32_t(k);
    for (int64_t t = 0; t < k; t++) sum += row[t];
    return sum;
  }

  // DynamicQuantizeMatMul's bias (input 4) as float32, or none.
  static std::vector<float> product_bias(const std::vector<const Tensor*>& in) {
    if (in.size() <= 4 || !in[4]) return {};
    std::vector<double> b = in[4]->to_double_vector();
    return std::vector<float>(b.begin(), b.end());
  }

  // acc[i, j] += c[j] * sum_k (A[i, k] - A_zp), wrapping in 32 bits as the products do.
  void add_column_offsets(const uint8_t* a, int32_t a_zp, int64_t m, int64_t k, int64_t n, int32_t* acc,
                          ThreadPool& pool) const {
    const int32_t* c = column_offset_.data();
    pool.parallel_for(
        m,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; i++) {
            uint32_t r = row_sum(a + i * k, a_zp, k);
            uint32_t* y = reinterpret_cast<uint32_t*>(acc + i * n);
            for (int64_t j = 0; j < n; j++) y[j] += uint32_t(c[j]) * r;
          }
        },
        grain_for(k + n));
  }

  IntegerMatMulPlan plan_;
  dnnl::matmul matmul_;  // oneDNN's product and its packed weights, or
  memory weights_;
  VnniPanels vnni_;  // the VNNI kernel's
  std::vector<int32_t> column_offset_;
};

// The constants of vlrt.DynamicQuantizeMatMuls's products side by side, as one DynamicQuantizeMatMul
// of B [K, N_0 + N_1 + ...] takes them: B, a scale and a zero point per column, the biases.
struct JoinedProducts {
  Node node;
  std::vector<ValueInfo> values;  // A, B, B_scale, B_zero_point, Bias
  std::vector<const ValueInfo*> inputs() const {
    std::vector<const ValueInfo*> p;
    for (const ValueInfo& v : values) p.push_back(v.dtype == DType::undefined ? nullptr : &v);
    return p;
  }
};

// Without `weights`, B is only given its joined shape (its contents left unwritten): enough to plan.
std::optional<JoinedProducts> join_products(const Node& node, const std::vector<const ValueInfo*>& inputs,
                                            bool weights) {
  size_t count = dynamic_product_count(node);
  const ValueInfo* a = input_info(inputs, 0);
  if (count < 2 || !a) return std::nullopt;
  std::vector<Tensor> b, scale, zero_point, bias;
  int64_t k = 0, n = 0;
  for (size_t i = 0; i < count; i++) {
    std::vector<const ValueInfo*> p = dynamic_product_inputs(inputs, i);
    auto constant = [&](size_t slot) { return p[slot] && p[slot]->value && p[slot]->value->defined(); };
    if (!constant(1) || !constant(2) || (p[3] && !constant(3)) || (p[4] && !constant(4)) ||
        p[1]->shape.size() != 2)
      return std::nullopt;
    const Tensor& w = *p[1]->value;
    if (i > 0 && (w.dtype() != b[0].dtype() || w.dim(0) != k || bool(p[4]) != !bias.empty()))
      return std::nullopt;
    k = w.dim(0);
    int64_t columns = w.dim(1);
    auto per_column = [&](const Tensor& t, DType type) {  // one value, or one per column
      std::vector<double> v = t.to_double_vector();
      if (int64_t(v.size()) != columns && v.size() != 1) return Tensor();
      Tensor c(type, {columns});
      std::vector<double> all(static_cast<size_t>(columns));
      for (int64_t j = 0; j < columns; j++) all[size_t(j)] = v[v.size() == 1 ? 0 : size_t(j)];
      c.assign_doubles(all);
      return c;
    };
    b.push_back(w);
    scale.push_back(per_column(*p[2]->value, DType::f32));
    zero_point.push_back(p[3] ? per_column(*p[3]->value, w.dtype()) : Tensor::zeros(w.dtype(), {columns}));
    if (p[4]) bias.push_back(per_column(*p[4]->value, DType::f32));
    if (!scale.back().defined() || !zero_point.back().defined() || (p[4] && !bias.back().defined()))
      return std::nullopt;
    n += columns;
  }
  // Side by side along the last axis (B row by row).
  auto join = [&](const std::vector<Tensor>& parts, Shape shape, bool contents = true) {
    Tensor t(parts[0].dtype(), shape);
    if (!contents) return t;
    size_t element = dtype_size(t.dtype()), offset = 0;
    int64_t rows = shape.size() == 2 ? shape[0] : 1;
    for (int64_t r = 0; r < rows; r++)
      for (const Tensor& part : parts) {
        size_t bytes = size_t(part.dim(-1)) * element;
        std::memcpy(static_cast<char*>(t.raw()) + offset,
                    static_cast<const char*>(part.raw()) + size_t(r) * bytes, bytes);
        offset += bytes;
      }
    return t;
  };
  JoinedProducts j;
  j.node = dynamic_product(node, 0);
  j.values.resize(5);
  j.values[0] = *a;
  j.values[1] = known_info(join(b, {k, n}, weights));
  j.values[2] = known_info(join(scale, {n}));
  j.values[3] = known_info(join(zero_point, {n}));
  if (!bias.empty()) j.values[4] = known_info(join(bias, {n}));
  return j;
}

// vlrt.DynamicQuantizeMatMuls on oneDNN. Below kScaledOutputRows rows of A: one product of A, quantized
// once, by every B side by side, dequantized into each output (a single wider product runs nearer
// oneDNN's peak than three narrow ones). From there each product is its own kernel, dequantized by
// oneDNN straight into its output.
class SharedIntegerMatMulKernel : public PreparedKernel {
 public:
  explicit SharedIntegerMatMulKernel(std::unique_ptr<IntegerMatMulKernel> joined, JoinedProducts j)
      : joined_(std::move(joined)), scale_(*j.values[2].value) {
    if (j.values[4].value) bias_ = *j.values[4].value;
  }
  explicit SharedIntegerMatMulKernel(std::vector<std::unique_ptr<IntegerMatMulKernel>> each)
      : each_(std::move(each)) {}

  size_t bytes() const override {
    size_t total = joined_ ? joined_->bytes() : 0;
    for (auto& k : each_) total += k->bytes();
    return total;
  }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    if (joined_) {
      joined_->run({in[0], nullptr, &scale_, nullptr, bias_.defined() ? &bias_ : nullptr}, out, pool);
      return;
    }
    for (size_t i = 0; i < each_.size(); i++) each_[i]->run(dynamic_product_inputs(in, i), {out[i]}, pool);
  }

 private:
  std::unique_ptr<IntegerMatMulKernel> joined_;
  Tensor scale_, bias_;
  std::vector<std::unique_ptr<IntegerMatMulKernel>> each_;
};

bool is_dynamic_quantize_matmuls(const Node& node) {
  return node.domain == "vlrt" && node.op_type == "DynamicQuantizeMatMuls";
}

// How oneDNN runs vlrt.DynamicQuantizeMatMuls: its products joined into one, or each on its own;
// nothing unless it takes every product.
struct SharedProductsPlan {
  std::optional<JoinedProducts> joined_inputs;
  std::optional<IntegerMatMulPlan> joined;
  std::vector<IntegerMatMulPlan> each;

  // The packed weights and column offsets the kernel will hold.
  size_t bytes(const std::vector<const ValueInfo*>& inputs) const {
    auto offsets = [](const ValueInfo* w, const ValueInfo* zero_point) {
      return column_offsets(w->dtype, w->shape[1], zero_point).size() * sizeof(int32_t);
    };
    if (joined) {
      std::vector<const ValueInfo*> j = joined_inputs->inputs();
      return joined->weight_bytes() + offsets(j[1], j[3]);
    }
    size_t total = 0;
    for (size_t i = 0; i < each.size(); i++) {
      std::vector<const ValueInfo*> p = dynamic_product_inputs(inputs, i);
      total += each[i].weight_bytes() + offsets(p[1], p[3]);
    }
    return total;
  }
};

std::optional<SharedProductsPlan> plan_shared_products(const Node& node,
                                                       const std::vector<const ValueInfo*>& inputs,
                                                       bool weights) {
  SharedProductsPlan plan;
  for (size_t i = 0; i < dynamic_product_count(node); i++) {
    std::optional<IntegerMatMulPlan> p =
        plan_integer_matmul(dynamic_product(node, i), dynamic_product_inputs(inputs, i));
    if (!p) return std::nullopt;
    plan.each.push_back(std::move(*p));
  }
  if (plan.each.empty() || plan.each.front().scaled_output) return plan;
  plan.joined_inputs = join_products(node, inputs, weights);
  if (plan.joined_inputs)
    plan.joined = plan_integer_matmul(plan.joined_inputs->node, plan.joined_inputs->inputs());
  if (plan.joined && plan.joined->scaled_output) plan.joined.reset();
  return plan;
}

std::unique_ptr<PreparedKernel> make_shared_integer_matmul(const Node& node,
                                                           const std::vector<const ValueInfo*>& inputs) {
  std::optional<SharedProductsPlan> plan = plan_shared_products(node, inputs, true);
  if (!plan) return nullptr;
  if (plan->joined) {
    std::vector<const ValueInfo*> joined = plan->joined_inputs->inputs();
    auto kernel = std::make_unique<IntegerMatMulKernel>(std::move(*plan->joined),
                                                        int8_weights(*joined[1]->value, joined[3]));
    auto shared =
        std::make_unique<SharedIntegerMatMulKernel>(std::move(kernel), std::move(*plan->joined_inputs));
    joined.clear();
    plan.reset();
#if defined(__GLIBC__)
    malloc_trim(0);  // the joined copy of the weights, freed among lasting allocations: its pages back
#endif
    return shared;
  }
  std::vector<std::unique_ptr<IntegerMatMulKernel>> each;
  for (size_t i = 0; i < plan->each.size(); i++) {
    std::vector<const ValueInfo*> p = dynamic_product_inputs(inputs, i);
    each.push_back(
        std::make_unique<IntegerMatMulKernel>(std::move(plan->each[i]), int8_weights(*p[1]->value, p[3])));
  }
  return std::make_unique<SharedIntegerMatMulKernel>(std::move(each));
}

}  // namespace

// Whether oneDNN's uint8 x int8 kernels are exact here: with VNNI they accumulate each product
// in 32 bits; without it they add pairs of products in saturating 16 bits.
bool onednn_exact_integer_products() {
  using dnnl::cpu_isa;
  static const bool exact = [] {
    cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == cpu_isa::avx512_core_vnni || isa == cpu_isa::avx512_core_bf16 ||
           isa == cpu_isa::avx512_core_amx || isa == cpu_isa::avx2_vnni;
  }();
  return exact;
}

int64_t onednn_conv_channel_block() {
  if (conv_layout() != ConvLayout::blocked) return 0;
  return detected_cpu_isa() == CpuIsa::avx512 ? 16 : 8;
}

bool onednn_bf16_products() {
  using dnnl::cpu_isa;
  static const bool native = [] {
    cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == cpu_isa::avx512_core_bf16 || isa == cpu_isa::avx512_core_amx;
  }();
  return native;
}

PrepareInfo onednn_prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs,
                                int threads, bool bf16_products) {
  use_threads(threads);
  if (auto p = plan_conv(node, opset, inputs, bf16_products))
    return {p->pd.weights_desc().get_size(), {1}, bf16_products ? "oneDNN bf16 conv" : "oneDNN conv"};
  if (auto p = plan_matmul(node, inputs, bf16_products))
    return {p->pd.weights_desc().get_size(), {1}, bf16_products ? "oneDNN bf16 matmul" : "oneDNN matmul"};
  if (auto p = plan_integer_matmul(node, inputs)) {
    const ValueInfo* w = inputs[p->weights()];
    size_t offsets = column_offsets(w->dtype, w->shape[1], input_info(inputs, p->weights() + 2)).size();
    return {p->weight_bytes() + offsets * sizeof(int32_t), {p->weights()}, p->engine()};
  }
  if (is_dynamic_quantize_matmuls(node)) {
    std::optional<SharedProductsPlan> plan = plan_shared_products(node, inputs, false);
    if (!plan) return {};
    PrepareInfo info{plan->bytes(inputs), {}, plan->each.front().engine()};
    for (size_t i = 0; i < plan->each.size(); i++) info.replaced_inputs.push_back(4 * i + 1);
    return info;
  }
  if (auto p = plan_conv_integer(node, opset, inputs))
    return {p->pd.weights_desc().get_size(), {p->weights()}, "oneDNN integer conv"};
  return {};
}

std::unique_ptr<PreparedKernel> make_onednn_kernel(const Node& node, int64_t opset,
                                                   const std::vector<const ValueInfo*>& inputs, int threads,
                                                   bool bf16_products) {
  use_threads(threads);
  if (auto p = plan_conv(node, opset, inputs, bf16_products))
    return std::make_unique<ConvKernel>(std::move(*p), packing_source(*inputs[1]->value, bf16_products));
  if (auto p = plan_matmul(node, inputs, bf16_products))
    return std::make_unique<MatMulKernel>(std::move(*p), packing_source(*inputs[1]->value, bf16_products));
  if (auto p = plan_integer_matmul(node, inputs)) {
    auto w = int8_weights(*inputs[p->weights()]->value, input_info(inputs, p->weights() + 2));
    return std::make_unique<IntegerMatMulKernel>(std::move(*p), std::move(w));
  }
  if (is_dynamic_quantize_matmuls(node)) return make_shared_integer_matmul(node, inputs);
  if (auto p = plan_conv_integer(node, opset, inputs)) {
    const Tensor& w = *inputs[p->weights()]->value;
    return std::make_unique<ConvKernel>(std::move(*p), w);
  }
  return nullptr;
}

}  // namespace vlrt

#include "backends/cpu/onednn.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "backends/cpu/isa.h"
#include "ops/contrib_semantics.h"
#include "ops/layout_semantics.h"
#include "ops/linalg_semantics.h"
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
      data_.reset(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      size_ = bytes;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
};

thread_local ScratchBuffer t_scratchpad, t_src, t_dst;

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// oneDNN's OpenMP threads follow the session's thread count.
void use_threads(int threads) {
  if (threads > 0 && omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

bool is_f32(const ValueInfo* v) { return v && v->dtype == DType::f32 && v->shape_known; }
bool is_f32_constant(const ValueInfo* v) { return is_f32(v) && v->value && v->value->defined(); }
const ValueInfo* input_info(const std::vector<const ValueInfo*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}

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
  }
}

// A primitive's descriptor with the plain layouts of the node's tensors, or nothing
// where oneDNN does not take the node.
struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  memory::desc x, w, y, z;  // as the node's tensors lie
  bool bias = false, sum = false;
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

std::optional<ConvPlan> plan_conv(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs) {
  bool blocked = node.domain == "vlrt" && node.op_type == "BlockedConv";
  bool fused = blocked || (node.domain == "com.microsoft" && node.op_type == "FusedConv");
  if (!fused && !(node.domain.empty() && node.op_type == "Conv")) return std::nullopt;
  const ValueInfo *x = input_info(inputs, 0), *w = input_info(inputs, 1), *b = input_info(inputs, 2),
                  *z = fused ? input_info(inputs, 3) : nullptr;
  if (!is_f32(x) || !is_f32_constant(w) || (b && !is_f32(b)) || (z && !is_f32(z))) return std::nullopt;
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
  ConvGeometry g = conv_geometry(node, xs, w->shape, ys, false);
  size_t nsp = rank - 2, o = 3 - nsp;
  memory::dims strides, dilates, pad_l, pad_r;
  for (size_t i = o; i < 3; i++) {
    strides.push_back(g.stride[i]);
    dilates.push_back(g.dil[i] - 1);
    pad_l.push_back(g.pad[i]);
    pad_r.push_back((g.out[i] - 1) * g.stride[i] + (g.k[i] - 1) * g.dil[i] + 1 - g.in[i] - g.pad[i]);
  }
  bool grouped = g.group > 1;
  memory::dims wd = to_dims(w->shape);
  if (grouped) {
    wd[0] /= g.group;
    wd.insert(wd.begin(), g.group);
  }
  ConvPlan p;
  p.x = activation_desc(xs, blocks.src);
  p.y = activation_desc(ys, blocks.dst);
  p.z = activation_desc(ys, blocks.sum);
  p.w = memory::desc(wd, memory::data_type::f32, weights_tag(rank, grouped));
  p.bias = b != nullptr;
  p.sum = z != nullptr;
  Tag act_tag = conv_layout() == ConvLayout::plain  ? plain_tag(rank)
                : conv_layout() == ConvLayout::nhwc ? channels_last_tag(rank)
                                                    : Tag::any;
  memory::desc src(to_dims(xs), memory::data_type::f32, act_tag),
      dst(to_dims(ys), memory::data_type::f32, act_tag), wany(wd, memory::data_type::f32, Tag::any),
      bias_md = b ? memory::desc({g.m}, memory::data_type::f32, Tag::x) : memory::desc();
  dnnl::post_ops ops;
  if (p.sum) ops.append_sum(1.f);
  if (fused) append_activation(fused_conv_activation(node), ops);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      src, wany, bias_md, dst, strides, dilates, pad_l, pad_r);
    p.pd = dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  return p;
}

// MatMul, Gemm and vlrt.FusedMatMul (Y = act(A B' + Bias + Z)) with a constant 2-D B.
std::optional<MatMulPlan> plan_matmul(const Node& node, const std::vector<const ValueInfo*>& inputs) {
  bool gemm = node.domain.empty() && node.op_type == "Gemm";
  bool fused = node.domain == "vlrt" && node.op_type == "FusedMatMul";
  if (!gemm && !fused && !(node.domain.empty() && node.op_type == "MatMul")) return std::nullopt;
  const ValueInfo *a = input_info(inputs, 0), *w = input_info(inputs, 1),
                  *c = gemm || fused ? input_info(inputs, 2) : nullptr, *z = fused ? input_info(inputs, 3) : nullptr;
  if (!is_f32(a) || !is_f32_constant(w) || w->shape.size() != 2 || a->shape.size() < 2) return std::nullopt;
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
  p.w = memory::desc({k, n}, memory::data_type::f32, tb ? Tag::ba : Tag::ab);
  p.y = memory::desc({m, n}, memory::data_type::f32, Tag::ab);
  p.bias = c != nullptr;
  p.sum = z != nullptr;
  memory::desc wany({k, n}, memory::data_type::f32, Tag::any),
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
    p.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a, wany, bias_md, p.y), attr, cpu_engine());
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

class ConvKernel : public OneDnnKernel {
 public:
  ConvKernel(ConvPlan p, const Tensor& weights)
      : plan_(std::move(p)),
        conv_(plan_.pd),
        weights_(pack_weights(plan_.w, plan_.pd.weights_desc(), weights)),
        to_src_(reorder_between(plan_.x, plan_.pd.src_desc())),
        to_dst_(reorder_between(plan_.z, plan_.pd.dst_desc())),
        from_dst_(reorder_between(plan_.pd.dst_desc(), plan_.y)) {}

  size_t bytes() const override { return plan_.pd.weights_desc().get_size(); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, int threads) override {
    use_threads(threads);
    dnnl::stream& s = thread_stream();
    memory x = wrap(plan_.x, in[0]), y = wrap(plan_.y, out[0]);
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
    if (plan_.bias) args[DNNL_ARG_BIAS] = wrap(memory::desc({plan_.y.dims()[1]}, memory::data_type::f32, Tag::x), in[2]);
    conv_.execute(s, args);
    if (from_dst_) from_dst_->execute(s, dst, y);
    s.wait();
  }

 private:
  ConvPlan plan_;
  dnnl::convolution_forward conv_;
  memory weights_;
  std::optional<dnnl::reorder> to_src_, to_dst_, from_dst_;
};

class MatMulKernel : public OneDnnKernel {
 public:
  MatMulKernel(MatMulPlan p, const Tensor& weights)
      : plan_(std::move(p)), matmul_(plan_.pd), weights_(pack_weights(plan_.w, plan_.pd.weights_desc(), weights)) {}

  size_t bytes() const override { return plan_.pd.weights_desc().get_size(); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, int threads) override {
    use_threads(threads);
    dnnl::stream& s = thread_stream();
    memory scratch(plan_.pd.scratchpad_desc(), cpu_engine(),
                   t_scratchpad.get(plan_.pd.scratchpad_desc().get_size()));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(plan_.a, in[0])},
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
};

}  // namespace

int64_t onednn_conv_channel_block() {
  if (conv_layout() != ConvLayout::blocked) return 0;
  return detected_cpu_isa() == CpuIsa::avx512 ? 16 : 8;
}

PrepareInfo onednn_prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs,
                                int threads) {
  use_threads(threads);
  if (auto p = plan_conv(node, opset, inputs)) return {p->pd.weights_desc().get_size(), {1}};
  if (auto p = plan_matmul(node, inputs)) return {p->pd.weights_desc().get_size(), {1}};
  return {};
}

std::unique_ptr<OneDnnKernel> make_onednn_kernel(const Node& node, int64_t opset,
                                                const std::vector<const ValueInfo*>& inputs, int threads) {
  use_threads(threads);
  if (auto p = plan_conv(node, opset, inputs)) return std::make_unique<ConvKernel>(std::move(*p), *inputs[1]->value);
  if (auto p = plan_matmul(node, inputs)) return std::make_unique<MatMulKernel>(std::move(*p), *inputs[1]->value);
  return nullptr;
}

}  // namespace vlrt

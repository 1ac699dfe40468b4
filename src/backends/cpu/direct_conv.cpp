#include "backends/cpu/direct_conv.h"

#include <algorithm>
#include <optional>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/prepare_util.h"
#include "core/error.h"
#include "ops/layout_semantics.h"
#include "ops/linalg_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

using direct::Frame;
using direct::Geometry;

struct Plan {
  Geometry g;
  bool depthwise = false;  // one group per channel: the depthwise kernel
  bool bias = false, sum = false;
  FusedActivation act, pre;   // act(pre(conv + bias) + sum)
  DType weight = DType::f32;  // as the filters are held: f16 or bf16 for BlockedConv's stored weights

  size_t filter_values() const {
    return depthwise ? size_t(g.x.blocks() * g.kh * g.kw * 8) : size_t(g.panels() * g.groups() * g.lanes * 16);
  }
  size_t filter_bytes() const { return filter_values() * dtype_size(weight); }
  const char* kernel() const { return depthwise ? "depthwise conv" : "direct conv"; }
};

std::optional<Plan> plan_direct(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs) {
  if (!direct_conv_available()) return std::nullopt;
  bool blocked = node.domain == "vlrt" && node.op_type == "BlockedConv";
  bool fused = blocked || (node.domain == "com.microsoft" && node.op_type == "FusedConv");
  if (!fused && !(node.domain.empty() && node.op_type == "Conv")) return std::nullopt;
  ConvBlocks blocks = blocked ? conv_blocks(node) : ConvBlocks{};
  for (int64_t block : {blocks.src, blocks.sum, blocks.dst})
    if (block != 0 && block != 8) return std::nullopt;
  const ValueInfo *x = input_info(inputs, 0), *w = input_info(inputs, 1), *b = input_info(inputs, 2),
                  *z = fused ? input_info(inputs, 3) : nullptr;
  if (!is_f32(x) || x->shape.size() != size_t(blocks.src ? 5 : 4)) return std::nullopt;
  // vlrt.BlockedConv may read weights stored in half precision (passes/half_weights.h).
  if (!(is_f32_constant(w) || (blocked && is_half_constant(w))) || w->shape.size() != 4 || shape_numel(w->shape) == 0)
    return std::nullopt;
  const int64_t group = node.attr_int("group", 1);
  std::vector<ValueInfo> out = infer_node(node, opset, inputs);
  if (out.empty() || !out[0].shape_known || out[0].dtype != DType::f32) return std::nullopt;
  int64_t in_channels = w->shape[1] * group, out_channels = w->shape[0];
  // One group, or one per channel with one filter each.
  bool depthwise = group > 1 && w->shape[1] == 1 && out_channels == group;
  if (group != 1 && !depthwise) return std::nullopt;
  if (depthwise && w->shape[2] > direct::kMaxDepthwiseRows) return std::nullopt;
  static const bool depthwise_on = enabled_by_env("VLRT_DEPTHWISE_CONV");
  if (depthwise && !depthwise_on) return std::nullopt;
  Shape xs = blocks.src ? channel_logical_shape(x->shape, 8, in_channels) : x->shape;
  Shape ys = blocks.dst ? channel_logical_shape(out[0].shape, 8, out_channels) : out[0].shape;
  if (xs[1] != in_channels || shape_numel(xs) == 0 || shape_numel(ys) == 0) return std::nullopt;
  if (b && !(is_f32(b) && shape_numel(b->shape) == out_channels)) return std::nullopt;
  if (z && !(is_f32(z) && z->shape == (blocks.sum ? channel_blocked_shape(ys, 8) : ys))) return std::nullopt;
  ConvGeometry cg = conv_geometry(node, xs, w->shape, ys, false);  // 2-D: axes 1 and 2
  // A column (a 1-D convolution exported as [length, 1]) runs as a row: it lies the same in memory
  // in either layout, and the kernel's tiles take pixels along a row.
  if (xs[3] == 1 && ys[3] == 1 && cg.k[2] == 1 && cg.pad[2] == 0) {
    std::swap(xs[2], xs[3]);
    std::swap(ys[2], ys[3]);
    for (int64_t* v : {cg.in, cg.out, cg.k, cg.stride, cg.dil, cg.pad}) std::swap(v[1], v[2]);
  }
  Plan p;
  p.depthwise = depthwise;
  p.weight = depthwise ? DType::f32 : w->dtype;  // the depthwise filters (few) are widened
  Geometry& g = p.g;
  g.x = {xs[0], in_channels, xs[2], xs[3], cg.pad[1], cg.pad[2], 0, 0, blocks.src == 0};
  g.out_channels = out_channels;
  g.oh = ys[2];
  g.ow = ys[3];
  g.kh = cg.k[1], g.kw = cg.k[2], g.sh = cg.stride[1], g.sw = cg.stride[2], g.dh = cg.dil[1], g.dw = cg.dil[2];
  if (g.x.top < 0 || g.x.left < 0) return std::nullopt;
  // The source spans every tap of every output and all of X.
  g.x.hp = std::max(g.x.h + g.x.top, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1);
  g.x.wp = std::max(g.x.w + g.x.left, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  g.lanes = std::min<int64_t>(8, in_channels);
  g.plain_sum = z && blocks.sum == 0;
  g.plain_output = blocks.dst == 0;
  // The depthwise kernel reads a blocked X as it is and skips the padding's taps itself.
  g.skips_padding = depthwise && !g.x.plain;
  if (fused) {
    p.act = fused_conv_activation(node);
    p.pre = fused_conv_activation(node, "pre_activation");
  }
  if (!avx2_epilogue_takes(p.act) || !avx2_epilogue_takes(p.pre)) return std::nullopt;
  p.bias = b != nullptr;
  p.sum = z != nullptr;
  return p;
}

template <class W>
using Filters = std::vector<W, CacheLineAllocator<W>>;

// [panel][in block][kh][kw][lanes input channels][16 output channels], or for the depthwise
// kernel [block][kh][kw][8 channels]; zeros for the padding channels. Float32 filters from
// half-precision weights are widened; half-precision ones keep the stored values.
template <class W>
Filters<W> pack_filters(const Plan& p, const Tensor& weights) {
  const Geometry& g = p.g;
  Filters<W> packed(p.filter_values(), W{});
  const Tensor source = dtype_v<W> == weights.dtype() ? weights : weights.converted(DType::f32);
  const W* w = source.data<W>();
  if (p.depthwise) {
    for (int64_t c = 0; c < g.out_channels; c++)
      for (int64_t t = 0; t < g.kh * g.kw; t++)
        packed[size_t((c / 8 * g.kh * g.kw + t) * 8 + c % 8)] = w[c * g.kh * g.kw + t];
    return packed;
  }
  const int64_t in_channels = g.x.channels;
  for (int64_t oc = 0; oc < g.out_channels; oc++)
    for (int64_t ic = 0; ic < in_channels; ic++)
      for (int64_t i = 0; i < g.kh; i++)
        for (int64_t j = 0; j < g.kw; j++) {
          int64_t step = ((oc / 16 * g.x.blocks() + ic / 8) * g.kh + i) * g.kw + j;
          packed[size_t((step * g.lanes + ic % 8) * 16 + oc % 16)] = w[((oc * in_channels + ic) * g.kh + i) * g.kw + j];
        }
  return packed;
}

// Where each step's channels lie in the source from the top-left tap of an output pixel.
std::vector<int64_t> step_offsets(const Geometry& g) {
  std::vector<int64_t> offsets;
  for (int64_t cb = 0; cb < g.x.blocks(); cb++)
    for (int64_t i = 0; i < g.kh; i++)
      for (int64_t j = 0; j < g.kw; j++) offsets.push_back(((cb * g.x.hp + i * g.dh) * g.x.wp + j * g.dw) * 8);
  return offsets;
}

// The blocked copy of x that frame f describes, in a per-thread buffer.
const float* blocked_copy(ThreadPool& pool, const direct::Frame& f, const float* x, AlignedFloats& buffer) {
  float* copy = grown(buffer, f.copy_floats());
  pool.parallel_for(f.copy_rows(), [&](int64_t b, int64_t end) { direct::copy_to_blocks(f, x, copy, b, end); });
  return copy;
}

template <class W>
class OwnConv : public PreparedKernel {
 public:
  OwnConv(Plan p, const Tensor& weights) : plan_(std::move(p)), filters_(pack_filters<W>(plan_, weights)) {
    if (!plan_.depthwise) offsets_ = step_offsets(plan_.g);
  }

  size_t bytes() const override { return filters_.size() * sizeof(W); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    const Geometry& g = plan_.g;
    const Frame yf = g.output();
    const int64_t x_values = g.x.batch * (g.x.plain ? g.x.channels : g.x.blocks() * 8) * g.x.h * g.x.w,
                  y_values = g.x.batch * (g.plain_output ? g.out_channels : g.out_blocks() * 8) * g.oh * g.ow;
    VLRT_CHECK(in[0]->numel() == x_values && out[0]->numel() == y_values, plan_.kernel(), " prepared for X of ",
               x_values, " values and Y of ", y_values, " got ", shape_str(in[0]->shape()), " and ",
               shape_str(out[0]->shape()));
    thread_local AlignedFloats t_source, t_sum, t_output;
    const float* source = in[0]->data<float>();
    if (g.x.copied() && !g.skips_padding) source = blocked_copy(pool, g.x, source, t_source);
    const float* z = plan_.sum ? in[3]->data<float>() : nullptr;
    if (z && g.plain_sum) z = blocked_copy(pool, yf, z, t_sum);
    float* y = g.plain_output ? grown(t_output, yf.copy_floats()) : out[0]->data<float>();
    std::vector<float> bias = padded_bias(plan_.bias ? in[2] : nullptr, g.out_channels, g.panels() * 16);
    direct::Epilogue e{bias.data(), z, plan_.act, plan_.pre};
    if constexpr (std::is_same_v<W, float>) {
      if (plan_.depthwise) {
        pool.parallel_for(g.depthwise_jobs(), [&](int64_t b, int64_t end) {
          direct::depthwise_rows(g, source, filters_.data(), e, y, b, end);
        });
      }
    }
    if (!plan_.depthwise)
      pool.parallel_for(g.jobs(), [&](int64_t b, int64_t end) {
        direct::rows(g, source, filters_.data(), offsets_.data(), e, y, b, end);
      });
    if (g.plain_output)
      pool.parallel_for(g.x.batch * g.out_blocks(), [&](int64_t b, int64_t end) {
        direct::copy_to_plain(yf, y, out[0]->data<float>(), b, end);
      });
  }

 private:
  Plan plan_;
  Filters<W> filters_;
  std::vector<int64_t> offsets_;
};

}  // namespace

bool direct_conv_available() {
  // VLRT_DIRECT_CONV=0 leaves these convolutions to oneDNN (for measurements).
  static const bool on = enabled_by_env("VLRT_DIRECT_CONV");
  return on && cpu_isa() >= CpuIsa::avx2;
}

PrepareInfo direct_conv_prepare_info(const Node& node, int64_t opset, const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_direct(node, opset, inputs))
    return {
        p->filter_bytes(),
        {1},
        p->weight == DType::f32 ? p->kernel() : cat(p->kernel(), " (", dtype_name(p->weight), " weight)")};
  return {};
}

std::unique_ptr<PreparedKernel> make_direct_conv(const Node& node, int64_t opset,
                                                 const std::vector<const ValueInfo*>& inputs) {
  if (auto p = plan_direct(node, opset, inputs)) {
    const Tensor& w = *inputs[1]->value;
    switch (p->weight) {
      case DType::f16:
        return std::make_unique<OwnConv<half_t>>(std::move(*p), w);
      case DType::bf16:
        return std::make_unique<OwnConv<bf16_t>>(std::move(*p), w);
      default:
        return std::make_unique<OwnConv<float>>(std::move(*p), w);
    }
  }
  return nullptr;
}

}  // namespace vlrt

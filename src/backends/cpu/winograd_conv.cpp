#include "backends/cpu/winograd_conv.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "backends/cpu/isa.h"
#include "backends/cpu/prepare_util.h"
#include "backends/cpu/winograd_kernels.h"
#include "core/error.h"
#include "ops/contrib_semantics.h"
#include "ops/layout_semantics.h"

namespace vlrt {

namespace {

using winograd::Geometry;
using winograd::kPoints;

// VLRT_WINOGRAD=0 leaves every convolution to oneDNN (for measurements).
bool winograd_enabled() {
  static const bool on = enabled_by_env("VLRT_WINOGRAD");
  return on;
}

bool all_equal(const std::vector<int64_t>& v, int64_t value) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == value; });
}

struct Plan {
  Geometry g;
  int64_t in_channels = 0;
  bool bias = false, sum = false;
  FusedActivation act, pre;  // act(pre(conv + bias) + sum)

  size_t filter_floats() const { return size_t(kPoints * g.out_panels() * g.in_width() * 16); }
};

std::optional<Plan> plan_winograd(const Node& node, const std::vector<const ValueInfo*>& inputs, bool any_size) {
  if (!winograd_enabled() || cpu_isa() < CpuIsa::avx2) return std::nullopt;
  if (node.domain != "vlrt" || node.op_type != "BlockedConv") return std::nullopt;
  ConvBlocks blocks = conv_blocks(node);
  const ValueInfo *x = input_info(inputs, 0), *w = input_info(inputs, 1), *b = input_info(inputs, 2),
                  *z = input_info(inputs, 3);
  if (blocks.src != 8 || blocks.dst != 8 || (z && blocks.sum != 8)) return std::nullopt;
  if (!is_f32(x) || x->shape.size() != 5 || x->shape[4] != 8) return std::nullopt;
  // Weights stored in half precision (passes/half_weights.h) are widened into the transformed filters.
  if (!(is_f32_constant(w) || is_half_constant(w)) || w->shape.size() != 4 || w->shape[2] != 3 || w->shape[3] != 3)
    return std::nullopt;
  std::vector<int64_t> pads = node.attr_ints("pads", {0, 0, 0, 0});
  if (node.attr_int("group", 1) != 1 || !all_equal(node.attr_ints("strides", {1, 1}), 1) ||
      !all_equal(node.attr_ints("dilations", {1, 1}), 1) || pads.size() != 4 || !all_equal(pads, 1) ||
      node.attr_string("auto_pad", "NOTSET") != "NOTSET")
    return std::nullopt;
  Plan p;
  p.in_channels = w->shape[1];
  int64_t out_channels = w->shape[0];
  Geometry& g = p.g;
  g.batch = x->shape[0];
  g.in_blocks = x->shape[1];
  g.h = x->shape[2];
  g.w = x->shape[3];
  g.out_blocks = (out_channels + 7) / 8;
  g.out_channels = out_channels;
  g.tiles_h = (g.h + 3) / 4;
  g.tiles_w = (g.w + 3) / 4;
  if (g.in_blocks != (p.in_channels + 7) / 8 || g.tiles() == 0 || out_channels == 0 || p.in_channels == 0)
    return std::nullopt;
  if (!any_size && (std::min(g.h, g.w) < kWinogradMinSide || p.in_channels < 16 || out_channels < 16))
    return std::nullopt;
  if (b && !(is_f32(b) && shape_numel(b->shape) == out_channels)) return std::nullopt;
  if (z && !(is_f32(z) && z->shape == Shape{g.batch, g.out_blocks, g.h, g.w, 8})) return std::nullopt;
  p.act = fused_conv_activation(node);
  p.pre = fused_conv_activation(node, "pre_activation");
  if (!avx2_epilogue_takes(p.act) || !avx2_epilogue_takes(p.pre)) return std::nullopt;
  p.bias = b != nullptr;
  p.sum = z != nullptr;
  return p;
}

// U = G g G^T for every filter, in double, laid out as winograd_kernels.h says; zeros for the
// padding channels.
AlignedFloats transform_filters(const Plan& p, const Tensor& weights) {
  static const double G[6][3] = {{1.0 / 4, 0, 0},
                                 {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                 {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                 {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                 {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                 {0, 0, 1}};
  const Geometry& g = p.g;
  AlignedFloats u(p.filter_floats(), 0.f);
  const Tensor source = weights.dtype() == DType::f32 ? weights : weights.converted(DType::f32);
  const float* w = source.data<float>();
  int64_t width = g.in_width(), panels = g.out_panels();
  for (int64_t oc = 0; oc < g.out_channels; oc++)
    for (int64_t ic = 0; ic < p.in_channels; ic++) {
      const float* f = w + (oc * p.in_channels + ic) * 9;
      double t[6][3];
      for (int i = 0; i < 6; i++)
        for (int c = 0; c < 3; c++) t[i][c] = G[i][0] * f[c] + G[i][1] * f[3 + c] + G[i][2] * f[6 + c];
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
          int64_t xi = i * 6 + j;
          u[size_t(((xi * panels + oc / 16) * width + ic) * 16 + oc % 16)] =
              float(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
        }
    }
  return u;
}

class WinogradConv : public PreparedKernel {
 public:
  WinogradConv(Plan p, const Tensor& weights) : plan_(std::move(p)), filters_(transform_filters(plan_, weights)) {}

  size_t bytes() const override { return filters_.size() * sizeof(float); }

  void run(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out, ThreadPool& pool) override {
    const Geometry& g = plan_.g;
    VLRT_CHECK(in[0]->shape() == Shape({g.batch, g.in_blocks, g.h, g.w, 8}), "Winograd convolution prepared for X of ",
               g.batch, "x", g.in_blocks, "x", g.h, "x", g.w, "x8 got ", shape_str(in[0]->shape()));
    thread_local AlignedFloats t_v, t_m;
    size_t tiles = size_t(g.tiles());
    float* v = grown(t_v, size_t(kPoints) * tiles * size_t(g.in_width()));
    float* m = grown(t_m, size_t(kPoints) * tiles * size_t(g.out_width()));
    std::vector<float> bias = padded_bias(plan_.bias ? in[2] : nullptr, g.out_channels, g.out_blocks * 8);
    winograd::Epilogue e{bias.data(), plan_.sum ? in[3]->data<float>() : nullptr, plan_.act, plan_.pre};
    const float* x = in[0]->data<float>();
    float* y = out[0]->data<float>();
    pool.parallel_for(g.tiles(), [&](int64_t b, int64_t end) { winograd::input_transform(g, x, v, b, end); });
    pool.parallel_for(g.product_jobs(),
                      [&](int64_t b, int64_t end) { winograd::products(g, v, filters_.data(), m, b, end); });
    pool.parallel_for(g.tiles(), [&](int64_t b, int64_t end) { winograd::output_transform(g, m, e, y, b, end); });
  }

 private:
  Plan plan_;
  AlignedFloats filters_;
};

}  // namespace

PrepareInfo winograd_prepare_info(const Node& node, int64_t, const std::vector<const ValueInfo*>& inputs,
                                  bool any_size) {
  if (auto p = plan_winograd(node, inputs, any_size)) return {p->filter_floats() * sizeof(float), {1}, "Winograd F(4x4,3x3)"};
  return {};
}

std::unique_ptr<PreparedKernel> make_winograd_conv(const Node& node, int64_t,
                                                   const std::vector<const ValueInfo*>& inputs, bool any_size) {
  if (auto p = plan_winograd(node, inputs, any_size)) return std::make_unique<WinogradConv>(std::move(*p), *inputs[1]->value);
  return nullptr;
}

}  // namespace vlrt

// The direct convolution (backends/cpu/direct_conv.h) against the reference kernels: kernel
// sizes, strides, dilations and paddings (asymmetric too), a plain X, channel counts off the
// block and the panel, batch > 1, rows longer than a job's chunk, every epilogue it takes; and
// which convolutions it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/direct_conv.h"
#include "backends/cpu/epilogue_avx2.h"
#include "backends/cpu/isa.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

struct Case {
  int64_t n, ic, oc, h, w, kh, kw, stride, dilation;
  std::vector<int64_t> pads;
  int64_t src_block;      // 8, or 0 for a plain X
  int64_t out_block = 8;  // of Y: 8, or 0 for plain
  int64_t sum_block = 8;  // of Z
  bool depthwise = false;  // group = ic = oc, one filter per channel
};

std::map<std::string, Attribute> conv_attrs(const Case& c, const std::string& act, std::vector<float> params) {
  std::map<std::string, Attribute> a{{"pads", attr_ints(c.pads)},
                                     {"strides", attr_ints({c.stride, c.stride})},
                                     {"dilations", attr_ints({c.dilation, c.dilation})},
                                     {"src_block", attr_i(c.src_block)},
                                     {"sum_block", attr_i(c.sum_block)},
                                     {"dst_block", attr_i(c.out_block)}};
  if (c.depthwise) a["group"] = attr_i(c.ic);
  if (!act.empty()) a["activation"] = attr_s(act);
  if (!params.empty()) a["activation_params"] = attr_floats(std::move(params));
  return a;
}

// The direct kernel against a Y of y_shape.
Tensor run_direct(const Node& n, const std::vector<Tensor>& inputs, Shape y_shape) {
  ValueInfos infos(inputs);
  return run_prepared(make_direct_conv(n, 17, infos.ptrs), inputs, std::move(y_shape));
}

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t dilation, int64_t pad_sum) {
  return (in + pad_sum - dilation * (k - 1) - 1) / stride + 1;
}

// Each case with every epilogue, in three forms: bias; bias and Z; Z alone.
void expect_matches_reference(const std::vector<Case>& cases) {
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  std::vector<Act> acts = {{"", {}},           {"Relu", {}},      {"LeakyRelu", {0.1f}},
                           {"Clip", {-0.5f, 0.5f}}, {"Sigmoid", {}}, {"SiLU", {}},
                           {"HardSwish", {}},   {"HardSigmoid", {0.2f, 0.5f}}};
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    int64_t oh = out_size(c.h, c.kh, c.stride, c.dilation, c.pads[0] + c.pads[2]);
    int64_t ow = out_size(c.w, c.kw, c.stride, c.dilation, c.pads[1] + c.pads[3]);
    Tensor plain_x = random_uniform({c.n, c.ic, c.h, c.w}, uint32_t(i));
    Tensor x = c.src_block ? channel_blocks(plain_x, 8) : plain_x;
    Tensor w = random_uniform({c.oc, c.depthwise ? 1 : c.ic, c.kh, c.kw}, uint32_t(i) + 50);
    Tensor b = random_uniform({c.oc}, uint32_t(i) + 90);
    Tensor plain_z = random_uniform({c.n, c.oc, oh, ow}, uint32_t(i) + 7);
    Tensor z = c.sum_block ? channel_blocks(plain_z, 8) : plain_z;
    Shape y_shape = c.out_block ? Shape{c.n, (c.oc + 7) / 8, oh, ow, 8} : Shape{c.n, c.oc, oh, ow};
    for (const Act& act : acts)
      for (int form = 0; form < 3; form++) {  // bias; bias and Z; Z alone
        SCOPED_TRACE(cat("case ", i, " activation '", act.name, "' form ", form));
        std::vector<Tensor> in = {x, w, form == 2 ? Tensor() : b};
        if (form > 0) in.push_back(z);
        Node n = blocked_conv(in, conv_attrs(c, act.name, act.params));
        expect_close(run_direct(n, in, y_shape), run_on_cpu(n, in, true), 1e-4, 1e-4);
      }
  }
}

TEST(CpuDirectConv, MatchesTheReferenceOnAwkwardShapes) {
  if (cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "the direct convolution needs AVX2";
  std::vector<Case> cases = {
      {1, 16, 32, 5, 4, 1, 1, 1, 1, {0, 0, 0, 0}, 8},         // 1x1: the image as one row
      {2, 20, 24, 11, 11, 1, 1, 1, 1, {0, 0, 0, 0}, 8},       // one row of 121 pixels: two chunks
      {1, 24, 20, 9, 7, 1, 1, 2, 1, {0, 0, 0, 0}, 8},         // 1x1 stride 2; 3 output blocks
      {3, 17, 33, 9, 8, 3, 3, 2, 1, {1, 1, 1, 1}, 8},         // 3x3 stride 2, batch 3
      {1, 3, 16, 15, 13, 7, 7, 2, 1, {3, 3, 3, 3}, 0},        // a stem: 7x7 stride 2 from plain X
      {1, 8, 7, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, 8},           // 7x7 image (rows of 4 + 3), 7 channels
      {2, 9, 16, 10, 9, 3, 3, 1, 2, {2, 2, 2, 2}, 8},         // dilation 2
      {1, 5, 12, 6, 11, 5, 3, 1, 1, {2, 0, 1, 2}, 0},         // 5x3, asymmetric padding, plain X
      {1, 8, 8, 4, 130, 1, 3, 1, 1, {0, 1, 0, 1}, 8},         // rows of 130: two chunks
      {1, 16, 16, 1, 1, 3, 3, 1, 1, {1, 1, 1, 1}, 8},         // one pixel, all taps but one in the padding
      {1, 3, 16, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 8},          // 3 channels in blocks: depth steps of 3
      {2, 19, 21, 10, 9, 3, 3, 2, 1, {1, 1, 1, 1}, 8, 0, 0},  // plain Y and Z
      {1, 16, 24, 6, 6, 1, 1, 1, 1, {0, 0, 0, 0}, 8, 0, 8},   // plain Y, blocked Z: the last of a region
      {1, 3, 13, 17, 12, 7, 7, 2, 1, {3, 3, 3, 3}, 0, 0, 0},  // all plain: a stem before a pooling
      {1, 12, 8, 5, 5, 3, 3, 1, 1, {1, 1, 1, 1}, 8, 8, 0},    // blocked Y, plain Z
      {1, 300, 20, 4, 5, 1, 1, 1, 1, {0, 0, 0, 0}, 8},        // a depth of 38 steps: two depth blocks
      {1, 40, 24, 6, 5, 3, 3, 2, 1, {1, 1, 1, 1}, 8, 0, 8},   // 45 steps, plain Y
      {2, 13, 20, 37, 1, 5, 1, 1, 1, {2, 0, 2, 0}, 8},        // a column (1-D, as [L, 1]): run as a row
      {1, 9, 17, 30, 1, 3, 1, 2, 2, {1, 0, 0, 0}, 0, 0, 0},   // a column with stride and dilation, all plain
  };
  expect_matches_reference(cases);
}

TEST(CpuDirectConv, TakesOnlyTheConvolutionsItComputes) {
  if (cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "the direct convolution needs AVX2";
  Case c{1, 32, 40, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 8};
  Tensor x = channel_blocks(random_uniform({1, 32, 7, 7}, 1), 8), w = random_uniform({40, 32, 1, 1}, 2),
         b = random_uniform({40}, 3);
  auto taken_bytes = [&](const std::vector<Tensor>& in, std::map<std::string, Attribute> attrs) {
    ValueInfos infos(in);
    return direct_conv_prepare_info(blocked_conv(in, std::move(attrs)), 17, infos.ptrs).bytes;
  };
  // Output channels in panels of 16, input channels in blocks of 8.
  EXPECT_EQ(taken_bytes({x, w, b}, conv_attrs(c, "Relu", {})), size_t(48 * 32 * 4));
  {
    CpuBackend cpu(0, test_pool());
    cpu.set_reference_kernels(false);
    ValueInfos infos({x, w, b});
    PrepareInfo info = cpu.prepare_info(blocked_conv({x, w, b}, conv_attrs(c, "", {})), 17, infos.ptrs);
    EXPECT_EQ(info.kernel, "direct conv") << "the CPU backend prefers it to oneDNN's convolution";
    EXPECT_EQ(info.replaced_inputs, std::vector<size_t>{1});
  }
  auto with = [&](const std::string& k, Attribute v) {
    auto a = conv_attrs(c, "", {});
    a[k] = std::move(v);
    return a;
  };
  EXPECT_EQ(taken_bytes({x, w, b}, conv_attrs(c, "Tanh", {})), 0u);
  EXPECT_EQ(taken_bytes({x, w, b}, with("dst_block", attr_i(16))), 0u);
  EXPECT_EQ(taken_bytes({x, w, b}, with("sum_block", attr_i(0))), size_t(48 * 32 * 4)) << "without Z";
  EXPECT_EQ(taken_bytes({x, w, b}, with("src_block", attr_i(16))), 0u);
  Tensor grouped = random_uniform({40, 16, 1, 1}, 4);
  EXPECT_EQ(taken_bytes({x, grouped, b}, with("group", attr_i(2))), 0u);
  Tensor depthwise = random_uniform({32, 1, 3, 3}, 5);
  ValueInfos dw_infos({x, depthwise});
  PrepareInfo dw = direct_conv_prepare_info(blocked_conv({x, depthwise}, with("group", attr_i(32))), 17, dw_infos.ptrs);
  EXPECT_EQ(dw.kernel, "depthwise conv");
  EXPECT_EQ(dw.bytes, size_t(4 * 9 * 8 * 4));
  Tensor multiplier = random_uniform({64, 1, 3, 3}, 6);  // two filters per channel
  EXPECT_EQ(taken_bytes({x, multiplier, Tensor()}, with("group", attr_i(32))), 0u);
  Tensor empty = channel_blocks(random_uniform({0, 32, 7, 7}, 6), 8);
  EXPECT_EQ(taken_bytes({empty, w, b}, conv_attrs(c, "", {})), 0u);
}

// BlockedConv's weights stored in float16 or bfloat16 (passes/half_weights.h): the direct kernel
// holds them so, half the bytes, the depthwise, Winograd and oneDNN kernels widen them; each gives
// exactly what it gives with the widened float32 weights, and the reference kernel agrees.
TEST(CpuDirectConv, HalfPrecisionWeightsMatchTheirFloat32Values) {
  if (cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "the direct convolution needs AVX2";
  struct HalfCase {
    Case c;
    const char* kernel;
    const char* act = "Relu";
  };
  for (DType dt : {DType::f16, DType::bf16})
    for (const HalfCase& hc :
         {HalfCase{{2, 19, 21, 10, 9, 3, 3, 2, 1, {1, 1, 1, 1}, 8}, "direct conv"},
          HalfCase{{1, 3, 16, 15, 13, 7, 7, 2, 1, {3, 3, 3, 3}, 0}, "direct conv"},
          HalfCase{{1, 16, 16, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 8, 8, 8, true}, "depthwise conv"},
          HalfCase{{1, 16, 24, 12, 12, 3, 3, 1, 1, {1, 1, 1, 1}, 8}, "Winograd"},
          HalfCase{{1, 16, 24, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, 8}, "oneDNN conv", "Tanh"}}) {
      const Case& c = hc.c;
      SCOPED_TRACE(cat(dtype_name(dt), " ", hc.kernel));
      int64_t oh = out_size(c.h, c.kh, c.stride, c.dilation, c.pads[0] + c.pads[2]);
      int64_t ow = out_size(c.w, c.kw, c.stride, c.dilation, c.pads[1] + c.pads[3]);
      Tensor plain_x = random_uniform({c.n, c.ic, c.h, c.w}, 1);
      Tensor x = c.src_block ? channel_blocks(plain_x, 8) : plain_x;
      Tensor half = random_uniform({c.oc, c.depthwise ? 1 : c.ic, c.kh, c.kw}, 2, -1, 1, dt);
      Tensor wide = half.converted(DType::f32);
      Tensor b = random_uniform({c.oc}, 3);
      Shape y_shape{c.n, (c.oc + 7) / 8, oh, ow, 8};
      Node n = blocked_conv({x, half, b}, conv_attrs(c, hc.act, {}));
      CpuBackend cpu(0, test_pool());
      cpu.set_reference_kernels(false);
      ValueInfos half_infos({x, half, b}), wide_infos({x, wide, b});
      PrepareInfo info = cpu.prepare_info(n, 17, half_infos.ptrs),
                  wide_info = cpu.prepare_info(n, 17, wide_infos.ptrs);
      EXPECT_EQ(info.kernel.rfind(hc.kernel, 0), 0u) << info.kernel;
      bool halved = std::string(hc.kernel) == "direct conv";
      EXPECT_EQ(info.bytes * (halved ? 2 : 1), wide_info.bytes);
      auto prepared = [&](const ValueInfos& infos) {
        return std::unique_ptr<PreparedKernel>(
            static_cast<PreparedKernel*>(cpu.prepare(n, 17, infos.ptrs).release()));
      };
      Tensor got = run_prepared(prepared(half_infos), {x, half, b}, y_shape);
      Tensor want = run_prepared(prepared(wide_infos), {x, wide, b}, y_shape);
      expect_close(got, want, 0, 0);
      expect_close(got, run_on_cpu(n, {x, half, b}, true), 1e-4, 1e-4);
    }
}

TEST(CpuDirectConv, DepthwiseMatchesTheReference) {
  if (cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "the depthwise convolution needs AVX2";
  std::vector<Case> cases = {
      {1, 16, 16, 9, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 8, 8, 8, true},   // mobilenet's 3x3
      {2, 20, 20, 11, 13, 3, 3, 2, 1, {1, 1, 1, 1}, 8, 8, 8, true},  // stride 2, a half block, batch 2
      {1, 24, 24, 9, 9, 5, 5, 2, 1, {2, 2, 2, 2}, 8, 8, 8, true},    // 5x5 stride 2
      {1, 12, 12, 14, 14, 7, 7, 1, 1, {3, 3, 3, 3}, 0, 0, 0, true},  // convnext's 7x7, plain
      {1, 8, 8, 6, 7, 3, 3, 1, 2, {2, 1, 2, 3}, 0, 8, 0, true},      // dilation 2, asymmetric pads
      {1, 5, 5, 1, 3, 3, 3, 1, 1, {1, 1, 1, 1}, 8, 0, 8, true},      // rows shorter than 8 pixels
      {1, 16, 16, 5, 20, 3, 3, 1, 1, {1, 1, 1, 1}, 8, 8, 8, true},   // 20 pixels a row: tiles of 7 + 7 + 6
      {2, 9, 9, 7, 9, 3, 3, 2, 2, {2, 1, 0, 3}, 8, 8, 8, true},      // blocked X, dilation, stride, odd pads
      {1, 16, 16, 5, 10, 7, 7, 1, 1, {3, 3, 3, 3}, 8, 8, 8, true},   // 7x7: tiles of 5 + 5, both crossing
                                                                     // edges
      {1, 8, 8, 4, 3, 7, 7, 1, 1, {3, 3, 3, 3}, 8, 8, 8, true},      // a window wider than the row
      {1, 8, 8, 3, 4, 5, 5, 1, 1, {0, 4, 4, 0}, 8, 8, 8, true},      // all the padding on one side
      // Rows with most windows inside X, in tiles that need no bound test:
      {1, 8, 8, 6, 80, 5, 5, 2, 1, {2, 2, 2, 2}, 8, 8, 8, true},    // stride 2
      {1, 8, 8, 7, 70, 3, 3, 1, 2, {2, 2, 1, 3}, 8, 8, 8, true},    // dilation 2, odd pads
      {1, 16, 16, 6, 66, 5, 5, 1, 1, {2, 2, 2, 2}, 8, 8, 8, true},  // 5x5 stride 1
      {1, 8, 8, 9, 100, 7, 7, 1, 1, {3, 3, 3, 3}, 8, 0, 8, true},   // 7x7 stride 1, plain Y
  };
  expect_matches_reference(cases);
}

// Conv and FusedConv (plain NCHW throughout, outside a conv region) take the same kernel.
TEST(CpuDirectConv, RunsPlainConvAndFusedConv) {
  if (cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "the direct convolution needs AVX2";
  Tensor x = random_uniform({2, 5, 11, 10}, 1), w = random_uniform({12, 5, 3, 3}, 2), b = random_uniform({12}, 3),
         z = random_uniform({2, 12, 6, 5}, 4);
  std::map<std::string, Attribute> attrs{{"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({2, 2})}};
  Node conv = make_node("Conv", 3, 1, attrs);
  expect_close(run_direct(conv, {x, w, b}, {2, 12, 6, 5}), run_on_cpu(conv, {x, w, b}, true), 1e-4, 1e-4);
  attrs["activation"] = attr_s("HardSwish");
  Node fused = make_node("FusedConv", 4, 1, attrs);
  fused.domain = "com.microsoft";
  expect_close(run_direct(fused, {x, w, b, z}, {2, 12, 6, 5}), run_on_cpu(fused, {x, w, b, z}, true), 1e-4, 1e-4);
}

// QuantizeDequantize, a QDQ model's fake quantization fused after a convolution, equals
// QuantizeLinear then DequantizeLinear to the bit: ties round to even, both ends saturate, -0
// becomes 0 and NaN the low end; in the AVX2 epilogue (after the sum and before it) and in the
// reference kernel.
TEST(CpuDirectConv, QuantizeDequantizeEqualsQuantizeLinearThenDequantizeLinear) {
  const float scale = 0.25f;
  const uint8_t zero_point = 3;  // the quantized values are -3..252 from it
  std::vector<float> values = {0.f,   -0.f,  0.125f, 0.375f, -0.125f,  -0.375f,   0.625f, -0.625f,
                               1.f,   -0.5f, -0.75f, -0.8f,  -1.f,     62.9f,     63.f,   63.125f,
                               63.4f, 64.f,  1e30f,  -1e30f, INFINITY, -INFINITY, NAN,    12.3f};
  Tensor x = f32(values, {1, 8, 1, 3}), s = f32({scale}, {}),
         zp = Tensor::from_vector<uint8_t>({zero_point}, {});
  Tensor want = run_op("DequantizeLinear", {run_op("QuantizeLinear", {x, s, zp})[0], s, zp})[0];
  auto expect_bits = [&](const float* got) {
    for (size_t i = 0; i < values.size(); i++)
      EXPECT_EQ(std::memcmp(got + i, want.data<float>() + i, sizeof(float)), 0)
          << "x " << values[i] << ": got " << got[i] << ", want " << want.data<float>()[i];
  };
  FusedActivation qdq{FusedActivation::quantize_dequantize, scale, -float(zero_point), 255.f - zero_point},
      none;
  for (size_t i = 0; i < values.size(); i++)
    EXPECT_EQ(quantize_dequantize(values[i], qdq.alpha, qdq.beta, qdq.gamma), want.data<float>()[i])
        << values[i];
  if (cpu_isa() >= CpuIsa::avx2) {
    const float zeros[8] = {};
    for (bool before_sum : {false, true}) {
      SCOPED_TRACE(before_sum ? "before the sum" : "after the sum");
      std::vector<float> y = values;  // three pixels of one block of 8 channels
      avx2_epilogue_block(y.data(), nullptr, 3, zeros, 8, before_sum ? none : qdq, before_sum ? qdq : none);
      expect_bits(y.data());
    }
  }
  // The reference FusedConv: a depthwise 1x1 convolution by 1 (x itself), then the activation.
  std::map<std::string, Attribute> attrs{
      {"group", attr_i(8)},
      {"activation", attr_s("QuantizeDequantize")},
      {"activation_params", attr_floats({qdq.alpha, qdq.beta, qdq.gamma})}};
  Node fused = make_node("FusedConv", 2, 1, attrs);
  fused.domain = "com.microsoft";
  Tensor ones = f32(std::vector<float>(8, 1.f), {8, 1, 1, 1});
  SCOPED_TRACE("reference FusedConv");
  expect_bits(run_on_cpu(fused, {x, ones}, true).data<float>());
}

// A QDQ model's residual block: act(pre(conv + bias) + z), both QuantizeDequantize, with values
// on which float32 is exact: the direct and depthwise kernels equal the reference to the bit.
TEST(CpuDirectConv, FakeQuantizedResidualMatchesTheReferenceToTheBit) {
  if (cpu_isa() < CpuIsa::avx2) GTEST_SKIP() << "the direct convolution needs AVX2";
  for (bool depthwise : {false, true}) {
    SCOPED_TRACE(depthwise ? "depthwise" : "direct");
    Case c{2, 16, 16, 9, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 8, 8, 8, depthwise};
    Tensor x = channel_blocks(random_multiples({2, 16, 9, 10}, 1, 0.5f, -8, 8), 8),
           w = random_multiples({16, depthwise ? 1 : 16, 3, 3}, 2, 1.f, -1, 1),
           b = random_multiples({16}, 3, 0.5f, -4, 4),
           z = channel_blocks(random_multiples({2, 16, 9, 10}, 4, 0.25f, -8, 8), 8);
    // Both clamp some values: sums reach +-72 (depthwise: +-36).
    std::map<std::string, Attribute> attrs = conv_attrs(c, "QuantizeDequantize", {0.25f, -64, 63});
    attrs["pre_activation"] = attr_s("QuantizeDequantize");
    attrs["pre_activation_params"] = attr_floats({0.5f, -30, 30});
    Node n = blocked_conv({x, w, b, z}, attrs);
    Tensor got = run_direct(n, {x, w, b, z}, {2, 2, 9, 10, 8}), want = run_on_cpu(n, {x, w, b, z}, true);
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
    int64_t clamped = 0;
    for (int64_t i = 0; i < got.numel(); i++)
      clamped += got.data<float>()[i] == 15.75f || got.data<float>()[i] == -16.f;
    EXPECT_GT(clamped, 0);
  }
}

}  // namespace
}  // namespace vlrt::test

// The Winograd convolution (backends/cpu/winograd_conv.h) against the reference kernels: tiles
// that overhang the image, channel counts that are not a multiple of the block, batch > 1, one
// pixel, every epilogue it takes; and which convolutions it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/winograd_conv.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

std::map<std::string, Attribute> conv3x3(const std::string& act = "", std::vector<float> params = {}) {
  std::map<std::string, Attribute> a{{"pads", attr_ints({1, 1, 1, 1})},
                                     {"src_block", attr_i(8)},
                                     {"sum_block", attr_i(8)},
                                     {"dst_block", attr_i(8)}};
  if (!act.empty()) a["activation"] = attr_s(act);
  if (!params.empty()) a["activation_params"] = attr_floats(std::move(params));
  return a;
}

// The Winograd kernel on any size against a Y of y_shape.
Tensor run_winograd(const Node& n, const std::vector<Tensor>& inputs, Shape y_shape) {
  ValueInfos infos(inputs);
  return run_prepared(make_winograd_conv(n, 17, infos.ptrs, true), inputs, std::move(y_shape));
}

bool winograd_runs_here() { return cpu_isa() >= CpuIsa::avx2; }

TEST(CpuWinograd, MatchesTheReferenceOnAwkwardShapes) {
  if (!winograd_runs_here()) GTEST_SKIP() << "the Winograd kernel needs AVX2";
  struct Case {
    int64_t n, ic, oc, h, w;
  };
  // 1x1 and 2x3 images (one overhanging tile), 7x6 and 13x9 (partial tiles at the edges),
  // channels below, between and past blocks of 8 and panels of 16.
  std::vector<Case> cases = {{2, 5, 7, 7, 6}, {1, 16, 20, 13, 9}, {1, 8, 16, 1, 1},
                             {1, 3, 9, 2, 3}, {3, 17, 33, 9, 12}, {1, 24, 8, 4, 4}};
  struct Act {
    std::string name;
    std::vector<float> params;
  };
  std::vector<Act> acts = {{"", {}}, {"Relu", {}}, {"LeakyRelu", {0.1f}}, {"Clip", {-0.5f, 0.5f}}, {"Sigmoid", {}}, {"SiLU", {}},
                           {"HardSwish", {}}, {"HardSigmoid", {0.2f, 0.5f}}};
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    Tensor x = channel_blocks(random_uniform({c.n, c.ic, c.h, c.w}, uint32_t(i)), 8);
    Tensor w = random_uniform({c.oc, c.ic, 3, 3}, uint32_t(i) + 50);
    Tensor b = random_uniform({c.oc}, uint32_t(i) + 90);
    Tensor z = channel_blocks(random_uniform({c.n, c.oc, c.h, c.w}, uint32_t(i) + 7), 8);
    Shape y_shape{c.n, (c.oc + 7) / 8, c.h, c.w, 8};
    for (const Act& act : acts)
      for (int form = 0; form < 3; form++) {  // bias; bias and Z; Z alone
        SCOPED_TRACE(cat("case ", i, " activation '", act.name, "' form ", form));
        std::vector<Tensor> in = {x, w, form == 2 ? Tensor() : b};
        if (form > 0) in.push_back(z);
        Node n = blocked_conv(in, conv3x3(act.name, act.params));
        expect_close(run_winograd(n, in, y_shape), run_on_cpu(n, in, true), 1e-4, 1e-4);
      }
  }
}

// A QDQ model's residual block, act(pre(conv + bias) + z) with both QuantizeDequantize, on
// values where the fake quantization absorbs Winograd's rounding: equal to the reference to the bit.
TEST(CpuWinograd, FakeQuantizedResidualMatchesTheReferenceToTheBit) {
  if (!winograd_runs_here()) GTEST_SKIP() << "the Winograd kernel needs AVX2";
  Tensor x = channel_blocks(random_multiples({1, 16, 13, 9}, 1, 0.5f, -8, 8), 8),
         w = random_multiples({20, 16, 3, 3}, 2, 1.f, -1, 1), b = random_multiples({20}, 3, 0.5f, -4, 4),
         z = channel_blocks(random_multiples({1, 20, 13, 9}, 4, 0.25f, -8, 8), 8);
  std::map<std::string, Attribute> attrs = conv3x3("QuantizeDequantize", {0.25f, -64, 63});
  attrs["pre_activation"] = attr_s("QuantizeDequantize");
  attrs["pre_activation_params"] = attr_floats({0.5f, -30, 30});
  Node n = blocked_conv({x, w, b, z}, attrs);
  Tensor got = run_winograd(n, {x, w, b, z}, {1, 3, 13, 9, 8}), want = run_on_cpu(n, {x, w, b, z}, true);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
}

TEST(CpuWinograd, TakesOnlyTheConvolutionsItComputes) {
  if (!winograd_runs_here()) GTEST_SKIP() << "the Winograd kernel needs AVX2";
  Tensor x = channel_blocks(random_uniform({1, 32, 14, 14}, 1), 8), w = random_uniform({40, 32, 3, 3}, 2),
         b = random_uniform({40}, 3);
  CpuBackend cpu(0, test_pool());
  cpu.set_reference_kernels(false);
  auto taken_bytes = [&](const std::vector<Tensor>& in, std::map<std::string, Attribute> attrs) {
    ValueInfos infos(in);
    PrepareInfo info = winograd_prepare_info(blocked_conv(in, std::move(attrs)), 17, infos.ptrs);
    return info.bytes;
  };
  // 36 transformed filters per channel pair, output channels in panels of 16.
  EXPECT_EQ(taken_bytes({x, w, b}, conv3x3("Relu")), size_t(36 * 48 * 32 * 4));
  {
    ValueInfos infos({x, w, b});
    PrepareInfo info = cpu.prepare_info(blocked_conv({x, w, b}, conv3x3()), 17, infos.ptrs);
    EXPECT_EQ(info.bytes, size_t(36 * 48 * 32 * 4)) << "the CPU backend prefers it to oneDNN's direct convolution";
    EXPECT_EQ(info.replaced_inputs, std::vector<size_t>{1});
  }
  auto with = [](std::map<std::string, Attribute> a, const std::string& k, Attribute v) {
    a[k] = std::move(v);
    return a;
  };
  EXPECT_EQ(taken_bytes({x, w, b}, with(conv3x3(), "strides", attr_ints({2, 2}))), 0u);
  EXPECT_EQ(taken_bytes({x, w, b}, with(conv3x3(), "dilations", attr_ints({2, 2}))), 0u);
  EXPECT_EQ(taken_bytes({x, w, b}, with(conv3x3(), "pads", attr_ints({0, 0, 0, 0}))), 0u);
  EXPECT_EQ(taken_bytes({x, w, b}, with(conv3x3(), "src_block", attr_i(0))), 0u);
  EXPECT_EQ(taken_bytes({x, w, b}, conv3x3("Tanh")), 0u);
  Tensor grouped = random_uniform({40, 16, 3, 3}, 4);
  EXPECT_EQ(taken_bytes({x, grouped, b}, with(conv3x3(), "group", attr_i(2))), 0u);
  Tensor pointwise = random_uniform({40, 32, 1, 1}, 5);
  EXPECT_EQ(taken_bytes({x, pointwise, b}, with(conv3x3(), "pads", attr_ints({0, 0, 0, 0}))), 0u);
  // Too small to pay (7x7, as resnet50's last stage): the direct convolution keeps it.
  Tensor small = channel_blocks(random_uniform({1, 32, 7, 7}, 6), 8);
  EXPECT_EQ(taken_bytes({small, w, b}, conv3x3()), 0u);
}

}  // namespace
}  // namespace vlrt::test

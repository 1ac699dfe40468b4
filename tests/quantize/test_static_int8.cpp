// --int8 static on small models built here: activation ranges from runs of the float model, the
// QDQ graph, its accuracy against float32, the written file, and the refusals.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "load/onnx_loader.h"
#include "load/onnx_writer.h"
#include "quantize/static_int8.h"
#include "quantize_test_models.h"

namespace vlrt {
namespace {

using test::count_op;
using test::error_of;

constexpr double kInt8Tolerance = 0.03;

// The ranges of `values` over runs of the float model on each of `inputs` (as calibration does).
ActivationRanges ranges_of(const Model& m, const std::vector<std::string>& values, const std::vector<Tensor>& inputs) {
  SessionOptions o;
  o.threads = 2;
  o.fusion = FusionOptions::none();
  Session s(m, o);
  ActivationRanges ranges;
  auto observe = [&](const std::string& name, const Tensor& t) {
    if (std::find(values.begin(), values.end(), name) == values.end()) return;
    auto [it, fresh] = ranges.try_emplace(name, ActivationRange{t.data<float>()[0], t.data<float>()[0]});
    for (int64_t i = 0; i < t.numel(); i++) it->second.widen(t.data<float>()[i]);
  };
  s.executor().set_value_observer([&](const Node&, const std::string& v, const Tensor& t) { observe(v, t); });
  for (const Tensor& x : inputs) {
    observe("x", x);
    s.run({{"x", x}});
  }
  return ranges;
}

TEST(StaticInt8, Uint8QuantizationHoldsZeroExactly) {
  auto [scale, zp] = uint8_quantization({-1.f, 3.f});
  EXPECT_FLOAT_EQ(scale, 4.f / 255);
  EXPECT_EQ(zp, 64);  // round(1 / (4 / 255)) = round(63.75)
  auto [scale2, zp2] = uint8_quantization({2.f, 5.f});  // widened to [0, 5]
  EXPECT_FLOAT_EQ(scale2, 5.f / 255);
  EXPECT_EQ(zp2, 0);
  auto [scale3, zp3] = uint8_quantization({-6.f, -1.f});  // widened to [-6, 0]
  EXPECT_EQ(zp3, 255);
  EXPECT_FLOAT_EQ(scale3, 6.f / 255);
  auto [scale4, zp4] = uint8_quantization({0.f, 0.f});
  EXPECT_EQ(scale4, 1.f);
  EXPECT_EQ(zp4, 0);
}

TEST(StaticInt8, MlpBecomesQdqWithinTolerance) {
  Model m = test::mlp_model();
  std::vector<std::string> values = static_int8_activations(m, {});
  EXPECT_EQ(values, (std::vector<std::string>{"x", "h1", "h3"}));  // y is a graph output: it stays float
  std::vector<Tensor> calibration = {test::random_tensor({2, 64}, 21), test::random_tensor({2, 64}, 22)};
  Tensor x = test::random_tensor({2, 64}, 23);
  Tensor want = test::run_model(m, x);
  QuantizeReport r = quantize_static_int8(m, {}, ranges_of(m, values, calibration));
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Gemm", 1}, {"MatMul", 1}}));
  EXPECT_EQ(count_op(m.graph, "QuantizeLinear"), 3u);
  EXPECT_EQ(count_op(m.graph, "DequantizeLinear"), 3u + 2u + 1u);  // activations, weights, Gemm's C
  EXPECT_EQ(count_op(m.graph, "MatMul"), 1u);  // the nodes stay, reading dequantized values
  EXPECT_EQ(m.graph.initializers.count("w1"), 0u);
  EXPECT_EQ(m.graph.initializers.at("w1_quantized").dtype(), DType::i8);
  EXPECT_EQ(m.graph.initializers.at("w2_scale").shape(), (Shape{40}));  // transB: channels on axis 0
  EXPECT_EQ(m.graph.initializers.at("c2_quantized").dtype(), DType::i32);
  EXPECT_LT(r.weight_bytes_after * 3, r.weight_bytes_before);
  // The readers of a quantized output read its dequantized copy; the node keeps its output's name.
  const Node& bias = *std::find_if(m.graph.nodes.begin(), m.graph.nodes.end(), [](auto& n) { return n.name == "bias1"; });
  EXPECT_EQ(bias.inputs[0], "h1_dequantized");
  double err = test::relative_error(test::run_model(m, x), want);
  EXPECT_LT(err, kInt8Tolerance);
  EXPECT_GT(err, 0);
}

TEST(StaticInt8, ConvNetWithOddChannelsWithinToleranceAndWrittenTheSame) {
  Model m = test::conv_model();
  std::vector<std::string> values = static_int8_activations(m, {});
  EXPECT_EQ(values, (std::vector<std::string>{"x", "c1", "r1"}));
  Tensor x = test::random_tensor({1, 3, 17, 13}, 24);
  Tensor want = test::run_model(m, x);
  QuantizeReport r = quantize_static_int8(m, {}, ranges_of(m, values, {x}));
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Conv", 2}}));
  EXPECT_EQ(m.graph.initializers.at("w1_scale").shape(), (Shape{13}));
  EXPECT_EQ(m.graph.initializers.at("b1_quantized").dtype(), DType::i32);
  Tensor got = test::run_model(m, x);
  EXPECT_LT(test::relative_error(got, want), kInt8Tolerance);
  std::string path = test::temp_dir("static_int8_written") + "/conv_qdq.onnx";
  write_onnx(m, path);
  EXPECT_EQ(test::relative_error(test::run_model(load_onnx(path), x), got), 0);
}

TEST(StaticInt8, ExcludedNodesStayFloat) {
  Model m = test::mlp_model();
  Int8Options o;
  o.exclude = {"fc2"};
  std::vector<std::string> values = static_int8_activations(m, o);
  EXPECT_EQ(values, (std::vector<std::string>{"x", "h1"}));
  QuantizeReport r = quantize_static_int8(m, o, ranges_of(m, values, {test::random_tensor({2, 64}, 25)}));
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"MatMul", 1}}));
  EXPECT_EQ(m.graph.initializers.count("w2"), 1u);
}

TEST(StaticInt8, Refusals) {
  Model m = test::mlp_model();
  std::string err = error_of([&] { quantize_static_int8(m, {}, {{"x", {-1.f, 1.f}}}); });
  EXPECT_NE(err.find("no calibrated range for 'h1'"), std::string::npos) << err;
  Model old = test::mlp_model();
  old.opsets[""] = 12;
  err = error_of([&] { quantize_static_int8(old, {}, {}); });
  EXPECT_NE(err.find("opset 12"), std::string::npos) << err;
  Model q = test::mlp_model();
  quantize_static_int8(q, {}, ranges_of(q, static_int8_activations(q, {}), {test::random_tensor({2, 64}, 26)}));
  err = error_of([&] { quantize_static_int8(q, {}, {}); });
  EXPECT_NE(err.find("already quantized"), std::string::npos) << err;
}

}  // namespace
}  // namespace vlrt

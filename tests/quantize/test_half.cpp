// --fp16 / --bf16 on small models built here: which weights change, the accuracy, --all,
// --exclude and the refusals.
#include <gtest/gtest.h>

#include "quantize/dynamic_int8.h"
#include "quantize/half.h"
#include "quantize_test_models.h"

namespace vlrt {
namespace {

using test::count_op;
using test::error_of;

// x -> fc1 MatMul -> LayerNormalization (scale, bias: 48) -> fc2 Gemm -> y (a graph output)
Model mlp_with_norm() {
  Model m = test::mlp_model();
  Graph& g = m.graph;
  g.initializers["ln_scale"] = test::random_tensor({48}, 21, 1.f);
  g.initializers["ln_bias"] = test::random_tensor({48}, 22, 0.1f);
  g.nodes[1] = make_node("norm", "LayerNormalization", {"h1", "ln_scale", "ln_bias"}, {"h2"});
  g.initializers.erase("b1");
  return m;
}

TEST(HalfWeights, RobustReadersGetHalfWeightsThroughACast) {
  Model m = mlp_with_norm();
  Tensor x = test::random_tensor({2, 64}, 23);
  Tensor want = test::run_model(m, x);
  QuantizeReport r = convert_weights_to_half(m, {});
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"MatMul", 1}}));
  EXPECT_EQ(m.graph.initializers.at("w1_fp16").dtype(), DType::f16);
  EXPECT_EQ(m.graph.initializers.count("w1"), 0u);
  ASSERT_EQ(m.graph.nodes[0].op_type, "Cast");
  EXPECT_EQ(m.graph.nodes[0].outputs[0], "w1");  // readers keep their input names
  // Fragile readers (the normalization) and the node making the graph output keep float32.
  EXPECT_EQ(m.graph.initializers.at("ln_scale").dtype(), DType::f32);
  EXPECT_EQ(m.graph.initializers.at("w2").dtype(), DType::f32);
  EXPECT_EQ(r.weight_bytes_before - r.weight_bytes_after, 64 * 48 * 2);
  EXPECT_LT(test::relative_error(test::run_model(m, x), want), 1e-2);
}

TEST(HalfWeights, AllConvertsFragileReadersToo) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Model m = mlp_with_norm();
    Tensor x = test::random_tensor({2, 64}, 24);
    Tensor want = test::run_model(m, x);
    HalfOptions o;
    o.dtype = dt;
    o.all = true;
    QuantizeReport r = convert_weights_to_half(m, o);
    EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Gemm", 2}, {"LayerNormalization", 2}, {"MatMul", 1}}))
        << dtype_name(dt);
    EXPECT_EQ(count_op(m.graph, "Cast"), 5u);  // w1, ln_scale, ln_bias, w2, c2
    for (auto& [name, t] : m.graph.initializers) EXPECT_EQ(t.dtype(), dt) << name;
    EXPECT_LT(test::relative_error(test::run_model(m, x), want), 1e-2) << dtype_name(dt);
  }
}

TEST(HalfWeights, ConvNetWithinOnePercent) {
  Model m = test::conv_model();
  Tensor x = test::random_tensor({1, 3, 17, 13}, 25);
  Tensor want = test::run_model(m, x);
  HalfOptions o;
  o.dtype = DType::bf16;
  QuantizeReport r = convert_weights_to_half(m, o);
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Conv", 1}}));  // conv2 makes the output
  EXPECT_EQ(m.graph.initializers.at("w1_bf16").dtype(), DType::bf16);
  EXPECT_LT(test::relative_error(test::run_model(m, x), want), 1e-2);
}

TEST(HalfWeights, SmallAndExcludedWeightsStayFloat) {
  Model m = test::conv_model();
  HalfOptions o;
  o.all = true;
  o.exclude = {"conv1"};
  QuantizeReport r = convert_weights_to_half(m, o);
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Conv", 1}}));
  EXPECT_EQ(m.graph.initializers.at("w1").dtype(), DType::f32);
  EXPECT_EQ(m.graph.initializers.at("w2_fp16").dtype(), DType::f16);
  EXPECT_EQ(m.graph.initializers.at("b1").dtype(), DType::f32);  // 13 elements, under 16
  Model by_op = test::conv_model();
  o.exclude = {"Conv"};
  EXPECT_TRUE(convert_weights_to_half(by_op, o).rewritten.empty());
}

TEST(HalfWeights, RefusesHalfAndQuantizedModels) {
  Model m = test::conv_model();
  convert_weights_to_half(m, {});
  std::string err = error_of([&] { convert_weights_to_half(m, {}); });
  EXPECT_NE(err.find("already holds float16 weights"), std::string::npos) << err;
  Model q = test::conv_model();
  quantize_dynamic_int8(q, {});
  err = error_of([&] { convert_weights_to_half(q, {}); });
  EXPECT_NE(err.find("already quantized"), std::string::npos) << err;
  Model bad = test::conv_model();
  HalfOptions o;
  o.exclude = {"NoSuchOp"};
  err = error_of([&] { convert_weights_to_half(bad, o); });
  EXPECT_NE(err.find("'NoSuchOp'"), std::string::npos) << err;
}

}  // namespace
}  // namespace vlrt

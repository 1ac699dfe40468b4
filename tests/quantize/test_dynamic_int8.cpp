// --int8 dynamic on small models built here: the rewritten graph, its accuracy against
// float32, the written file, --exclude and the refusals.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "load/onnx_loader.h"
#include "load/onnx_writer.h"
#include "quantize/dynamic_int8.h"
#include "quantize_test_models.h"

namespace vlrt {
namespace {

using test::count_op;
using test::error_of;

// uint8 activations and int8 weights: the largest error stays within 3% of the output's peak.
constexpr double kInt8Tolerance = 0.03;

TEST(DynamicInt8, PerChannelScalesAreSymmetric) {
  Tensor w = Tensor::from_vector<float>({1.f, -4.f, 0.f, 0.5f, 2.f, 0.f}, {2, 3});
  ChannelQuantized q = quantize_per_channel(w, 1);
  ASSERT_EQ(q.scales.size(), 3u);
  EXPECT_FLOAT_EQ(q.scales[0], 1.f / 127);
  EXPECT_FLOAT_EQ(q.scales[1], 4.f / 127);
  EXPECT_FLOAT_EQ(q.scales[2], 1.f);  // an all-zero channel
  std::vector<int8_t> want = {127, -127, 0, 64, 64, 0};
  EXPECT_EQ(std::vector<int8_t>(q.values.data<int8_t>(), q.values.data<int8_t>() + 6), want);
  ChannelQuantized rows = quantize_per_channel(w, 0);
  EXPECT_FLOAT_EQ(rows.scales[0], 4.f / 127);
  EXPECT_FLOAT_EQ(rows.scales[1], 2.f / 127);
}

TEST(DynamicInt8, MlpBecomesIntegerProductsWithinTolerance) {
  Model m = test::mlp_model();
  Tensor x = test::random_tensor({2, 64}, 11);
  Tensor want = test::run_model(m, x);
  QuantizeReport r = quantize_dynamic_int8(m, {});
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Gemm", 1}, {"MatMul", 1}}));
  EXPECT_EQ(count_op(m.graph, "MatMul") + count_op(m.graph, "Gemm"), 0u);
  EXPECT_EQ(count_op(m.graph, "MatMulInteger"), 2u);
  EXPECT_EQ(count_op(m.graph, "DynamicQuantizeLinear"), 2u);
  EXPECT_EQ(m.graph.initializers.count("w1"), 0u);  // the float weights are gone
  EXPECT_EQ(m.graph.initializers.at("w1_quantized").dtype(), DType::i8);
  EXPECT_EQ(m.graph.initializers.at("w2_quantized").shape(), (Shape{48, 40}));  // transB applied
  // 4 bytes per weight before, 1 after (plus the scales and the biases).
  EXPECT_LT(r.weight_bytes_after * 3, r.weight_bytes_before);
  double err = test::relative_error(test::run_model(m, x), want);
  EXPECT_LT(err, kInt8Tolerance);
  EXPECT_GT(err, 0);  // it did change the arithmetic
}

TEST(DynamicInt8, ConvNetWithOddChannelsWithinTolerance) {
  Model m = test::conv_model();
  Tensor x = test::random_tensor({1, 3, 17, 13}, 12);
  Tensor want = test::run_model(m, x);
  QuantizeReport r = quantize_dynamic_int8(m, {});
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Conv", 2}}));
  EXPECT_EQ(count_op(m.graph, "ConvInteger"), 2u);
  EXPECT_EQ(m.graph.initializers.at("w1_scale").shape(), (Shape{1, 13, 1, 1}));
  EXPECT_LT(test::relative_error(test::run_model(m, x), want), kInt8Tolerance);
}

TEST(DynamicInt8, WrittenFileLoadsBackAndRunsTheSame) {
  Model m = test::conv_model();
  quantize_dynamic_int8(m, {});
  std::string path = test::temp_dir("int8_written") + "/conv_int8.onnx";
  write_onnx(m, path);
  Tensor x = test::random_tensor({1, 3, 17, 13}, 13);
  Tensor in_memory = test::run_model(m, x);
  Tensor from_file = test::run_model(load_onnx(path), x);
  EXPECT_EQ(test::relative_error(from_file, in_memory), 0);
}

// ids[2,5] -> Gather(table [50, 32]) -> MatMul(w [32, 24]) -> y, the text encoder's first steps.
Model embedding_model(int64_t opset, int64_t gather_axis = 0) {
  Model m = test::empty_model(opset);
  Graph& g = m.graph;
  ValueDecl ids = test::decl("ids", {2, 5});
  ids.dtype = DType::i64;
  g.inputs.push_back(ids);
  g.outputs.push_back(test::decl("y", gather_axis == 0 ? Shape{2, 5, 24} : Shape{50, 2, 5}));
  g.initializers["table"] = test::random_tensor({50, 32}, 21, 0.5f);
  g.initializers["w"] = test::random_tensor({32, 24}, 22, 0.3f);
  Node gather = vlrt::make_node("embed", "Gather", {"table", "ids"}, {gather_axis == 0 ? "e" : "y"});
  gather.attrs["axis"] = int_attribute(gather_axis);
  g.nodes.push_back(gather);
  if (gather_axis == 0) g.nodes.push_back(vlrt::make_node("proj", "MatMul", {"e", "w"}, {"y"}));
  return m;
}

Tensor run_embedding(Model m) {
  Tensor ids = Tensor::from_vector<int64_t>({0, 7, 49, 3, 3, -1, 12, 25, 31, 8}, {2, 5});
  SessionOptions options;
  options.threads = 2;
  return Session(std::move(m), options).run({{"ids", ids}}).at("y");
}

// An embedding table becomes int8 with one symmetric scale per column, dequantized after the
// Gather (negative indices included); a table gathered along another axis, or in a model older
// than opset 13 (no per-axis DequantizeLinear), stays float32.
TEST(DynamicInt8, EmbeddingTablesAreStoredAsInt8) {
  Model m = embedding_model(17);
  Tensor want = run_embedding(m);
  QuantizeReport r = quantize_dynamic_int8(m, {});
  EXPECT_EQ(r.rewritten, (std::map<std::string, int>{{"Gather", 1}, {"MatMul", 1}}));
  EXPECT_EQ(m.graph.initializers.count("table"), 0u);
  EXPECT_EQ(m.graph.initializers.at("table_quantized").dtype(), DType::i8);
  EXPECT_EQ(m.graph.initializers.at("table_scale").shape(), (Shape{32}));
  EXPECT_EQ(count_op(m.graph, "DequantizeLinear"), 1u);
  double err = test::relative_error(run_embedding(m), want);
  EXPECT_LT(err, kInt8Tolerance);
  EXPECT_GT(err, 0);

  Model old = embedding_model(12);
  EXPECT_EQ(quantize_dynamic_int8(old, {}).rewritten, (std::map<std::string, int>{{"MatMul", 1}}));
  EXPECT_EQ(old.graph.initializers.at("table").dtype(), DType::f32);
  Model other_axis = embedding_model(17, 1);
  EXPECT_TRUE(quantize_dynamic_int8(other_axis, {}).rewritten.empty());
}

TEST(DynamicInt8, SmallWeightsStayFloat) {
  Model m = test::mlp_model();
  Int8Options o;
  o.min_weight_elements = 64 * 48 + 1;
  QuantizeReport r = quantize_dynamic_int8(m, o);
  EXPECT_TRUE(r.rewritten.empty());
  EXPECT_EQ(count_op(m.graph, "MatMul"), 1u);
  EXPECT_EQ(r.weight_bytes_after, r.weight_bytes_before);
}

TEST(DynamicInt8, ExcludeByNameAndByOp) {
  Model by_name = test::mlp_model();
  Int8Options o;
  o.exclude = {"fc1"};
  EXPECT_EQ(quantize_dynamic_int8(by_name, o).rewritten, (std::map<std::string, int>{{"Gemm", 1}}));
  EXPECT_EQ(count_op(by_name.graph, "MatMul"), 1u);
  Model by_op = test::mlp_model();
  o.exclude = {"Gemm"};
  EXPECT_EQ(quantize_dynamic_int8(by_op, o).rewritten, (std::map<std::string, int>{{"MatMul", 1}}));
  EXPECT_EQ(count_op(by_op.graph, "Gemm"), 1u);
  Model unknown = test::mlp_model();
  o.exclude = {"fc9"};
  std::string err = error_of([&] { quantize_dynamic_int8(unknown, o); });
  EXPECT_NE(err.find("--exclude 'fc9' matches no node name and no op type"), std::string::npos) << err;
  Model by_pattern = test::mlp_model();  // fc1 and fc2, not bias1 or relu1 (which are not products anyway)
  o.exclude = {"fc?"};
  EXPECT_TRUE(quantize_dynamic_int8(by_pattern, o).rewritten.empty());
  Model one = test::mlp_model();
  o.exclude = {"*2"};
  EXPECT_EQ(quantize_dynamic_int8(one, o).rewritten, (std::map<std::string, int>{{"MatMul", 1}}));
  Model none = test::mlp_model();
  o.exclude = {"/bert/*"};
  err = error_of([&] { quantize_dynamic_int8(none, o); });
  EXPECT_NE(err.find("--exclude '/bert/*' matches no node name of the model"), std::string::npos) << err;
}

TEST(DynamicInt8, RefusesQuantizedModelsAndOldOpsets) {
  Model m = test::mlp_model();
  quantize_dynamic_int8(m, {});
  std::string err = error_of([&] { quantize_dynamic_int8(m, {}); });
  EXPECT_NE(err.find("already quantized"), std::string::npos) << err;
  EXPECT_NE(err.find("DynamicQuantizeLinear"), std::string::npos) << err;
  Model old = test::mlp_model();
  old.opsets[""] = 10;
  err = error_of([&] { quantize_dynamic_int8(old, {}); });
  EXPECT_NE(err.find("opset 10"), std::string::npos) << err;
}

}  // namespace
}  // namespace vlrt

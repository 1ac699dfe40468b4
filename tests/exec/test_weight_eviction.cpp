// Weights that every reader holds packed are given back after a plan is prepared and read
// again from the model file when another plan needs them (Buffer::evict, load_onnx); folded
// weights (a quantized model's dequantized ones) are given back as folded and computed again
// from their inputs when read (fold_constants).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "apps/commands.h"
#include "cli_util.h"
#include "core/reference_mode.h"
#include "exec/session.h"
#include "load/onnx_loader.h"
#include "op_test_util.h"
#include "passes/shape_inference.h"

namespace vlrt {

namespace {

const char* kConvWeight = "onnx::Conv_697";  // [64, 64, 3, 3] in the demo model

TensorMap demo_inputs(const Model& m, const std::string& image_shape) {
  TensorMap in;
  std::vector<std::string> shapes = {"img=" + image_shape};
  for (const char* text : {"input_ids", "position_ids", "token_type_ids", "attention_mask"})
    shapes.push_back(std::string(text) + "=1x5");
  shapes.push_back("text_token_mask=1x5x5");
  add_random_inputs(m, shapes, in);
  return in;
}

// x [2, 128] times the transpose of DequantizeLinear(q int8 [256, 128], 0.02, zero point 3).
Model dequantized_weight_model() {
  Model m;
  m.opsets[""] = 18;
  Tensor q(DType::i8, {256, 128}), scale(DType::f32, {}), zero(DType::i8, {});
  for (int64_t i = 0; i < q.numel(); i++) q.data<int8_t>()[i] = int8_t(i % 251 - 125);
  scale.data<float>()[0] = 0.02f;
  zero.data<int8_t>()[0] = 3;
  m.graph.initializers = {{"q", q}, {"scale", scale}, {"zero", zero}};
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out,
                  std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.name = out;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    n.attrs = std::move(attrs);
    m.graph.nodes.push_back(n);
  };
  node("DequantizeLinear", {"q", "scale", "zero"}, "w");
  node("Transpose", {"w"}, "wt", {{"perm", test::attr_ints({1, 0})}});
  node("MatMul", {"x", "wt"}, "y");
  ValueDecl x;
  x.name = "x";
  x.dtype = DType::f32;
  x.has_shape = true;
  x.dims = {Dim{2, ""}, Dim{128, ""}};
  m.graph.inputs.push_back(x);
  ValueDecl y;
  y.name = "y";
  m.graph.outputs.push_back(y);
  return m;
}

// wt of dequantized_weight_model(), computed here.
std::vector<float> expected_wt() {
  std::vector<float> wt(128 * 256);
  for (int64_t i = 0; i < 256; i++)
    for (int64_t j = 0; j < 128; j++)
      wt[size_t(j * 256 + i)] = float(int((i * 128 + j) % 251 - 125) - 3) * 0.02f;
  return wt;
}

}  // namespace

TEST(WeightEviction, FoldedWeightsAreGivenBackAndComputedAgainWhenRead) {
  Model m = dequantized_weight_model();
  std::shared_ptr<Backend> cpu = create_backend(Device{}, 1);
  EXPECT_EQ(fold_constants(m, *cpu), 2u);
  EXPECT_EQ(m.graph.initializers.count("w"), 0u);  // folded into wt
  Tensor wt = m.graph.initializers.at("wt");
  EXPECT_TRUE(wt.buffer()->evicted());  // 128 KiB of floats not held once folded
  std::vector<float> want = expected_wt();
  for (int pass = 0; pass < 2; pass++) {
    ASSERT_EQ(wt.shape(), (Shape{128, 256}));
    EXPECT_EQ(std::memcmp(wt.raw(), want.data(), wt.nbytes()), 0) << "pass " << pass;
    EXPECT_FALSE(wt.buffer()->evicted());
    EXPECT_TRUE(wt.buffer()->evict());
  }
  // Run by a session: its product packs wt and gives it back again.
  SessionOptions o;
  o.threads = 2;
  Session s(dequantized_weight_model(), o);
  Tensor x = test::random_uniform({2, 128}, 7);
  Tensor y = s.run({{"x", x}}).at("y");
  Tensor ref(DType::f32, {2, 256});
  for (int64_t r = 0; r < 2; r++)
    for (int64_t c = 0; c < 256; c++) {
      double sum = 0;
      for (int64_t k = 0; k < 128; k++)
        sum += double(x.data<float>()[r * 128 + k]) * want[size_t(k * 256 + c)];
      ref.data<float>()[r * 256 + c] = float(sum);
    }
  test::expect_close(y, ref, 1e-4, 1e-4);
  EXPECT_EQ(s.model().graph.initializers.at("wt").buffer()->evicted(), !reference_kernels_requested());
}

TEST(WeightEviction, PackedWeightsAreEvictedAndReadAgainFromTheModelFile) {
  Model m = load_onnx(test::source_path("models/demo/model.onnx"));
  ASSERT_TRUE(m.graph.initializers.at(kConvWeight).buffer()->refill);
  Tensor original = m.graph.initializers.at(kConvWeight).clone();
  SessionOptions o;
  o.threads = 2;
  Session s(std::move(m), o);
  TensorMap small = demo_inputs(s.model(), "1x3x64x64");
  TensorMap first = s.run(small);
  const Tensor& held = s.model().graph.initializers.at(kConvWeight);
  // packed by oneDNN (not under the reference kernels, which pack nothing)
  EXPECT_EQ(held.buffer()->evicted(), !reference_kernels_requested());
  s.run(demo_inputs(s.model(), "1x3x96x64"));  // another plan packs it again from the file
  EXPECT_EQ(std::memcmp(held.raw(), original.raw(), original.nbytes()), 0);
  TensorMap again = s.run(small);
  for (auto& [name, t] : first) test::expect_close(again.at(name), t, 0, 0);
}

TEST(WeightEviction, AModelFileChangedUnderAnEvictedWeightIsAnErrorNamingIt) {
  std::string dir = test::temp_dir("eviction"), path = dir + "/model.onnx";
  std::filesystem::copy_file(test::source_path("models/demo/model.onnx"), path,
                             std::filesystem::copy_options::overwrite_existing);
  Model m = load_onnx(path);
  Tensor w = m.graph.initializers.at(kConvWeight);
  ASSERT_TRUE(w.buffer()->evict());
  std::filesystem::resize_file(path, 1000);
  try {
    (void)w.raw();
    FAIL() << "reading an evicted weight from a truncated file must fail";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("changed or truncated"), std::string::npos) << msg;
  }
}

}  // namespace vlrt

// Weights that every reader holds packed are given back after a plan is prepared and read
// again from the model file when another plan needs them (Buffer::evict, load_onnx).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "apps/commands.h"
#include "cli_util.h"
#include "core/reference_mode.h"
#include "exec/session.h"
#include "load/onnx_loader.h"
#include "op_test_util.h"

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

}  // namespace

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

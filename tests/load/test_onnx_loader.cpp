#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"
#include "io/files.h"
#include "load/onnx_loader.h"

namespace vlrt {

namespace {
const std::string kTiny = test::source_path("models/tiny/tiny_cnn.onnx");

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string error_of(const std::string& path) {
  try {
    load_onnx(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(OnnxLoader, LoadsTinyModel) {
  Model m = load_onnx(kTiny);
  EXPECT_EQ(m.opset(), 17);
  ASSERT_EQ(m.graph.inputs.size(), 1u);
  EXPECT_EQ(m.graph.inputs[0].name, "image");
  EXPECT_EQ(m.graph.inputs[0].describe(), "float32[batch,3,32,32]");
  EXPECT_EQ(m.graph.nodes.size(), 9u);
  EXPECT_EQ(m.graph.initializers.at("conv1.w").shape(), (Shape{8, 3, 3, 3}));
  EXPECT_EQ(m.graph.nodes[0].attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(OnnxLoader, MissingFile) {
  EXPECT_NE(error_of("/nonexistent/model.onnx").find("no such file"), std::string::npos);
}

TEST(OnnxLoader, TruncatedFileIsNamedTruncated) {
  std::string bytes = read_file(kTiny);
  std::string dir = test::temp_dir("truncated");
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t(40)}) {
    std::string path = dir + "/cut.onnx";
    write_bytes(path, bytes.substr(0, cut));
    std::string err = error_of(path);
    EXPECT_NE(err.find("truncated"), std::string::npos) << "cut at " << cut << ": " << err;
  }
}

TEST(OnnxLoader, GarbageIsNotAModel) {
  std::string dir = test::temp_dir("garbage");
  write_bytes(dir + "/text.onnx", "this is not a model, just some text\n");
  std::string err = error_of(dir + "/text.onnx");
  EXPECT_TRUE(err.find("not") != std::string::npos) << err;
  write_bytes(dir + "/empty.onnx", "");
  EXPECT_NE(error_of(dir + "/empty.onnx").find("empty"), std::string::npos);
}

TEST(OnnxLoader, TensorProtoFromTestSuite) {
  std::string dir = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0";
  if (!std::ifstream(dir + "/input_0.pb")) GTEST_SKIP() << "libonnx-testdata not installed";
  std::string name;
  Tensor t = parse_tensor_proto(read_file(dir + "/input_0.pb"), dir, &name);
  EXPECT_EQ(name, "x");
  EXPECT_EQ(t.describe(), "float32[3,4,5]");
}

}  // namespace vlrt

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "cli_util.h"
#include "io/files.h"
#include "load/onnx_loader.h"
#include "load/proto_writer.h"

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

namespace {
// A float32 TensorProto of `dims` with `fields` appended (raw data, external data entries).
std::string tensor_proto(const std::vector<int64_t>& dims, const std::function<void(ProtoWriter&)>& fields) {
  std::string out;
  ProtoWriter w(out);
  for (int64_t d : dims) w.int64_field(1, d);
  w.int64_field(2, 1);  // FLOAT
  fields(w);
  return out;
}

std::string tensor_error(const std::string& bytes, const std::string& dir = ".") {
  try {
    parse_tensor_proto(bytes, dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(OnnxLoader, HugeDeclaredShapeIsRefusedBeforeAllocating) {
  auto raw4 = [](ProtoWriter& w) { w.bytes_field(9, std::string(4, '\0')); };
  std::string msg = tensor_error(tensor_proto({int64_t(1) << 20, int64_t(1) << 20}, raw4));
  EXPECT_NE(msg.find("raw data is 4 bytes, float32[1048576,1048576] needs 4398046511104"), std::string::npos) << msg;
  msg = tensor_error(tensor_proto({4000000000, 4000000000, 0}, raw4));
  EXPECT_NE(msg.find("shape [4000000000,4000000000,0] is too large"), std::string::npos) << msg;
  msg = tensor_error(tensor_proto({int64_t(1) << 40}, [](ProtoWriter&) {}));
  EXPECT_NE(msg.find("has 0 values for shape [1099511627776]"), std::string::npos) << msg;
}

TEST(OnnxLoader, ExternalDataOffsetThatIsNotASizeIsAnError) {
  for (std::string offset : {"12abc", "-4", "99999999999999999999", ""}) {
    std::string msg = tensor_error(tensor_proto({1}, [&](ProtoWriter& w) {
      std::string entry;
      ProtoWriter e(entry);
      e.bytes_field(1, "offset");
      e.bytes_field(2, offset);
      w.bytes_field(13, entry);
    }));
    EXPECT_NE(msg.find("external data offset '" + offset + "' is not a size"), std::string::npos) << msg;
  }
}

TEST(OnnxLoader, ExternalDataOffsetFarPastTheFileIsTruncated) {
  std::string dir = test::temp_dir("ext_offset_max");
  write_bytes(dir + "/w.bin", std::string(8, '\0'));
  std::string msg = tensor_error(tensor_proto({2}, [](ProtoWriter& w) {
    for (auto [key, value] : {std::pair{"location", "w.bin"}, {"offset", "922337203685477580"}}) {
      std::string entry;
      ProtoWriter e(entry);
      e.bytes_field(1, key);
      e.bytes_field(2, value);
      w.bytes_field(13, entry);
    }
    w.int64_field(14, 1);  // data_location EXTERNAL
  }), dir);
  EXPECT_NE(msg.find("the file is truncated"), std::string::npos) << msg;
}

// External data must lie in the model's folder: a downloaded model names no other file.
TEST(OnnxLoader, ExternalDataLeavingTheModelsFolderIsRefused) {
  std::string root = test::temp_dir("ext_outside");
  std::filesystem::create_directories(root + "/model");
  write_bytes(root + "/secret.bin", std::string(8, '\0'));
  write_bytes(root + "/model/w.bin", std::string(8, '\0'));
  std::filesystem::remove(root + "/model/link.bin");
  std::filesystem::create_symlink(root + "/secret.bin", root + "/model/link.bin");
  auto external = [](const std::string& location) {
    return tensor_proto({2}, [&](ProtoWriter& w) {
      std::string entry;
      ProtoWriter e(entry);
      e.bytes_field(1, "location");
      e.bytes_field(2, location);
      w.bytes_field(13, entry);
      w.int64_field(14, 1);  // data_location EXTERNAL
    });
  };
  std::string dir = root + "/model";
  using Case = std::pair<std::string, std::string>;
  for (auto [location, why] : {Case{"../secret.bin", "leads out of the model's folder ('..')"},
                               Case{"sub/../../secret.bin", "leads out of the model's folder ('..')"},
                               Case{root + "/secret.bin", "is not a path relative to the model's folder"},
                               Case{"link.bin", "leads out of the model's folder through a symbolic link"}}) {
    std::string msg = tensor_error(external(location), dir);
    EXPECT_NE(msg.find("tensor: external data: '" + location + "' " + why), std::string::npos) << msg;
    EXPECT_NE(msg.find("external data must lie in the model's folder"), std::string::npos) << msg;
  }
  EXPECT_EQ(tensor_error(external("w.bin"), dir), "no error");
  EXPECT_EQ(tensor_error(external("./w.bin"), dir), "no error");
}

TEST(OnnxLoader, DeeplyNestedSubgraphsAreRefused) {
  std::string graph;  // the innermost body: empty
  for (int i = 0; i < 100; i++) {
    std::string attr, node, outer;
    ProtoWriter a(attr), n(node), g(outer);
    a.bytes_field(1, "body");
    a.bytes_field(6, graph);
    a.int64_field(20, 5);  // GRAPH
    n.bytes_field(4, "If");
    n.bytes_field(5, attr);
    g.bytes_field(1, node);
    graph = outer;
  }
  std::string model;
  ProtoWriter m(model);
  m.int64_field(1, 8);
  m.bytes_field(7, graph);
  std::string dir = test::temp_dir("nested_subgraphs");
  write_bytes(dir + "/m.onnx", model);
  std::string msg = error_of(dir + "/m.onnx");
  EXPECT_NE(msg.find("subgraphs nested more than 64 deep"), std::string::npos) << msg;
  try {
    external_data_files(dir + "/m.onnx");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("subgraphs nested more than 64 deep"), std::string::npos) << e.what();
  }
}

}  // namespace vlrt

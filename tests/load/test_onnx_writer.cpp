// load → write → load gives the same Model, and the same outputs bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "cli_util.h"
#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "load/onnx_writer.h"
#include "op_test_util.h"

namespace vlrt {
namespace {

namespace fs = std::filesystem;

void expect_same_graph(const Graph& a, const Graph& b, const std::string& where);

void expect_same_tensor(const Tensor& a, const Tensor& b, const std::string& where) {
  ASSERT_EQ(a.dtype(), b.dtype()) << where;
  ASSERT_EQ(a.shape(), b.shape()) << where;
  if (a.nbytes()) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << where << ": bytes differ";
  }
}

void expect_same_decls(const std::vector<ValueDecl>& a, const std::vector<ValueDecl>& b, const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); i++) {
    EXPECT_EQ(a[i].name, b[i].name) << where;
    EXPECT_EQ(a[i].describe(), b[i].describe()) << where << " " << a[i].name;
  }
}

void expect_same_attribute(const Attribute& a, const Attribute& b, const std::string& where) {
  EXPECT_EQ(int(a.kind), int(b.kind)) << where;
  EXPECT_EQ(a.f, b.f) << where;
  EXPECT_EQ(a.i, b.i) << where;
  EXPECT_EQ(a.s, b.s) << where;
  EXPECT_EQ(a.floats, b.floats) << where;
  EXPECT_EQ(a.ints, b.ints) << where;
  EXPECT_EQ(a.strings, b.strings) << where;
  EXPECT_EQ(a.type.describe(), b.type.describe()) << where;
  EXPECT_EQ(a.t.defined(), b.t.defined()) << where;
  if (a.t.defined() && b.t.defined()) expect_same_tensor(a.t, b.t, where);
  ASSERT_EQ(bool(a.graph), bool(b.graph)) << where;
  if (a.graph) expect_same_graph(*a.graph, *b.graph, where + " subgraph");
  ASSERT_EQ(a.graphs.size(), b.graphs.size()) << where;
  for (size_t i = 0; i < a.graphs.size(); i++) expect_same_graph(*a.graphs[i], *b.graphs[i], where + " graphs");
}

void expect_same_graph(const Graph& a, const Graph& b, const std::string& where) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size()) << where;
  for (size_t i = 0; i < a.nodes.size(); i++) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    std::string at = where + ": " + x.label();
    EXPECT_EQ(x.name, y.name) << at;
    EXPECT_EQ(x.op_type, y.op_type) << at;
    EXPECT_EQ(x.domain, y.domain) << at;
    EXPECT_EQ(x.inputs, y.inputs) << at;
    EXPECT_EQ(x.outputs, y.outputs) << at;
    ASSERT_EQ(x.attrs.size(), y.attrs.size()) << at;
    for (auto& [name, attr] : x.attrs) {
      ASSERT_TRUE(y.attrs.count(name)) << at << " lost attribute " << name;
      expect_same_attribute(attr, y.attrs.at(name), at + " attribute " + name);
    }
  }
  ASSERT_EQ(a.initializers.size(), b.initializers.size()) << where;
  for (auto& [name, t] : a.initializers) {
    ASSERT_TRUE(b.initializers.count(name)) << where << " lost initializer " << name;
    expect_same_tensor(t, b.initializers.at(name), where + " initializer " + name);
  }
  expect_same_decls(a.inputs, b.inputs, where + " inputs");
  expect_same_decls(a.outputs, b.outputs, where + " outputs");
  expect_same_decls(a.value_infos, b.value_infos, where + " value_info");
}

void expect_same_model(const Model& a, const Model& b, const std::string& where) {
  EXPECT_EQ(a.ir_version, b.ir_version) << where;
  EXPECT_EQ(a.producer, b.producer) << where;
  EXPECT_EQ(a.opsets, b.opsets) << where;
  EXPECT_EQ(a.metadata, b.metadata) << where;
  expect_same_graph(a.graph, b.graph, where);
}

Model rewritten(const Model& m, const std::string& name) {
  std::string path = test::temp_dir("onnx_writer_" + name) + "/model.onnx";
  write_onnx(m, path);
  return load_onnx(path);
}

TEST(OnnxWriter, EveryFixtureModelRoundTrips) {
  int checked = 0;
  std::string path = test::temp_dir("onnx_writer_all") + "/model.onnx";
  for (auto& entry : fs::recursive_directory_iterator(test::source_path("tests/fixtures"))) {
    if (entry.path().extension() != ".onnx") continue;
    Model m;
    try {
      m = load_onnx(entry.path().string());
    } catch (const Error&) {
      continue;  // fixtures of load errors
    }
    std::string where = entry.path().lexically_relative(test::source_path("tests/fixtures")).string();
    std::string bytes = serialize_onnx(m);
    write_onnx(m, path);
    expect_same_model(m, load_onnx(path), where);
    // Writing is deterministic: the loaded copy gives the same bytes again.
    EXPECT_EQ(serialize_onnx(load_onnx(path)), bytes) << where;
    checked++;
  }
  EXPECT_GT(checked, 100);
}

TEST(OnnxWriter, SubgraphsAndMetadataRoundTrip) {
  Model m = load_onnx(test::source_path("tests/fixtures/control_flow/loop_nested_if.onnx"));
  m.metadata["author"] = "test";
  m.producer = "vlrt-test";
  Model back = rewritten(m, "subgraphs");
  expect_same_model(m, back, "loop_nested_if");
  const Node* loop = nullptr;
  for (auto& n : back.graph.nodes)
    if (n.op_type == "Loop") loop = &n;
  ASSERT_NE(loop, nullptr);
  EXPECT_FALSE(loop->attr_graph("body").nodes.empty());
}

TEST(OnnxWriter, EveryAttributeKindAndDtypeRoundTrips) {
  Model m;
  m.ir_version = 3;  // initializers are listed as inputs too, and read back as initializers
  m.opsets = {{"", 13}, {"com.example", 1}};
  Node n;
  n.name = "all_kinds";
  n.op_type = "Custom";
  n.domain = "com.example";
  n.inputs = {"x", ""};
  n.outputs = {"y"};
  n.attrs["f"] = test::attr_f(1.5f);
  n.attrs["i"] = test::attr_i(-7);
  n.attrs["s"] = test::attr_s(std::string("a\0b", 3));
  n.attrs["t"] = test::attr_t(Tensor::from_vector<int64_t>({1, -2}, {2}));
  n.attrs["floats"] = test::attr_floats({0.5f, -1e30f});
  n.attrs["ints"] = test::attr_ints({-1, 1LL << 40});
  n.attrs["empty_ints"] = test::attr_ints({});
  Attribute strings;
  strings.kind = Attribute::Kind::strings;
  strings.strings = {"p", ""};
  n.attrs["strings"] = strings;
  Attribute type;
  type.kind = Attribute::Kind::type;
  type.type = ValueDecl{"", DType::f16, true, {Dim{2, ""}, Dim{-1, "n"}}, ValueKind::optional_sequence};
  n.attrs["tp"] = type;
  auto sub = std::make_shared<Graph>();
  sub->outputs.push_back(ValueDecl{"x", DType::f32, false, {}, ValueKind::tensor});
  Attribute graphs;
  graphs.kind = Attribute::Kind::graphs;
  graphs.graphs = {sub, sub};
  n.attrs["graphs"] = graphs;
  m.graph.nodes.push_back(n);
  m.graph.inputs.push_back(ValueDecl{"x", DType::f32, true, {Dim{-1, "batch"}, Dim{-1, ""}, Dim{3, ""}}});
  m.graph.outputs.push_back(ValueDecl{"y", DType::f32, false, {}, ValueKind::sequence});
  int k = 0;
  for (DType dt : {DType::f32, DType::u8, DType::i8, DType::u16, DType::i16, DType::i32, DType::i64, DType::boolean,
                   DType::f16, DType::f64, DType::u32, DType::u64, DType::bf16}) {
    Tensor t(dt, {2, 3});
    for (size_t b = 0; b < t.nbytes(); b++) static_cast<uint8_t*>(t.raw())[b] = uint8_t(dt == DType::boolean ? b & 1 : b * 37 + 1);
    m.graph.initializers["init" + std::to_string(k++)] = t;
  }
  m.graph.initializers["scalar"] = Tensor::scalar<float>(2.f);
  m.graph.initializers["empty"] = Tensor(DType::f32, {0, 4});
  expect_same_model(m, rewritten(m, "kinds"), "all kinds");
}

// The rewritten file runs to the same bits as the original.
void expect_same_outputs(const std::string& fixture, const TensorMap& inputs) {
  Model m = load_onnx(test::source_path(fixture));
  Model back = rewritten(m, "outputs");
  SessionOptions options;
  options.threads = 2;
  TensorMap want = Session(std::move(m), options).run(inputs);
  TensorMap got = Session(std::move(back), options).run(inputs);
  ASSERT_EQ(want.size(), got.size());
  for (auto& [name, t] : want) expect_same_tensor(t, got.at(name), fixture + " output " + name);
}

TEST(OnnxWriter, RewrittenModelGivesBitIdenticalOutputs) {
  Tensor image(DType::f32, {1, 3, 32, 32});
  for (int64_t i = 0; i < image.numel(); i++) image.data<float>()[i] = float((i * 7919) % 255) / 255.f - 0.5f;
  expect_same_outputs("models/tiny/tiny_cnn.onnx", {{"image", image}});
  std::string dir = "tests/fixtures/control_flow/";
  TensorMap loop_inputs;
  for (const char* in : {"M", "acc0", "x"})
    loop_inputs[in] = read_npy(test::source_path(dir + "loop_nested_if.in_" + in + ".npy"));
  expect_same_outputs(dir + "loop_nested_if.onnx", loop_inputs);
}

TEST(OnnxWriter, TooLargeTensorIsRefusedWithAReason) {
  Model m;
  m.ir_version = 8;
  m.opsets[""] = 13;
  // A buffer claiming 2 GiB over one byte: the writer refuses it before reading the data.
  static char byte = 0;
  auto buffer = std::make_shared<Buffer>();
  buffer->data = &byte;
  buffer->bytes = size_t(1) << 31;
  m.graph.initializers["huge"] = Tensor(DType::u8, {int64_t(1) << 31}, buffer, 0);
  try {
    serialize_onnx(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 GiB"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vlrt

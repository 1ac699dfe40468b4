// The export lint: baked sizes found in traced exports and in hand-built graphs (a Swin-style
// window reverse, a Reshape without -1), and nothing found in clean graphs or committed models.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/backend.h"
#include "cli_util.h"
#include "integrity/load_model.h"
#include "passes/export_lint.h"

namespace vlrt {

namespace {

ExportLintReport lint(const Model& m) {
  static std::shared_ptr<Backend> cpu = create_backend(Device{}, 1);
  return lint_baked_sizes(m, *cpu);
}

ExportLintReport lint_file(const std::string& rel) { return lint(load_model(test::source_path(rel))); }

// x[N, rest...] (N symbolic) through Reshapes whose shapes are initializers.
struct ReshapeChain {
  Model m;
  std::string last = "x";
  explicit ReshapeChain(Shape rest) {
    m.opsets[""] = 17;
    ValueDecl d;
    d.name = "x";
    d.dtype = DType::f32;
    d.has_shape = true;
    d.dims.push_back({-1, "N"});
    for (int64_t s : rest) d.dims.push_back({s, ""});
    m.graph.inputs.push_back(d);
  }
  void reshape(const std::string& name, std::vector<int64_t> shape) {
    ints(name + "_shape", shape);
    last = node(name, "Reshape", {last, name + "_shape"});
  }
  void ints(const std::string& name, std::vector<int64_t> values) {
    Tensor t(DType::i64, {int64_t(values.size())});
    std::copy(values.begin(), values.end(), t.data<int64_t>());
    m.graph.initializers[name] = t;
  }
  // Appends a node named `name` with one output, `name` + "_out", and returns that output.
  std::string node(const std::string& name, const std::string& op_type, std::vector<std::string> inputs) {
    Node n;
    n.name = name;
    n.op_type = op_type;
    n.inputs = std::move(inputs);
    n.outputs = {name + "_out"};
    m.graph.nodes.push_back(n);
    return n.outputs[0];
  }
};

TEST(ExportLint, FlagsTheBakedBatchOfATracedExport) {
  ExportLintReport r = lint_file("tests/fixtures/export_lint/baked_batch.onnx");
  ASSERT_EQ(r.findings.size(), 1u) << (r.findings.size() > 1 ? r.findings[1].message : "");
  const BakedSizeFinding& f = r.findings[0];
  EXPECT_EQ(f.node, "/Reshape");
  EXPECT_EQ(f.op_type, "Reshape");
  EXPECT_EQ(f.constant, "/Constant_output_0");
  EXPECT_EQ(f.dimension, "'batch'");
  EXPECT_NE(f.message.find("[1, 2, -1, 8]"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("apparently 1"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("dynamic_axes"), std::string::npos) << f.message;
}

// Swin's window_reverse with B = int(...): the Reshape takes the batch into its -1, and shape
// inference fails only at the residual Add downstream. The lint names the Reshape.
TEST(ExportLint, TracesAFailureDownstreamToTheReshapeThatBakesTheBatch) {
  ExportLintReport r = lint_file("tests/fixtures/export_lint/baked_window_reverse.onnx");
  ASSERT_EQ(r.findings.size(), 1u) << (r.findings.size() > 1 ? r.findings[1].message : "");
  EXPECT_TRUE(r.notes.empty()) << (r.notes.empty() ? "" : r.notes[0]);
  const BakedSizeFinding& f = r.findings[0];
  EXPECT_EQ(f.node, "/Reshape_2");
  EXPECT_EQ(f.op_type, "Reshape");
  EXPECT_EQ(f.constant, "/Constant_11_output_0");
  EXPECT_EQ(f.dimension, "'batch'");
  EXPECT_NE(f.message.find("constant '/Constant_11_output_0' = [1]"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("output axis 0"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("it gives [1, 2, 2, 2, 2, 1792]"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("node '/Add' (Add)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("dynamic_axes"), std::string::npos) << f.message;
}

// A size such as 224 can pass a limit of the model (here a table of 4 positions sliced to N):
// the dimension is probed again at a small size, where the baked Reshape is found.
TEST(ExportLint, ProbesASmallSizeWhereTheSecondFails) {
  ReshapeChain g({16, 3});
  g.reshape("partition", {-1, 2, 2, 3});
  g.reshape("reverse", {1, 2, 2, 2, 2, -1});
  Tensor positions(DType::f32, {4});
  std::fill_n(positions.data<float>(), 4, 0.f);
  g.m.graph.initializers["positions"] = positions;
  g.ints("zero", {0});
  std::string n = g.node("batch", "Shape", {"x"});
  g.m.graph.nodes.back().attrs["end"].kind = Attribute::Kind::i;
  g.m.graph.nodes.back().attrs["end"].i = 1;
  std::string sliced = g.node("slice", "Slice", {"positions", "zero", n});
  std::string zeros = g.node("zeros", "ConstantOfShape", {n});
  g.node("add", "Add", {sliced, zeros});
  ExportLintReport r = lint(g.m);
  ASSERT_EQ(r.findings.size(), 1u) << (r.findings.size() > 1 ? r.findings[1].message : "");
  EXPECT_EQ(r.findings[0].node, "reverse");
  EXPECT_NE(r.findings[0].message.find("'N' = 3"), std::string::npos) << r.findings[0].message;
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("fails when 'N' is 224 (it passes at 1): node 'add' (Add)"), std::string::npos)
      << r.notes[0];
}

TEST(ExportLint, CleanExportHasNoFinding) {
  ExportLintReport r = lint_file("tests/fixtures/export_lint/clean.onnx");
  EXPECT_TRUE(r.findings.empty()) << r.findings[0].message;
  EXPECT_TRUE(r.notes.empty());
}

TEST(ExportLint, FlagsAWindowReverseThatBakesTheBatch) {
  ReshapeChain g({16, 3});
  g.reshape("partition", {-1, 2, 2, 3});        // N*4 windows of 2x2: the batch follows
  g.reshape("reverse", {1, 2, 2, 2, 2, -1});    // B = 1 baked: windows of two images fall into -1
  ExportLintReport r = lint(g.m);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].node, "reverse");
  EXPECT_EQ(r.findings[0].constant, "reverse_shape");
  EXPECT_EQ(r.findings[0].dimension, "'N'");
  EXPECT_NE(r.findings[0].message.find("output axis 0"), std::string::npos) << r.findings[0].message;
}

TEST(ExportLint, FlagsAReshapeThatFailsAtAnotherSize) {
  ReshapeChain g({8});
  g.reshape("merge", {-1});
  g.reshape("split", {1, 2, 4});  // no -1: fails at every size but 1
  ExportLintReport r = lint(g.m);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].node, "split");
  EXPECT_EQ(r.findings[0].constant, "split_shape");
  EXPECT_NE(r.findings[0].message.find("shape inference fails when 'N'"), std::string::npos)
      << r.findings[0].message;
}

TEST(ExportLint, FlattensAndHeadSplitsAreNotFlagged) {
  ReshapeChain g({6, 8});
  g.reshape("flatten", {-1, 8});        // [N*6, 8]
  g.reshape("unflatten", {-1, 6, 8});   // back to [N, 6, 8]
  g.reshape("heads", {0, 0, 2, 4});     // [N, 6, 2, 4]
  g.reshape("merge", {0, -1});          // [N, 48]
  ExportLintReport r = lint(g.m);
  EXPECT_TRUE(r.findings.empty()) << r.findings[0].message;
}

TEST(ExportLint, NoDynamicDimensionNothingToLint) {
  ReshapeChain g({8});
  g.m.graph.inputs[0].dims[0] = {1, ""};
  g.reshape("split", {1, 2, 4});
  ExportLintReport r = lint(g.m);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(r.notes.empty());
}

TEST(ExportLint, AnInputWithoutShapeIsANote) {
  ReshapeChain g({8});
  g.m.graph.inputs[0].has_shape = false;
  g.m.graph.inputs[0].dims.clear();
  ExportLintReport r = lint(g.m);
  EXPECT_TRUE(r.findings.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("input 'x'"), std::string::npos);
}

TEST(ExportLint, CommittedModelsHaveNoFinding) {
  size_t linted = 0;
  for (const char* dir : {"tests/fixtures", "models"})
    for (auto& e : std::filesystem::recursive_directory_iterator(test::source_path(dir))) {
      std::string path = e.path().string();
      if (e.path().extension() != ".onnx" || path.find("export_lint/baked") != std::string::npos) continue;
      Model m;
      try {
        m = load_model(path);
      } catch (const Error&) {
        continue;  // fixtures of load errors
      }
      ExportLintReport r = lint(m);
      EXPECT_TRUE(r.findings.empty()) << path << ": " << r.findings[0].message;
      linted++;
    }
  EXPECT_GT(linted, 20u);
}

}  // namespace

}  // namespace vlrt

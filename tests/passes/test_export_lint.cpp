// The export lint: baked sizes found in a traced export and in hand-built graphs (a Swin-style
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
    Tensor t(DType::i64, {int64_t(shape.size())});
    std::copy(shape.begin(), shape.end(), t.data<int64_t>());
    m.graph.initializers[name + "_shape"] = t;
    Node n;
    n.name = name;
    n.op_type = "Reshape";
    n.inputs = {last, name + "_shape"};
    n.outputs = {name + "_out"};
    m.graph.nodes.push_back(n);
    last = n.outputs[0];
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

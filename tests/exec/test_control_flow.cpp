// If, Loop and Scan run their subgraphs through nested sessions; the models and the
// expected outputs (onnxruntime) come from tools/make_control_flow_models.py.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"

namespace vlrt {
namespace {

std::string fixture(const std::string& name) { return test::source_path("tests/fixtures/control_flow/" + name); }

// Runs fixture `name` on its saved inputs and compares every output with onnxruntime's.
void expect_matches_reference(const std::string& name) {
  Model m = load_onnx(fixture(name + ".onnx"));
  TensorMap inputs;
  for (auto& in : m.graph.inputs) inputs[in.name] = read_npy(fixture(name + ".in_" + in.name + ".npy"));
  std::vector<std::string> outputs;
  for (auto& o : m.graph.outputs) outputs.push_back(o.name);
  SessionOptions options;
  options.threads = 2;
  Session s(std::move(m), options);
  for (int run = 0; run < 2; run++) {  // the second run reuses the cached plans of the subgraphs
    TensorMap got = s.run(inputs);
    for (auto& o : outputs) {
      Tensor want = read_npy(fixture(name + ".out_" + o + ".npy"));
      ASSERT_TRUE(got.count(o)) << name << ": output " << o;
      EXPECT_EQ(got[o].dtype(), want.dtype()) << name << ": " << o;
      ASSERT_EQ(got[o].shape(), want.shape()) << name << ": " << o;
      auto g = got[o].to_double_vector(), w = want.to_double_vector();
      for (size_t i = 0; i < w.size(); i++) EXPECT_NEAR(g[i], w[i], 1e-5) << name << ": " << o << "[" << i << "]";
    }
  }
}

size_t count_op(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (auto& node : g.nodes) {
    n += node.op_type == op;
    for (auto& [attr, sub] : node.subgraphs()) n += count_op(*sub, op);
  }
  return n;
}

TEST(ControlFlow, LoaderReadsSubgraphs) {
  Model m = load_onnx(fixture("loop_nested_if.onnx"));
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  const Graph& body = m.graph.nodes[0].attr_graph("body");
  EXPECT_EQ(body.inputs.size(), 3u);
  EXPECT_EQ(body.outputs.size(), 2u);
  EXPECT_EQ(count_op(m.graph, "If"), 1u);
  EXPECT_EQ(implicit_inputs(m.graph.nodes[0]), std::vector<std::string>{"x"});
}

TEST(ControlFlow, IfWithConstantConditionIsInlined) {
  expect_matches_reference("if_const");
  Session s(load_onnx(fixture("if_const.onnx")));
  EXPECT_EQ(count_op(s.model().graph, "If"), 0u);
}

TEST(ControlFlow, IfOnDataReadsOuterScope) {
  expect_matches_reference("if_data_then");
  expect_matches_reference("if_data_else");
}

size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/task")) n++;
  return n;
}

// The branches read the main graph's weights (one from an If nested in a branch): the bodies take
// them as constants of their own. Every body runs on the enclosing session's thread pool: a
// session of 2 threads starts one thread, however many bodies there are.
TEST(ControlFlow, BodiesReadEnclosingWeightsOnTheEnclosingPool) {
  const size_t before = thread_count();
  expect_matches_reference("if_outer_weights");
  expect_matches_reference("if_outer_weights_else");
  EXPECT_EQ(thread_count(), before) << "a session's threads end with it";
  Model m = load_onnx(fixture("if_outer_weights_else.onnx"));
  SessionOptions options;
  options.threads = 2;
  Session s(std::move(m), options);
  s.run({{"x", read_npy(fixture("if_outer_weights_else.in_x.npy"))}});
  EXPECT_EQ(thread_count(), before + 1) << "the pool's one worker, and none for the two bodies";
}

TEST(ControlFlow, LoopWithCarriedValuesScanOutputsAndEarlyExit) { expect_matches_reference("loop"); }

// A model's trip count is outside input: past the session's limit a loop without a condition is
// refused before the first iteration, one with a condition is stopped at the limit.
TEST(ControlFlow, LoopPastTheIterationLimitIsRefused) {
  auto run_loop = [](int64_t trips, int64_t max_iterations, bool with_condition = true) {
    Model m = load_onnx(fixture("loop.onnx"));
    if (!with_condition) m.graph.nodes[0].inputs[1] = "";  // a for loop: M iterations
    TensorMap inputs;
    for (auto& in : m.graph.inputs) inputs[in.name] = read_npy(fixture("loop.in_" + in.name + ".npy"));
    inputs["M"] = Tensor::scalar<int64_t>(trips);
    SessionOptions options;
    options.max_loop_iterations = max_iterations;
    Session s(std::move(m), options);
    try {
      s.run(inputs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string msg = run_loop(INT64_MAX, 4, false);
  EXPECT_NE(msg.find("(Loop): its trip count M is 9223372036854775807, more than the 4 iterations a Loop may run; "
                     "refused before running (raise --max-loop-iterations"),
            std::string::npos) << msg;
  msg = run_loop(5, 2);  // the body's condition holds for 3 iterations
  EXPECT_NE(msg.find("(Loop): its condition still holds after 2 iterations, the most a Loop may run; stopped"),
            std::string::npos) << msg;
  EXPECT_EQ(run_loop(5, 3), "no error");
  EXPECT_EQ(run_loop(INT64_MAX, 3), "no error");  // a while loop: the condition ends it
  EXPECT_EQ(run_loop(5, 5, false), "no error");
  EXPECT_EQ(run_loop(INT64_MAX, 0), "no error");  // 0: no limit
}

TEST(ControlFlow, IfNestedInLoop) { expect_matches_reference("loop_nested_if"); }

TEST(ControlFlow, ScanForwardAndReverseWithAxes) { expect_matches_reference("scan"); }

TEST(ControlFlow, ScanShapesAreInferred) {
  Session s(load_onnx(fixture("scan.onnx")));
  const InferredGraph& inf =
      s.infer({{"s0", {DType::f32, {2}}}, {"a", {DType::f32, {3, 2}}}, {"b", {DType::f32, {2, 3}}}, {"k", {DType::f32, {}}}});
  EXPECT_EQ(inf.values.at("out0").shape, (Shape{3, 2}));
  EXPECT_EQ(inf.values.at("out1").shape, (Shape{2, 3}));
}

TEST(ControlFlow, PlanRunsControlFlowOnTheHostAndCountsSubgraphOps) {
  Session s(load_onnx(fixture("loop_nested_if.onnx")));
  const Plan& p = s.plan({{"M", {DType::i64, {}}}, {"acc0", {DType::f32, {3}}}, {"x", {DType::f32, {3}}}});
  const DevicePlan& host = p.device_plan(Device{});
  EXPECT_EQ(host.ops.at("Loop"), 1);
  EXPECT_EQ(host.ops.at("If"), 1);
  EXPECT_EQ(host.ops.at("Add"), 1);
  bool control_flow = false;
  for (auto& step : p.steps) control_flow = control_flow || step.control_flow;
  EXPECT_TRUE(control_flow);
}

TEST(ControlFlow, IfBranchesWithDifferentTypesFail) {
  Session s(load_onnx(fixture("if_bad_types.onnx")));
  TensorMap in{{"c", Tensor::scalar<bool>(true)}, {"x", Tensor::from_vector<float>({1, 2}, {2})}};
  try {
    s.run(in);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("bad_if"), std::string::npos) << msg;
    EXPECT_NE(msg.find("same type"), std::string::npos) << msg;
  }
}

TEST(ControlFlow, SubgraphReadingAnUnknownValueFailsAtLoad) {
  try {
    load_onnx(fixture("if_missing_outer.onnx"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("missing_if"), std::string::npos) << msg;
    EXPECT_NE(msg.find("then_branch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nowhere"), std::string::npos) << msg;
  }
}

// A model whose only node is an If with `branch` as both branches.
Model if_model(const Graph& branch) {
  Model m;
  m.path = "if.onnx";
  m.ir_version = 8;
  m.opsets[""] = 16;
  m.graph.inputs = {ValueDecl{"c", DType::boolean, true, {}}, ValueDecl{"x", DType::f32, true, {Dim{2, ""}}}};
  m.graph.outputs = {ValueDecl{"y", DType::f32, false, {}}};
  Node n = make_node("the_if", "If", {"c"}, {"y"});
  for (const char* attr : {"then_branch", "else_branch"}) {
    Attribute a;
    a.kind = Attribute::Kind::graph;
    a.graph = std::make_shared<Graph>(branch);
    n.attrs[attr] = a;
  }
  m.graph.nodes.push_back(n);
  return m;
}

TEST(ControlFlow, CyclicSubgraphFailsNamingNodeAndSubgraph) {
  Graph branch;
  branch.nodes = {make_node("a", "Relu", {"b_out"}, {"a_out"}), make_node("b", "Relu", {"a_out"}, {"b_out"})};
  branch.outputs = {ValueDecl{"a_out", DType::f32, false, {}}};
  Model m = if_model(branch);
  try {
    topo_sort(m.graph);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("the_if"), std::string::npos) << msg;
    EXPECT_NE(msg.find("else_branch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cycle: 2 nodes cannot be ordered (in a cycle, or reading from one), among them node 'a' "
                       "(Relu), node 'b' (Relu)"),
              std::string::npos) << msg;
  }
}

// ONNX graphs define each value once; a second definition (a node's output, a graph input or an
// initializer) is a load error naming both.
TEST(ControlFlow, ValuesDefinedTwiceAreRefused) {
  auto error_of = [](Graph g) {
    g.inputs = {ValueDecl{"x", DType::f32, true, {}}};
    g.initializers["w"] = Tensor::scalar<float>(1);
    try {
      topo_sort(g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Graph twice;
  twice.nodes = {make_node("a", "Relu", {"x"}, {"y"}), make_node("b", "Neg", {"x"}, {"y"})};
  EXPECT_EQ(error_of(twice), "node 'b' (Neg): its output 'y' is also the output of node 'a' (Relu); every value "
                             "must be defined once (re-export the model, or rename one of them)");
  Graph input;
  input.nodes = {make_node("a", "Relu", {"x"}, {"x"})};
  EXPECT_NE(error_of(input).find("node 'a' (Relu): its output 'x' is also a graph input"), std::string::npos);
  Graph initializer;
  initializer.nodes = {make_node("a", "Relu", {"x"}, {"w"})};
  EXPECT_NE(error_of(initializer).find("node 'a' (Relu): its output 'w' is also an initializer"), std::string::npos);
  Graph fine;
  fine.nodes = {make_node("a", "Relu", {"x"}, {"y"}), make_node("b", "Neg", {"y"}, {"z", ""})};
  EXPECT_EQ(error_of(fine), "no error");
}

TEST(ControlFlow, UnsupportedOpInsideASubgraphIsReported) {
  Graph branch;
  branch.nodes = {make_node("odd", "NoSuchOp", {"x"}, {"t"})};
  branch.outputs = {ValueDecl{"t", DType::f32, false, {}}};
  try {
    Session s(if_model(branch));
    FAIL() << "expected an error";
  } catch (const Unsupported& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("NoSuchOp"), std::string::npos) << msg;
  }
}

TEST(ControlFlow, IfOnARuntimeConditionRunsEitherBranch) {
  Graph branch;
  branch.nodes = {make_node("neg", "Neg", {"x"}, {"t"})};
  branch.outputs = {ValueDecl{"t", DType::f32, false, {}}};
  Session s(if_model(branch));
  for (bool c : {true, false}) {
    TensorMap out = s.run({{"c", Tensor::scalar<bool>(c)}, {"x", Tensor::from_vector<float>({1, -2}, {2})}});
    EXPECT_EQ(out.at("y").to_double_vector(), (std::vector<double>{-1, 2}));
  }
}

TEST(ControlFlow, IfBranchesOfDifferentRanksRun) {
  // As silero-vad's exports: one branch gives [2], the other [1,2]; the shape is known only at run time.
  Graph then_g;
  then_g.nodes = {make_node("neg", "Neg", {"x"}, {"t"})};
  then_g.outputs = {ValueDecl{"t", DType::f32, false, {}}};
  Graph else_g;
  else_g.nodes = {make_node("reshape", "Reshape", {"x", "to"}, {"e"})};
  else_g.initializers["to"] = Tensor::from_vector<int64_t>({1, 2}, {2});
  else_g.outputs = {ValueDecl{"e", DType::f32, false, {}}};
  Model m = if_model(then_g);
  m.graph.nodes[0].attrs["else_branch"].graph = std::make_shared<Graph>(else_g);
  Session s(m);
  Tensor x = Tensor::from_vector<float>({1, -2}, {2});
  TensorMap then_out = s.run({{"c", Tensor::scalar<bool>(true)}, {"x", x}});
  EXPECT_EQ(then_out.at("y").shape(), (Shape{2}));
  TensorMap else_out = s.run({{"c", Tensor::scalar<bool>(false)}, {"x", x}});
  EXPECT_EQ(else_out.at("y").shape(), (Shape{1, 2}));
  EXPECT_EQ(else_out.at("y").to_double_vector(), (std::vector<double>{1, -2}));
}

}  // namespace
}  // namespace vlrt

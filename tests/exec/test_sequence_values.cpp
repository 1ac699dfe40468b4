// Sequences and optionals through a session: planned on the host outside the arenas,
// held in the executor's slots, given as inputs and returned as outputs.
#include <gtest/gtest.h>

#include "exec/session.h"
#include "op_test_util.h"

namespace vlrt {
namespace {

using test::attr_i;
using test::expect_close;
using test::f32;

Node node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
          std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.name = op + "_" + out[0];
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attrs = std::move(attrs);
  return n;
}

ValueDecl decl(const std::string& name, ValueKind kind = ValueKind::tensor) {
  ValueDecl d;
  d.name = name;
  d.dtype = DType::f32;
  d.kind = kind;
  return d;
}

// x, y -> s = [x, y, x]; outputs s, its length, its concatenation and an optional of it.
Model sequence_model() {
  Model m;
  m.opsets[""] = 17;
  m.graph.inputs = {decl("x"), decl("y")};
  m.graph.nodes = {node("SequenceConstruct", {"x", "y"}, {"pair"}), node("SequenceInsert", {"pair", "x"}, {"s"}),
                   node("SequenceLength", {"s"}, {"n"}),
                   node("ConcatFromSequence", {"s"}, {"c"}, {{"axis", attr_i(0)}}),
                   node("Optional", {"s"}, {"opt"})};
  m.graph.outputs = {decl("s", ValueKind::sequence), decl("n"), decl("c"), decl("opt", ValueKind::optional_sequence)};
  m.graph.outputs[1].dtype = DType::i64;
  return m;
}

TEST(SequenceValues, RunThroughASessionOnTheHost) {
  Session session(sequence_model());
  Tensor x = f32({1, 2}, {2}), y = f32({3}, {1});
  for (int run = 0; run < 2; run++) {
    TensorMap out = session.run({{"x", x}, {"y", y}});
    ASSERT_EQ(out["s"].kind(), ValueKind::sequence);
    ASSERT_EQ(out["s"].elements().size(), 3u);
    expect_close(out["s"].elements()[2], x);
    expect_close(out["n"], Tensor::scalar<int64_t>(3));
    expect_close(out["c"], f32({1, 2, 3, 1, 2}, {5}));
    ASSERT_EQ(out["opt"].kind(), ValueKind::optional_sequence);
    EXPECT_EQ(out["opt"].elements()[0].elements().size(), 3u);
  }
  const Plan& plan = session.plan({{"x", {DType::f32, {2}}}, {"y", {DType::f32, {1}}}});
  int s = plan.slot("s", Device{});
  ASSERT_GE(s, 0);
  EXPECT_TRUE(plan.slots[size_t(s)].dynamic);  // made by its kernel, never in the arena
  EXPECT_EQ(plan.slots[size_t(s)].bytes, 0u);
}

TEST(SequenceValues, SequenceInputsAreTakenAndCheckedAgainstTheDeclaration) {
  Model m;
  m.opsets[""] = 17;
  m.graph.inputs = {decl("s", ValueKind::sequence)};
  m.graph.nodes = {node("SequenceAt", {"s", "i"}, {"at"})};
  m.graph.initializers["i"] = Tensor::scalar<int64_t>(-1);
  m.graph.outputs = {decl("at")};
  Session session(std::move(m));
  Tensor a = f32({1}, {1}), b = f32({2, 3}, {2});
  expect_close(session.run({{"s", Tensor::sequence(DType::f32, {a, b})}})["at"], b);
  expect_close(session.run({{"s", Tensor::sequence(DType::f32, {b, a})}})["at"], a);
  try {
    session.run({{"s", a}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 's' is a tensor (float32[1]) but the model expects sequence("),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vlrt

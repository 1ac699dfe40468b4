// Session::check_inputs: what a model's input declaration binds and what it does not.
#include <gtest/gtest.h>

#include "exec/session.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

// Add of x: float32[N,3] and y: float32[N,3], both axes 0 named "N".
Model add_with_shared_symbol() {
  Node n = make_node("Add", 2, 1);
  Model m = one_node_model(n, 17, {f32({0, 0, 0}, {1, 3}), f32({0, 0, 0}, {1, 3})});
  for (auto& d : m.graph.inputs) d.dims[0] = {-1, "N"};
  return m;
}

TEST(SessionInputs, SameSymbolMayDifferBetweenInputsWithOneWarning) {
  Session s(add_with_shared_symbol());
  TensorMap in = {{"in0", f32({1, 2, 3, 4, 5, 6}, {2, 3})}, {"in1", f32({10, 20, 30}, {1, 3})}};
  testing::internal::CaptureStderr();
  TensorMap out = s.run(in);
  s.run(in);
  std::string err = testing::internal::GetCapturedStderr();
  expect_close(out.at("out0"), f32({11, 22, 33, 14, 25, 36}, {2, 3}));
  EXPECT_NE(err.find("dimension 'N' is 2 in input 'in0' but 1 in input 'in1'"), std::string::npos) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once: " << err;
}

TEST(SessionInputs, FixedDimsRankAndDtypeStillMustMatch) {
  Session s(add_with_shared_symbol());
  auto message = [&](TensorMap in) {
    try {
      s.check_inputs(in);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message({{"in0", f32({1, 2}, {1, 2})}, {"in1", f32({1, 2, 3}, {1, 3})}}).find("axis 1 must be 3"),
            std::string::npos);
  EXPECT_NE(message({{"in0", f32({1, 2, 3}, {3})}, {"in1", f32({1, 2, 3}, {1, 3})}}).find("rank 1"),
            std::string::npos);
  EXPECT_NE(message({{"in0", i64({1, 2, 3}, {1, 3})}, {"in1", f32({1, 2, 3}, {1, 3})}}).find("int64[1,3]"),
            std::string::npos);
}

// A shape taken from input data is outside input too: an output larger than the machine's memory
// is refused before allocating, naming the node, the value and its shape.
TEST(SessionInputs, OutputLargerThanTheMachineIsRefusedNamingTheNode) {
  Node n = make_node("ConstantOfShape", 1, 1);
  Session s(one_node_model(n, 17, {i64({1, 1, 1}, {3})}));
  try {
    s.run({{"in0", i64({1000000, 1000000, 1000}, {3})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'n' (ConstantOfShape)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'out0' (float32[1000000,1000000,1000]) on cpu: needs 4000000000000000 bytes of host memory, "
                       "more than this machine's "),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("refused before allocating"), std::string::npos) << msg;
  }
  TensorMap out = s.run({{"in0", i64({2, 1, 1}, {3})}});  // the session still runs
  EXPECT_EQ(out.at("out0").shape(), (Shape{2, 1, 1}));
}

}  // namespace
}  // namespace vlrt::test

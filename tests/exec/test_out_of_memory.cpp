// Memory running out (fail_host_allocation, VLRT_FAIL_ALLOCATION in the programs) at every host
// allocation of making a session and running it: each is an OutOfMemory error, not a crash, a
// wrong answer or an error of another kind, and the next attempt runs as if nothing happened.
#include <gtest/gtest.h>

#include "exec/session.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

// y = Relu(x @ w + b): a MatMul, an Add and a Relu, with initializers.
Model small_model() {
  Model m;
  m.path = "small.onnx";
  m.opsets[""] = 17;
  m.graph.inputs = {ValueDecl{"x", DType::f32, true, {Dim{2, ""}, Dim{3, ""}}}};
  m.graph.outputs = {ValueDecl{"y", DType::f32, false, {}}};
  m.graph.initializers["w"] = f32({1, -1, 0.5, 2, 0, -2}, {3, 2});
  m.graph.initializers["b"] = f32({0.25, -0.5}, {2});
  Node mm, add, relu;
  mm.name = "mm", mm.op_type = "MatMul", mm.inputs = {"x", "w"}, mm.outputs = {"xw"};
  add.name = "add", add.op_type = "Add", add.inputs = {"xw", "b"}, add.outputs = {"z"};
  relu.name = "relu", relu.op_type = "Relu", relu.inputs = {"z"}, relu.outputs = {"y"};
  m.graph.nodes = {mm, add, relu};
  return m;
}

Tensor run_once(const Tensor& x) {
  Session s(small_model());
  return s.run({{"x", x}}).at("y");
}

TEST(OutOfMemory, EveryHostAllocationOfASessionFailsCleanly) {
  Tensor x = f32({1, 2, 3, -1, 0, 4}, {2, 3});
  Tensor want = run_once(x);  // the first run also fills per-thread scratch buffers, kept after it
  int64_t before = host_allocations();
  run_once(x);
  int64_t count = host_allocations() - before;
  ASSERT_GT(count, 3);
  for (int64_t n = 1; n <= count; n++) {
    fail_host_allocation(n);
    try {
      run_once(x);
      ADD_FAILURE() << "allocation " << n << " of " << count << " was made to fail but the run succeeded";
    } catch (const OutOfMemory& e) {
      EXPECT_NE(std::string(e.what()).find("out of host memory allocating"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "allocation " << n << ": not an OutOfMemory: " << e.what();
    }
    fail_host_allocation(0);
    expect_close(run_once(x), want, 0, 0);
  }
}

TEST(OutOfMemory, ContextAddedOnTheWayUpKeepsTheKind) {
  try {
    try {
      throw OutOfMemory("out of host memory allocating 8 bytes");
    } catch (const Error& e) {
      rethrow_as(e, cat("node 'n' (Relu): ", e.what()));
    }
  } catch (const OutOfMemory& e) {
    EXPECT_STREQ(e.what(), "node 'n' (Relu): out of host memory allocating 8 bytes");
  }
  EXPECT_THROW(rethrow_as(Unsupported("x"), "y"), Unsupported);
  try {
    rethrow_as(Error("x"), "y");
  } catch (const Error& e) {
    EXPECT_EQ(dynamic_cast<const Unsupported*>(&e), nullptr);
    EXPECT_EQ(dynamic_cast<const OutOfMemory*>(&e), nullptr);
  }
}

}  // namespace
}  // namespace vlrt::test

// The CUDA backend through the backend registry: where it is built but no device is present
// (no driver, as on machines without a GPU) it says why, and a plan asking for it fails naming
// the device; where a device is present its products match the CPU's.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "cli_util.h"
#include "exec/session.h"
#include "op_test_util.h"

namespace vlrt::test {
namespace {

const BackendInfo* cuda() { return find_backend("cuda"); }

TEST(CudaBackend, WithoutADeviceSaysWhyAndRefusesToBeCreated) {
  if (!cuda()) GTEST_SKIP() << "built without the CUDA toolkit";
  std::string why;
  if (cuda()->device_count(&why) > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  std::string err = error_of([] { create_backend(parse_device("cuda:0")); });
  EXPECT_NE(err.find("cuda:0 is not available"), std::string::npos) << err;
  CliResult r = run_cli("run " + source_path("models/tiny/tiny_cnn.onnx") + " --devices cuda:0 -i image=" +
                        source_path("models/tiny/image.npy") + " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cuda:0"), std::string::npos) << r.output;
}

// MatMul (weights, batched, broadcast batch axes, a vector operand) and Gemm (transposes, alpha)
// on cuda:0 against the CPU's reference kernels.
TEST(CudaBackend, ProductsMatchTheCpu) {
  if (!cuda()) GTEST_SKIP() << "built without the CUDA toolkit";
  if (cuda()->device_count(nullptr) == 0) GTEST_SKIP() << "no CUDA device here";
  struct Case {
    std::string op;
    std::vector<Tensor> in;
    std::map<std::string, Attribute> attrs;
  };
  std::vector<Case> cases = {
      {"MatMul", {random_uniform({2, 3, 19}, 1), random_uniform({19, 21}, 2)}, {}},
      {"MatMul", {random_uniform({4, 5, 7}, 3), random_uniform({4, 7, 9}, 4)}, {}},
      {"MatMul", {random_uniform({2, 1, 5, 7}, 5), random_uniform({3, 7, 6}, 6)}, {}},
      {"MatMul", {random_uniform({7}, 7), random_uniform({7, 4}, 8)}, {}},
      {"Gemm", {random_uniform({5, 19}, 9), random_uniform({23, 19}, 10)}, {{"transB", attr_i(1)}, {"alpha", attr_f(0.5f)}}},
      {"Gemm", {random_uniform({19, 5}, 11), random_uniform({19, 23}, 12)}, {{"transA", attr_i(1)}}},
  };
  CpuBackend cpu(0, test_pool());
  cpu.set_reference_kernels(true);
  for (auto& c : cases) {
    SCOPED_TRACE(c.op);
    Node n = make_node(c.op, c.in.size(), 1, c.attrs);
    std::vector<const Tensor*> ptrs;
    TensorMap feeds;
    std::map<std::string, std::pair<DType, Shape>> signature;
    for (size_t i = 0; i < c.in.size(); i++) {
      ptrs.push_back(&c.in[i]);
      feeds[n.inputs[i]] = c.in[i];
      signature[n.inputs[i]] = {c.in[i].dtype(), c.in[i].shape()};
    }
    Tensor want = run_node(cpu, n, 17, ptrs)[0];
    SessionOptions o;
    o.plan.devices = {parse_device("cuda:0")};
    Session s(one_node_model(n, 17, c.in), o);
    expect_close(s.run(feeds).at(n.outputs[0]), want, 1e-4, 1e-4);
    EXPECT_TRUE(s.plan(signature).fallbacks.empty());
  }
}

}  // namespace
}  // namespace vlrt::test

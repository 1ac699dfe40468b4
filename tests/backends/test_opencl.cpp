// The OpenCL backend end to end: a model through Session on opencl:0 with the CPU as
// fallback, the reasons the planner shows for nodes it cannot take, and the error
// for a device that does not exist. Skipped where no OpenCL device is available.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "cli_util.h"
#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "op_test_util.h"
#include "session_util.h"

namespace vlrt {

namespace {

// nullptr (the test skips) when this machine has no OpenCL device.
std::shared_ptr<Backend> opencl_or_skip(std::string* reason) {
  try {
    return create_backend(parse_device("opencl:0"), 1);
  } catch (const Error& e) {
    *reason = e.what();
    return nullptr;
  }
}


}  // namespace

TEST(OpenCL, TinyCnnMatchesCpu) {
  std::string reason;
  if (!opencl_or_skip(&reason)) GTEST_SKIP() << "no OpenCL device: " << reason;
  const std::string model = test::source_path("models/tiny/tiny_cnn.onnx");
  Tensor one = read_npy(test::source_path("models/tiny/image.npy"));
  // Batch 3: the same image three times, scaled, so the batches differ.
  Tensor image(DType::f32, {3, 3, 32, 32});
  for (int64_t b = 0; b < 3; b++)
    for (int64_t i = 0; i < one.numel(); i++)
      image.data<float>()[b * one.numel() + i] = one.data<float>()[i] * float(b + 1);
  TensorMap in{{"image", image}};

  Session cpu(load_onnx(model), test::on_devices("cpu"));
  Tensor expected = cpu.run(in).at("probs");

  Session gpu(load_onnx(model), test::on_devices("opencl:0,cpu"));
  const Plan& plan = gpu.plan(signature_of(in));
  EXPECT_GT(plan.device_plan(parse_device("opencl:0")).nodes, 0u);
  for (auto& f : plan.fallbacks)
    std::cout << "  fallback: " << f.node << " (" << f.op_type << "): " << f.reason << "\n";
  size_t before = gpu.executor().transfers_executed();
  Tensor got = gpu.run(in).at("probs");
  EXPECT_EQ(gpu.executor().transfers_executed() - before, plan.transfers.size());
  EXPECT_GE(plan.transfers.size(), 2u);  // the image in, the probabilities out

  ASSERT_EQ(got.shape(), expected.shape());
  double scale = 1;
  for (int64_t i = 0; i < expected.numel(); i++)
    scale = std::max(scale, double(std::abs(expected.data<float>()[i])));
  for (int64_t i = 0; i < got.numel(); i++)
    EXPECT_NEAR(got.data<float>()[i], expected.data<float>()[i], 1e-4 * scale) << "at " << i;

  // A second run reuses the arena and the compiled kernels and gives the same answer.
  Tensor again = gpu.run(in).at("probs");
  for (int64_t i = 0; i < got.numel(); i++) EXPECT_EQ(again.data<float>()[i], got.data<float>()[i]);
}

TEST(OpenCL, UnsupportedNodesSayWhy) {
  std::string reason;
  auto b = opencl_or_skip(&reason);
  if (!b) GTEST_SKIP() << "no OpenCL device: " << reason;
  std::string why;
  EXPECT_FALSE(b->supports(test::make_node("TopK", 2, 2), {DType::f32, DType::i64}, &why));
  EXPECT_EQ(why, "no OpenCL kernel for TopK");
  EXPECT_FALSE(b->supports(test::make_node("MatMul", 2, 1), {DType::i64, DType::i64}, &why));
  EXPECT_EQ(why, "OpenCL MatMul supports float32 only, input 0 is int64");
  EXPECT_TRUE(b->supports(test::make_node("Gather", 2, 1), {DType::i64, DType::i64}, &why));
  EXPECT_TRUE(b->supports(test::make_node("Reshape", 2, 1), {DType::f32, DType::i64}, &why));  // a view
}

TEST(OpenCL, MissingDeviceIsAClearError) {
  try {
    create_backend(parse_device("opencl:99"), 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    // Either this build has no OpenCL backend, or the device does not exist.
    bool no_backend = msg.find("no OpenCL backend") != std::string::npos;
    EXPECT_TRUE(no_backend || msg.find("no OpenCL device 99") != std::string::npos) << msg;
    if (!no_backend) {
      EXPECT_NE(msg.find("--devices cpu"), std::string::npos) << msg;
    }
  }
}

}  // namespace vlrt

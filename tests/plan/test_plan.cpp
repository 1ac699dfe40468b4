// Placement, transfers, arenas and batch sizing, on the CPU and a simulated second
// CPU device (cpu:1) with its own arena.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "cli_util.h"
#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "session_util.h"

namespace vlrt {

namespace {

using test::on_devices;

const std::string kTiny = test::source_path("models/tiny/tiny_cnn.onnx");

Tensor image(int64_t batch) {
  Tensor one = read_npy(test::source_path("models/tiny/image.npy"));
  Tensor t(DType::f32, {batch, 3, 32, 32});
  for (int64_t b = 0; b < batch; b++)
    std::memcpy(t.data<float>() + b * one.numel(), one.data<float>(), one.nbytes());
  return t;
}


}  // namespace

TEST(Plan, ArenaHighWaterEqualsPlannedPeak) {
  Session s(load_onnx(kTiny), on_devices("cpu"));
  for (int64_t batch : {1, 2, 4}) {
    TensorMap in{{"image", image(batch)}};
    const Plan& p = s.plan(signature_of(in));
    s.executor().reset_high_water();
    s.run(in);
    size_t planned = p.device_plan(Device{}).peak_activation_bytes;
    EXPECT_GT(planned, 0u);
    EXPECT_EQ(s.executor().arena_high_water(Device{}), planned) << "batch " << batch;
  }
}

TEST(Plan, ArenaReusesMemoryOfDeadValues) {
  Session s(load_onnx(kTiny), on_devices("cpu"));
  TensorMap in{{"image", image(1)}};
  const Plan& p = s.plan(signature_of(in));
  size_t sum = 0;
  for (auto& slot : p.slots)
    if (!slot.dynamic && !slot.constant && !slot.input && slot.alias_of < 0) sum += slot.bytes;
  EXPECT_LT(p.device_plan(Device{}).peak_activation_bytes, sum);
  // Relu runs in place: its output shares the Conv output's memory.
  EXPECT_EQ(p.slots[size_t(p.slot("r1", Device{}))].alias_of, p.slot("c1", Device{}));
}

TEST(Plan, SplitAcrossDevicesMatchesSingleDevice) {
  TensorMap in{{"image", image(2)}};
  Session one(load_onnx(kTiny), on_devices("cpu"));
  Tensor expected = one.run(in).at("probs");

  // The cap holds the first layers only, so the rest must go to cpu:1.
  Session split(load_onnx(kTiny), on_devices("cpu,cpu:1", {{"cpu", 70 * 1024}}));
  const Plan& p = split.plan(signature_of(in));
  const DevicePlan& d0 = p.device_plan(Device{});
  const DevicePlan& d1 = p.device_plan(parse_device("cpu:1"));
  EXPECT_GT(d0.nodes, 0u);
  EXPECT_GT(d1.nodes, 0u);
  EXPECT_LE(d0.weight_bytes + d0.peak_activation_bytes, 70u * 1024);
  EXPECT_FALSE(p.transfers.empty());
  EXPECT_FALSE(p.fallbacks.empty());

  size_t before = split.executor().transfers_executed();
  Tensor got = split.run(in).at("probs");
  EXPECT_EQ(split.executor().transfers_executed() - before, p.transfers.size());
  ASSERT_EQ(got.shape(), expected.shape());
  for (int64_t i = 0; i < got.numel(); i++) EXPECT_NEAR(got.data<float>()[i], expected.data<float>()[i], 1e-6);
}

TEST(Plan, OneCopyPerDestination) {
  TensorMap in{{"image", image(1)}};
  Session s(load_onnx(kTiny), on_devices("cpu:1,cpu"));
  const Plan& p = s.plan(signature_of(in));
  std::set<std::string> seen;
  for (auto& t : p.transfers) EXPECT_TRUE(seen.insert(t.value + ">" + t.to.str()).second) << t.value;
  // Input in from the host, output back to it.
  ASSERT_EQ(p.transfers.size(), 2u);
  EXPECT_EQ(p.transfers[0].value, "image");
  EXPECT_EQ(p.transfers[1].value, "probs");
}

TEST(Plan, TooSmallCapIsAClearError) {
  TensorMap in{{"image", image(1)}};
  Session s(load_onnx(kTiny), on_devices("cpu", {{"cpu", 1024}}));
  try {
    s.plan(signature_of(in));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("does not fit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  }
}

TEST(Plan, MaxBatchIsLargestBatchThatFits) {
  TensorMap in{{"image", image(1)}};
  size_t budget = 300 * 1024;
  Session s(load_onnx(kTiny), on_devices("cpu", {{"cpu", budget}}));
  BatchSizing b = s.size_batches(signature_of(in), 64);
  EXPECT_EQ(b.symbol, "batch");
  ASSERT_GT(b.max_batch, 1);
  auto total = [&](int64_t batch) {
    const DevicePlan& dp = s.plan(signature_of({{"image", image(batch)}})).device_plan(Device{});
    return dp.weight_bytes + dp.peak_activation_bytes;
  };
  EXPECT_LE(total(b.max_batch), budget);
  EXPECT_THROW(total(b.max_batch + 1), Error);  // does not fit the cap
}

TEST(Plan, KernelFedTensorFromAnotherDeviceIsCaught) {
  TensorMap in{{"image", image(1)}};
  Model model = load_onnx(kTiny);
  Session s(model, on_devices("cpu"));
  Plan broken = s.plan(signature_of(in));
  // Move the first node to cpu:1 without the transfer the planner would insert.
  for (auto& step : broken.steps)
    if (step.kind == Step::Kind::run) {
      step.device = parse_device("cpu:1");
      break;
    }
  Executor ex(s.model(), 1, kDefaultMaxLoopIterations);
  try {
    ex.run(broken, ex.prepare(s.infer(signature_of(in)), broken), in);
    FAIL() << "expected the device check to fail";
  } catch (const Error& e) {
    std::string msg = e.what();
    // The node is a FusedConv with fusion on, the Conv itself on the reference path.
    EXPECT_NE(msg.find("node 'conv1' ("), std::string::npos) << msg;
    EXPECT_NE(msg.find(") runs on cpu:1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input 'image'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is on cpu"), std::string::npos) << msg;
  }
}

TEST(Plan, ParsesDevicesAndSizes) {
  EXPECT_EQ(parse_device("opencl:0").str(), "opencl:0");
  EXPECT_EQ(parse_device("cpu").str(), "cpu");
  EXPECT_EQ(parse_device("cpu:1").str(), "cpu:1");
  EXPECT_THROW(parse_device("tpu:0"), Error);  // no backend of that kind
  EXPECT_THROW(parse_device("opencl:x"), Error);
  EXPECT_EQ(parse_bytes("2GiB"), size_t(2) << 30);
  EXPECT_EQ(parse_bytes("512MB"), size_t(512000000));
  EXPECT_EQ(parse_memory_cap("opencl:0=1KiB").second, 1024u);
  EXPECT_THROW(parse_bytes("lots"), Error);
  EXPECT_THROW(parse_bytes("3XB"), Error);
}

}  // namespace vlrt

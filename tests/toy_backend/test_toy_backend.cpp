// The toy backend (this folder) registered from here alone: it takes the Relu and Gemm
// nodes of the tiny CNN, the CPU the rest, with planned transfers between them and a
// Gemm whose packed weights live in prepared state.
#include <gtest/gtest.h>

#include <cmath>

#include "cli_util.h"
#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "session_util.h"

namespace vlrt {

namespace {

const std::string kTiny = test::source_path("models/tiny/tiny_cnn.onnx");


TEST(ToyBackend, RegistersItsDeviceKind) {
  ASSERT_NE(find_backend("toy"), nullptr);
  EXPECT_EQ(parse_device("toy:0").str(), "toy:0");
  auto kinds = built_backends();
  EXPECT_EQ(kinds.front(), "cpu");
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "toy"), kinds.end());
}

TEST(ToyBackend, RunsItsNodesBesideTheCpu) {
  TensorMap in{{"image", read_npy(test::source_path("models/tiny/image.npy"))}};
  Session cpu(load_onnx(kTiny), test::on_devices("cpu"));
  Session mixed(load_onnx(kTiny), test::on_devices("toy:0,cpu"));
  const Plan& p = mixed.plan(signature_of(in));
  Device toy = parse_device("toy:0");
  const DevicePlan& dp = p.device_plan(toy);
  EXPECT_EQ(dp.nodes, 3u);  // two Relu and the Gemm
  EXPECT_EQ(dp.ops.at("Relu"), 2);
  EXPECT_EQ(dp.ops.at("Gemm"), 1);
  EXPECT_GT(p.transfers.size(), 2u);
  // The Gemm's B [16,10] lives in prepared state only; its bias is the toy's one weight.
  EXPECT_EQ(dp.prepared_bytes, 16u * 10 * sizeof(float));
  EXPECT_EQ(dp.weight_bytes, 256u);
  EXPECT_EQ(dp.peak_activation_bytes % 256, 0u);
  for (auto& f : p.fallbacks) EXPECT_FALSE(f.op_type == "Relu" || f.op_type == "Gemm") << f.node;

  size_t before = mixed.executor().transfers_executed();
  Tensor want = cpu.run(in).at("probs"), got = mixed.run(in).at("probs");
  EXPECT_EQ(mixed.executor().transfers_executed() - before, p.transfers.size());
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); i++) EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-6);
  EXPECT_EQ(mixed.executor().arena_high_water(toy), dp.peak_activation_bytes);
}

TEST(ToyBackend, ANodeNoListedDeviceRunsIsNamed) {
  TensorMap in{{"image", read_npy(test::source_path("models/tiny/image.npy"))}};
  Session s(load_onnx(kTiny), test::on_devices("toy:0"));
  try {
    s.plan(signature_of(in));
    FAIL() << "expected the Conv to have no device";
  } catch (const Unsupported& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("(Conv)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("toy:0: toy runs Relu and Gemm only, not Conv"), std::string::npos) << msg;
  }
}

TEST(ToyBackend, PlanCommandShowsItsNodesAndTransfers) {
  auto r = test::run_command(cat(VLRT_TOY_BINARY, " plan ", kTiny, " -i image=1x3x32x32 --devices toy:0,cpu"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("toy:0: 3 nodes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prepared state 640 B"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu -> toy:0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("toy:0 -> cpu"), std::string::npos) << r.output;
}

}  // namespace

}  // namespace vlrt

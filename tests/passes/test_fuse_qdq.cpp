// The QDQ fusion pass on small QDQ models (tools/make_qdq_fusion_vectors.py): the groups onnxruntime
// fuses are fused, the ones it leaves are left, the fused model gives onnxruntime's optimized output
// exactly, and stays within one quantization step of the model run as written.
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "exec/session.h"
#include "io/npy.h"
#include "load/onnx_loader.h"
#include "passes/fuse_qdq.h"

namespace vlrt::test {
namespace {

std::string fixture_dir(const std::string& name) {
  return std::string(VLRT_SOURCE_DIR) + "/tests/fixtures/qdq_fusion/" + name + "/";
}

TensorMap run(const std::string& name, bool fuse, QdqFusionCounts* counts = nullptr) {
  std::string dir = fixture_dir(name);
  Model m = load_onnx(dir + "model.onnx");
  TensorMap inputs;
  for (const ValueDecl& d : m.graph.inputs) inputs[d.name] = read_npy(dir + d.name + ".npy");
  SessionOptions o;
  o.threads = 1;
  o.fuse_qdq = fuse;
  Session s(std::move(m), o);
  if (counts) *counts = s.qdq_fusion();
  return s.run(inputs);
}

// Fuses the fixture's model, checks the rewrites made, and compares its outputs with onnxruntime's
// (exactly for the quantized output y) and with the unfused run (within one step of the output's quantization).
void expect_fused(const std::string& name, const QdqFusionCounts& expected) {
  SCOPED_TRACE(name);
  QdqFusionCounts counts;
  TensorMap fused = run(name, true, &counts), plain = run(name, false);
  EXPECT_EQ(counts, expected) << describe(counts);
  float step = read_npy(fixture_dir(name) + "step.npy").data<float>()[0];
  for (auto& [output, got] : fused) {
    std::vector<double> g = got.to_double_vector(), w = read_npy(fixture_dir(name) + output + ".npy").to_double_vector(),
                        p = plain.at(output).to_double_vector();
    ASSERT_EQ(g.size(), w.size()) << output;
    for (size_t i = 0; i < g.size(); i++) {
      // y comes out of a DequantizeLinear: exact; a float op's output (s) to float rounding.
      if (output == "y") EXPECT_EQ(g[i], w[i]) << output << "[" << i << "]";
      else EXPECT_NEAR(g[i], w[i], 1e-5 * (1 + std::abs(w[i]))) << output << "[" << i << "]";
      EXPECT_LE(std::abs(g[i] - p[i]), step * 1.0001) << output << "[" << i << "]";
    }
  }
}

TEST(FuseQdq, ConvWithPerChannelWeightsAndBias) {
  expect_fused("conv_per_channel_bias", {{"QLinearConv", 1}});
}

TEST(FuseQdq, MatMul) { expect_fused("matmul", {{"QLinearMatMul", 1}}); }

TEST(FuseQdq, Add) { expect_fused("add", {{"QLinearAdd", 1}}); }

TEST(FuseQdq, ReshapeBetweenQuantizedOpsRunsOnUint8) {
  expect_fused("reshape_between", {{"QLinearConv", 1}, {"QLinearMatMul", 1}, {"uint8 Reshape", 1}});
}

// As in onnxruntime, a DequantizeLinear with a float reader besides the Conv joins the Conv's group
// and stays for the other reader.
TEST(FuseQdq, DequantizeReadTwiceFusesAndStays) { expect_fused("dq_read_twice", {{"QLinearConv", 1}}); }

TEST(FuseQdq, OpOutputWithAFloatReaderIsNotFused) { expect_fused("conv_output_read_twice", {}); }

TEST(FuseQdq, ComputedScaleIsNotFused) { expect_fused("computed_scale", {}); }

TEST(FuseQdq, ReferenceKernelsSwitchTurnsItOff) {
  setenv("VLRT_REFERENCE_KERNELS", "1", 1);
  QdqFusionCounts counts;
  run("conv_per_channel_bias", true, &counts);
  unsetenv("VLRT_REFERENCE_KERNELS");
  EXPECT_TRUE(counts.empty()) << describe(counts);
}

}  // namespace
}  // namespace vlrt::test

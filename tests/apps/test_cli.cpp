// End-to-end tests of the vlrt program: success paths and every bad-input path
// must give a clear message and a non-zero exit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/npy.h"

namespace vlrt {

using test::run_cli;
using test::run_command;
using test::temp_dir;
using test::source_path;

namespace {
const std::string kTiny = source_path("models/tiny/tiny_cnn.onnx");
const std::string kImage = source_path("models/tiny/image.npy");
}  // namespace

TEST(Cli, InfoShowsInputsOpsAndParameters) {
  auto r = run_cli("info " + kTiny);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("image: float32[batch,3,32,32]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Conv"), std::string::npos);
  EXPECT_NE(r.output.find("parameters: 1562"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unsupported ops: none"), std::string::npos) << r.output;
}

TEST(Cli, RunMatchesOnnxRuntime) {
  std::string dir = test::temp_dir("cli_run");
  auto r = run_cli("run " + kTiny + " --input image=" + kImage + " --output-dir " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Tensor probs = read_npy(dir + "/probs.npy");
  Tensor expected = read_npy(source_path("models/tiny/expected_probs.npy"));
  ASSERT_EQ(probs.shape(), expected.shape());
  for (int64_t i = 0; i < probs.numel(); i++)
    EXPECT_NEAR(probs.data<float>()[i], expected.data<float>()[i], 1e-5);
}

TEST(Cli, RunBadInputsAreClearErrors) {
  std::string dir = test::temp_dir("cli_bad");
  auto missing = run_cli("run " + kTiny);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("missing input 'image' (expected float32[batch,3,32,32])"), std::string::npos)
      << missing.output;

  auto extra = run_cli("run " + kTiny + " --input image=" + kImage + " --input mask=" + kImage);
  EXPECT_NE(extra.exit_code, 0);
  EXPECT_NE(extra.output.find("unknown input 'mask'"), std::string::npos) << extra.output;

  write_npy(dir + "/wrong.npy", Tensor::zeros(DType::f32, {1, 3, 31, 32}));
  auto shape = run_cli("run " + kTiny + " --input image=" + dir + "/wrong.npy");
  EXPECT_NE(shape.exit_code, 0);
  EXPECT_NE(shape.output.find("axis 2 must be 32"), std::string::npos) << shape.output;

  write_npy(dir + "/int.npy", Tensor::zeros(DType::i64, {1, 3, 32, 32}));
  auto dtype = run_cli("run " + kTiny + " --input image=" + dir + "/int.npy");
  EXPECT_NE(dtype.exit_code, 0);
  EXPECT_NE(dtype.output.find("is int64[1,3,32,32] but the model expects float32"), std::string::npos)
      << dtype.output;

  auto nofile = run_cli("run /nonexistent.onnx");
  EXPECT_NE(nofile.exit_code, 0);
  EXPECT_NE(nofile.output.find("no such file"), std::string::npos) << nofile.output;
}

// --precision bf16: Conv and Gemm multiply in bfloat16 (the same probabilities within its error);
// `vlrt plan` names the bfloat16 kernels; where there are none (a CPU without AVX512-BF16, or
// the reference kernels as here) a warning says so and the run is float32's; a bad value and a
// device list without a CPU are errors.
TEST(Cli, PrecisionBf16RunsTheProductsInBfloat16) {
  std::string dir = test::temp_dir("cli_bf16");
  Tensor expected = read_npy(source_path("models/tiny/expected_probs.npy"));
  auto r = run_cli("run " + kTiny + " --precision bf16 --input image=" + kImage + " --output-dir " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Tensor probs = read_npy(dir + "/probs.npy");
  ASSERT_EQ(probs.shape(), expected.shape());
  for (int64_t i = 0; i < probs.numel(); i++)
    EXPECT_NEAR(probs.data<float>()[i], expected.data<float>()[i], 2e-2);

  auto plan = run_cli("plan " + kTiny + " --precision bf16 --input image=1x3x32x32");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  bool warned =
      plan.output.find("warning: --precision bf16: this CPU has no bfloat16 kernels") != std::string::npos;
  EXPECT_NE(warned, plan.output.find("oneDNN bf16 conv") != std::string::npos) << plan.output;

  auto reference = run_command("VLRT_REFERENCE_KERNELS=1 " + std::string(VLRT_BINARY) + " run " + kTiny +
                               " --precision bf16 --input image=" + kImage + " --output-dir " + dir);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  EXPECT_NE(reference.output.find("warning: --precision bf16: this CPU has no bfloat16 kernels (they need "
                                  "AVX512-BF16), or VLRT_REFERENCE_KERNELS is set; Conv, MatMul and Gemm "
                                  "compute in float32"),
            std::string::npos)
      << reference.output;
  probs = read_npy(dir + "/probs.npy");
  for (int64_t i = 0; i < probs.numel(); i++)
    EXPECT_NEAR(probs.data<float>()[i], expected.data<float>()[i], 1e-5);

  auto bad = run_cli("run " + kTiny + " --precision fp64 --input image=" + kImage);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("fp64 not in {fp32,bf16}"), std::string::npos) << bad.output;
  auto no_cpu = run_cli("run " + kTiny + " --precision bf16 --devices opencl:0 --input image=" + kImage);
  EXPECT_NE(no_cpu.exit_code, 0);
  EXPECT_NE(no_cpu.output.find("--precision bf16 chooses the CPU's kernels; --devices opencl:0 lists no cpu"),
            std::string::npos)
      << no_cpu.output;
}

TEST(Cli, UnknownOpIsNamed) {
  // A model with one node of an op vlrt does not know.
  std::string dir = test::temp_dir("cli_unknown_op");
  std::string path = dir + "/m.onnx";
  // Hand-encoded ModelProto: ir_version 8, opset 17, graph { node { input "x" output "y" name "n0"
  // op_type "FancyOp" } input x float[1] output y float[1] }.
  const unsigned char bytes[] = {
      0x08, 0x08, 0x42, 0x02, 0x10, 0x11, 0x3a, 0x39, 0x0a, 0x15, 0x0a, 0x01, 'x',  0x12, 0x01, 'y',  0x1a,
      0x02, 'n',  '0',  0x22, 0x07, 'F',  'a',  'n',  'c',  'y',  'O',  'p',  0x2a, 0x00, 0x5a, 0x0f, 0x0a,
      0x01, 'x',  0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x01, 0x62, 0x0f, 0x0a,
      0x01, 'y',  0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x01};
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes), sizeof bytes);
  auto info = run_cli("info " + path);
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("unsupported ops: FancyOp (1 nodes)"), std::string::npos) << info.output;
  write_npy(dir + "/x.npy", Tensor::zeros(DType::f32, {1}));
  auto run = run_cli("run " + path + " --input x=" + dir + "/x.npy");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("node 'n0' (FancyOp): operator 'FancyOp' (opset 17) is not implemented"),
            std::string::npos)
      << run.output;
}

TEST(Cli, BenchPrintsJson) {
  auto r = run_cli("bench " + kTiny + " --input image=2x3x32x32 --runs 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (auto key : {"\"min_ms\"", "\"median_ms\"", "\"p90_ms\"", "\"peak_rss_bytes\""})
    EXPECT_NE(r.output.find(key), std::string::npos) << r.output;
  auto need_shape = run_cli("bench " + kTiny);
  EXPECT_NE(need_shape.exit_code, 0);
  EXPECT_NE(need_shape.output.find("--input image="), std::string::npos) << need_shape.output;
}

TEST(Cli, BenchOnGivenValuesAnswersRoundsFromStdin) {
  std::string dir = temp_dir("bench_rounds");
  write_npy(dir + "/image.npy", Tensor::zeros(DType::f32, {2, 3, 32, 32}));
  auto r = run_command("printf '3\\n1\\n' | " + std::string(VLRT_BINARY) + " bench " + kTiny + " --values image=" + dir +
                       "/image.npy --warmup 0 --rounds-stdin");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // One line per round with that many times, then the peak RSS.
  EXPECT_NE(r.output.find("{\"ms\":[") , std::string::npos) << r.output;
  const size_t first = r.output.find('\n'), second = r.output.find('\n', first + 1);
  ASSERT_NE(second, std::string::npos) << r.output;
  auto commas = [](const std::string& s) { return std::count(s.begin(), s.end(), ','); };
  EXPECT_EQ(commas(r.output.substr(0, first)), 2) << r.output;
  EXPECT_EQ(commas(r.output.substr(first + 1, second - first - 1)), 0) << r.output;
  EXPECT_NE(r.output.find("{\"peak_rss_bytes\":", second), std::string::npos) << r.output;
  auto bad = run_command("echo 0 | " + std::string(VLRT_BINARY) + " bench " + kTiny +
                         " --input image=1x3x32x32 --warmup 0 --rounds-stdin");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("a round needs at least one run"), std::string::npos) << bad.output;
}

TEST(Cli, BadCpuBackendSwitchesNameTheVariableAndTheValues) {
  std::string run = std::string(VLRT_BINARY) + " run " + kTiny + " --input image=" + kImage;
  auto isa = run_command("VLRT_CPU_ISA=bogus " + run);
  EXPECT_NE(isa.exit_code, 0);
  EXPECT_NE(isa.output.find("VLRT_CPU_ISA=bogus is not a CPU instruction set level: use plain, avx2 or avx512"),
            std::string::npos)
      << isa.output;
  auto layout = run_command("VLRT_ONEDNN_CONV_LAYOUT=nchw16 " + run);
  EXPECT_NE(layout.exit_code, 0);
  EXPECT_NE(layout.output.find("VLRT_ONEDNN_CONV_LAYOUT=nchw16 is not a convolution layout: use plain, nhwc or "
                               "blocked"),
            std::string::npos)
      << layout.output;
  EXPECT_EQ(run_command("VLRT_ONEDNN_CONV_LAYOUT=nhwc " + run).exit_code, 0);
}

TEST(Cli, BenchProfileListsTheOpTypesThatRunKernels) {
  auto r = run_cli("bench " + kTiny + " --input image=1x3x32x32 --runs 2 --profile");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kernel time per run by op type"), std::string::npos) << r.output;
  // Flatten, a view of its input, runs no kernel; Conv+Relu run as one FusedConv.
  for (const char* op : {"FusedConv", "MaxPool", "GlobalAveragePool", "Gemm", "Softmax"})
    EXPECT_NE(r.output.find(std::string("    ") + op + " "), std::string::npos) << op << "\n" << r.output;
  // Then the slowest nodes, by name: six nodes run kernels, each once per run.
  EXPECT_NE(r.output.find("the 6 slowest of 6 nodes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node 'conv2' (com.microsoft.FusedConv)"), std::string::npos) << r.output;

  // In JSON every node is listed, slowest first, and their times add up to the op types' times.
  auto j = run_cli("bench " + kTiny + " --input image=1x3x32x32 --runs 2 --profile --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  auto doc = nlohmann::json::parse(j.output);
  double by_op = 0, by_node = 0, previous = 1e30;
  for (auto& [op, p] : doc["profile"].items()) by_op += p["ms_per_run"].get<double>();
  ASSERT_EQ(doc["node_profile"].size(), 6u) << j.output;
  for (auto& n : doc["node_profile"]) {
    double ms = n["ms_per_run"].get<double>();
    EXPECT_LE(ms, previous);
    EXPECT_EQ(n["node"].get<std::string>().rfind("node '", 0), 0u) << n;
    previous = ms;
    by_node += ms;
  }
  EXPECT_NEAR(by_node, by_op, 1e-9 + 1e-9 * by_op);
}

}  // namespace vlrt

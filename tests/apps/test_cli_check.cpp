// `vlrt check` end to end: the table, the first node out of tolerance, --json, the exit codes
// (0 within tolerance, 1 out of it, 2 usage or model errors) and each bad-input message.
// Models: tools/make_check_models.py.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/npy.h"

namespace vlrt {

using test::run_cli;

namespace {

std::string fixture(const std::string& name) {
  return test::source_path("tests/fixtures/check/" + name + ".onnx");
}

bool has(const test::CliResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

}  // namespace

TEST(CliCheck, IdenticalModelsExitZero) {
  auto r = run_cli("check " + fixture("base") + " " + fixture("base") + " -t 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "fusion off")) << r.output;
  EXPECT_TRUE(has(r, "compared 6 values, 0 out of tolerance")) << r.output;
  EXPECT_TRUE(has(r, "first out of tolerance: none")) << r.output;
}

TEST(CliCheck, PlantedFaultIsNamedAndWrittenAsJson) {
  std::string dir = test::temp_dir("cli_check");
  auto r =
      run_cli("check " + fixture("base") + " " + fixture("shift_fault") + " -t 1 --json " + dir + "/c.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "first out of tolerance: #4 node 'add' (Add) output 'add_out': OVER")) << r.output;
  std::ifstream f(dir + "/c.json");
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["first_over"]["node"], "add");
  ASSERT_EQ(j["rows"].size(), 6u);
  EXPECT_EQ(j["rows"][0]["max_abs"], 0.0);
  EXPECT_NEAR(j["rows"][3]["max_abs"].get<double>(), 0.5, 1e-6);
  EXPECT_EQ(j["worst"].size(), 6u);
}

TEST(CliCheck, ShapeMismatchIsARow) {
  auto r = run_cli("check " + fixture("base") + " " + fixture("shift_shape") + " -t 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "shape:[1,4,8,8]/[2,4,8,8]")) << r.output;
}

TEST(CliCheck, GivenInputIsUsed) {
  std::string dir = test::temp_dir("cli_check_input");
  write_npy(dir + "/x.npy", Tensor::zeros(DType::f32, {1, 4, 8, 8}));
  auto r = run_cli("check " + fixture("base") + " " + fixture("base") + " -t 1 --input x=" + dir + "/x.npy");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "inputs: 1 given, 0 random")) << r.output;
}

TEST(CliCheck, BadInputsExitTwoWithAMessage) {
  const std::string base = fixture("base");
  struct Case {
    std::string args, message;
  } cases[] = {
      {fixture("renamed") + " " + base, "no node output names in common"},
      {base + " " + fixture("other_input"), "the models take different inputs ('x' is float32[1,4,8,8]"},
      {base + " --devices cpu,gpu:0", "unknown device 'gpu:0'"},
      {base + " --devices cpu", "one model is compared across two devices"},
      {base + " " + base + " --devices cpu,cpu:1,cpu:2", "one device for both sides or one for each"},
      {base + " --precision bf16,bf16", "across two devices or two precisions"},
      {base + " --precision bf16", "give the precisions of A and B, e.g. fp32,bf16"},
      {base + " --precision fp32,bf16 --devices cpu,opencl:0", "is emulated on the CPU"},
      {base + " " + base + " --precision fp8,fp32", "unknown precision 'fp8'"},
      {base + " " + base + " --input y=/nonexistent.npy", "/nonexistent.npy"},
      {"/nonexistent.onnx " + base, "no such file"},
      {base + " " + base + " --atol abc", "--atol"},
      {test::source_path("models/tiny/tiny_cnn.onnx") + " --devices cpu,cpu:1",
       "give its shape with --shape image=1x"},
      {"", "models"},
  };
  for (auto& c : cases) {
    auto r = run_cli("check " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r, c.message)) << c.args << "\n" << r.output;
  }
}

// Half precision drifts from float32 by about its rounding step (bf16 keeps 8 bits of mantissa,
// fp16 11): every value is compared and the first one past a tolerance below that step is named.
TEST(CliCheck, HalfPrecisionDriftIsMeasuredPerNode) {
  std::string dir = test::temp_dir("cli_check_precision");
  auto bf16 = run_cli("check " + fixture("base") + " --precision fp32,bf16 -t 1 --json " + dir + "/p.json");
  EXPECT_EQ(bf16.exit_code, 1) << bf16.output;
  // On a CPU with AVX512-BF16 the products of vlrt run --precision bf16, elsewhere every value rounded.
  EXPECT_TRUE(has(bf16, "B multiplies in bf16 as vlrt run --precision bf16 does") ||
              has(bf16, "B holds its weights and every value a node makes in bf16"))
      << bf16.output;
  EXPECT_TRUE(has(bf16, "on cpu in bf16")) << bf16.output;
  std::ifstream f(dir + "/p.json");
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["b"]["precision"], "bf16");
  ASSERT_EQ(j["rows"].size(), 6u);
  for (auto& row : j["rows"]) {
    EXPECT_GT(row["max_rel"].get<double>(), 0) << row;       // every value was rounded
    EXPECT_LT(row["max_rel"].get<double>(), 0.05) << row;    // by about bf16's step
  }
  auto fp16 = run_cli("check " + fixture("base") + " --precision fp32,fp16 -t 1 --rtol 0.01");
  EXPECT_EQ(fp16.exit_code, 0) << fp16.output;  // fp16's step (2^-11) is within 1%
  EXPECT_TRUE(has(fp16, "compared 6 values, 0 out of tolerance")) << fp16.output;
}

TEST(CliCheck, HelpDefinesTheErrorsAndTheExitCodes) {
  auto r = run_cli("check --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "max rel = max abs / max |a|")) << r.output;
  EXPECT_TRUE(has(r, "fusion off")) << r.output;
  EXPECT_TRUE(has(r, "Exit code: 0")) << r.output;
}

}  // namespace vlrt

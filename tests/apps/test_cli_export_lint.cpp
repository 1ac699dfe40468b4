// `vlrt info`'s export-lint warning and `vlrt check-dynamic` on the baked and clean exports.
#include <gtest/gtest.h>

#include "cli_util.h"

namespace vlrt {

namespace {

using test::run_cli;
using test::source_path;

const std::string kBaked = source_path("tests/fixtures/export_lint/baked_batch.onnx");
const std::string kClean = source_path("tests/fixtures/export_lint/clean.onnx");

TEST(CliExportLint, InfoWarnsAboutTheBakedBatch) {
  auto r = run_cli("info " + kBaked);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: baked size: node '/Reshape' (Reshape)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'/Constant_output_0'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dynamic_axes"), std::string::npos) << r.output;
}

TEST(CliExportLint, InfoSaysNothingIsBakedInTheCleanExport) {
  auto r = run_cli("info " + kClean);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("export lint: no baked sizes"), std::string::npos) << r.output;
}

TEST(CliCheckDynamic, BakedBatchDiffers) {
  auto r = run_cli("check-dynamic " + kBaked + " -t 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("y: DIFFERS"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 1 outputs differ at the first axis = 2: y"), std::string::npos) << r.output;
}

TEST(CliCheckDynamic, CleanExportAgrees) {
  auto r = run_cli("check-dynamic " + kClean + " --dim batch=1,3 -t 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("y: same"), std::string::npos) << r.output;
}

TEST(CliCheckDynamic, UsageErrorsExitTwo) {
  auto r = run_cli("check-dynamic " + kClean + " --dim batch=2,1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("A < B"), std::string::npos) << r.output;
  r = run_cli("check-dynamic " + kClean + " --dim seq=1,2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no input of the model has 'seq'"), std::string::npos) << r.output;
  r = run_cli("check-dynamic");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace

}  // namespace vlrt

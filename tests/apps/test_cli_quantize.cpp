// vlrt quantize end to end: the written model runs and verifies, and usage errors say what to do.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "io/npy.h"

namespace vlrt {
namespace {

using test::run_cli;

const std::string kTiny = test::source_path("models/tiny/tiny_cnn.onnx");
const std::string kImage = test::source_path("models/tiny/image.npy");

TEST(CliQuantize, Int8ModelRunsAndVerifies) {
  std::string dir = test::temp_dir("cli_quantize_int8");
  std::string out = dir + "/tiny_int8.onnx";
  auto q = run_cli("quantize " + kTiny + " --out " + out + " --int8 dynamic --min-elements 1");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_NE(q.output.find("  Conv: 2\n"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("wrote " + out), std::string::npos) << q.output;
  EXPECT_TRUE(std::filesystem::exists(out + ".manifest.json"));
  auto v = run_cli("verify " + out);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  auto r = run_cli("run " + out + " --input image=" + kImage + " --output-dir " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto again = run_cli("quantize " + out + " --out " + dir + "/twice.onnx --int8 dynamic");
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("already quantized"), std::string::npos) << again.output;
}

TEST(CliQuantize, HalfModelRuns) {
  std::string dir = test::temp_dir("cli_quantize_fp16");
  std::string out = dir + "/tiny_fp16.onnx";
  auto q = run_cli("quantize " + kTiny + " --out " + out + " --fp16");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_NE(q.output.find("weights: "), std::string::npos) << q.output;
  auto r = run_cli("run " + out + " --input image=" + kImage + " --output-dir " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(CliQuantize, UsageErrorsSayWhatToDo) {
  std::string dir = test::temp_dir("cli_quantize_errors");
  auto none = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("give one of --int8 dynamic, --fp16, --bf16"), std::string::npos) << none.output;
  auto bad = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx --fp16 --exclude no_such_node");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("'no_such_node' matches no node name"), std::string::npos) << bad.output;
  auto self = run_cli("quantize " + kTiny + " --out " + kTiny + " --fp16");
  EXPECT_NE(self.exit_code, 0);
  EXPECT_NE(self.output.find("is the model itself"), std::string::npos) << self.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.onnx"));
}

}  // namespace
}  // namespace vlrt

// vlrt quantize end to end: the written model runs and verifies, and usage errors say what to do.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"
#include "io/files.h"
#include "io/npy.h"
#include "vision/image.h"

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

// A folder of `count` small generated images (and a text file, which calibration skips).
std::string calibration_folder(const std::string& name, int count) {
  std::string dir = test::temp_dir(name);
  for (int i = 0; i < count; i++) {
    vision::Image img;
    img.width = 40 + 8 * i;
    img.height = 36;
    img.rgb.resize(size_t(img.width) * img.height * 3);
    for (size_t k = 0; k < img.rgb.size(); k++) img.rgb[k] = uint8_t((k * (7 + i)) % 251);
    write_file_atomically(dir + "/image_" + std::to_string(i) + ".png", vision::encode_png(img));
  }
  write_file_atomically(dir + "/notes.txt", "not an image");
  return dir;
}

TEST(CliQuantize, StaticInt8ModelRunsAndVerifies) {
  std::string images = calibration_folder("cli_quantize_static_images", 3);
  std::string dir = test::temp_dir("cli_quantize_static");
  std::string out = dir + "/tiny_qdq.onnx";
  auto q = run_cli("quantize " + kTiny + " --out " + out + " --int8 static --calibrate " + images +
                   " --min-elements 1");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_NE(q.output.find("calibrating: 3/3 images"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("  Conv: 2\n"), std::string::npos) << q.output;
  EXPECT_EQ(run_cli("verify " + out).exit_code, 0);
  auto r = run_cli("run " + out + " --input image=" + kImage + " --output-dir " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto info = run_cli("info " + out);
  EXPECT_NE(info.output.find("QuantizeLinear"), std::string::npos) << info.output;
}

TEST(CliQuantize, StaticInt8GroundingModelReadsEachImagesPrompt) {
  std::string images = calibration_folder("cli_quantize_static_grounding", 2);
  std::string model = test::source_path("models/demo/model.onnx");
  std::string out = test::temp_dir("cli_quantize_static_grounding_out") + "/demo_qdq.onnx";
  auto no_prompt = run_cli("quantize " + model + " --out " + out + " --int8 static --calibrate " + images);
  EXPECT_NE(no_prompt.exit_code, 0);
  EXPECT_NE(no_prompt.output.find("needs a prompt per image: give --prompt"), std::string::npos) << no_prompt.output;
  write_file_atomically(images + "/image_0.txt", "red circle . blue star .");
  auto one = run_cli("quantize " + model + " --out " + out + " --int8 static --calibrate " + images +
                     " --images 1 --threads 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("calibrating: 1/1 images"), std::string::npos) << one.output;
  auto d = run_cli("detect " + test::source_path("assets/demo.png") + " --model " + out + " --vocab " +
                   test::source_path("models/demo/vocab.txt") + " -p \"black ring .\"");
  EXPECT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("black ring"), std::string::npos) << d.output;
}

TEST(CliQuantize, CalibrationErrorsNameTheFolder) {
  std::string dir = test::temp_dir("cli_quantize_calibration_errors");
  std::string empty = test::temp_dir("cli_quantize_calibration_empty");
  write_file_atomically(empty + "/readme.txt", "no images here");
  auto no_folder = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx --int8 static");
  EXPECT_NE(no_folder.exit_code, 0);
  EXPECT_NE(no_folder.output.find("--int8 static needs --calibrate DIR"), std::string::npos) << no_folder.output;
  auto none = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx --int8 static --calibrate " + empty);
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("holds no images"), std::string::npos) << none.output;
  auto missing = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx --int8 static --calibrate " + dir + "/nope");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("is not a folder"), std::string::npos) << missing.output;
  auto dynamic = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx --int8 dynamic --calibrate " + empty);
  EXPECT_NE(dynamic.exit_code, 0);
  EXPECT_NE(dynamic.output.find("--calibrate goes with --int8 static"), std::string::npos) << dynamic.output;
  auto mode = run_cli("quantize " + kTiny + " --out " + dir + "/x.onnx --int8 weird");
  EXPECT_NE(mode.output.find("the modes are dynamic and static"), std::string::npos) << mode.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.onnx"));
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
  EXPECT_NE(none.output.find("give one of --int8 dynamic, --int8 static --calibrate DIR, --fp16, --bf16"), std::string::npos) << none.output;
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

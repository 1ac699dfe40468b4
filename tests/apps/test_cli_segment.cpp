// vlrt segment end to end on the tiny SAM-contract model folder: the masks segment-anything
// makes (tools/make_tiny_sam.py), the JSON and PNG outputs, and every bad input refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/files.h"
#include "vision/image.h"

namespace vlrt {

using test::run_cli;
using test::source_path;

namespace {

const std::string kModel = source_path("tests/fixtures/sam/tiny");
const std::string kImage = source_path("tests/fixtures/sam/tiny.png");

std::string segment(const std::string& args) {
  return "segment " + kImage + " --model " + kModel + " " + args;
}

}  // namespace

TEST(CliSegment, BoxAndPointPromptsMatchSegmentAnythingAndWriteJsonAndPng) {
  auto want = nlohmann::json::parse(read_file(source_path("tests/fixtures/sam/tiny/expected.json")));
  std::string dir = test::temp_dir("cli_segment");
  auto r = run_cli(segment("--box 2,1,15,11 --json " + dir + "/masks.json --draw " + dir + "/masks.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("23x13 (encoder input 128x72 padded to 128), 1 prompts"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("box 2,1,15,11"), std::string::npos) << r.output;
  auto j = nlohmann::json::parse(read_file(dir + "/masks.json"));
  ASSERT_EQ(j["masks"].size(), 1u);
  auto& m = j["masks"][0];
  auto& w = want["prompts"]["box"];
  EXPECT_EQ(m["mask_index"], w["mask_index"]);
  EXPECT_NEAR(m["iou_prediction"].get<double>(),
              w["iou_predictions"][w["mask_index"].get<int>()].get<double>(), 1e-4);
  EXPECT_EQ(m["area"], w["area"]);
  EXPECT_EQ(m["segmentation"]["size"], nlohmann::json({13, 23}));
  int64_t total = 0, ones = 0;
  auto& counts = m["segmentation"]["counts"];
  for (size_t i = 0; i < counts.size(); i++) {
    total += counts[i].get<int64_t>();
    if (i % 2) ones += counts[i].get<int64_t>();
  }
  EXPECT_EQ(total, 23 * 13);
  EXPECT_EQ(ones, w["area"].get<int64_t>());
  vision::Image drawn = vision::load_image(dir + "/masks.png");
  EXPECT_EQ(drawn.width, 23);
  EXPECT_EQ(drawn.height, 13);

  r = run_cli(segment("--point 6,5 --point 20,3,0"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto& p = want["prompts"]["points"];
  size_t at = r.output.find("2 points");
  ASSERT_NE(at, std::string::npos) << r.output;
  int index = -1;
  double iou = 0;
  long long area = -1;
  ASSERT_EQ(std::sscanf(r.output.c_str() + at + 8, "%d %lf %lld", &index, &iou, &area), 3) << r.output;
  EXPECT_EQ(index, p["mask_index"].get<int>());
  EXPECT_NEAR(iou, p["iou_predictions"][index].get<double>(), 1e-4);
  EXPECT_EQ(area, p["area"].get<long long>());
}

TEST(CliSegment, BadPromptsImagesAndFoldersFailWithAMessage) {
  struct Case {
    std::string args, message;
  };
  std::string dir = test::temp_dir("cli_segment_bad");
  write_file_atomically(dir + "/not_an_image.png", "hello");
  const Case cases[] = {
      {segment("--box 2,1,30,11"), "box 2,1,30,11 is outside the 23x13 image"},
      {segment("--box 15,1,2,11"), "x2 must be greater than x1"},
      {segment("--box 2,1,15"), "box '2,1,15' has 3 numbers; expected x1,y1,x2,y2"},
      {segment("--box 2,1,x,11"), "'x' is not a number"},
      {segment("--point 1,2,7"), "has label 7"},
      {segment(""), "give at least one box"},
      {segment("--box 2,1,15,11 --box 1,1,5,5 --point 3,3"), "points refine the mask of one box"},
      {"segment " + dir + "/not_an_image.png --model " + kModel + " --box 1,1,2,2", "not_an_image.png"},
      {"segment " + kImage + " --model " + dir + " --box 1,1,5,5", "has no encoder 'encoder.onnx'"},
  };
  for (auto& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
}

}  // namespace vlrt

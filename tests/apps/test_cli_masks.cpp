// detect and label with --masks: the shipped demo detector boxes objects in the demo image and
// the tiny SAM-contract model (tools/make_tiny_sam.py) segments each box. Its random weights
// give arbitrary masks, so the tests check structure and agreement with `vlrt segment`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/files.h"
#include "vision/image.h"
#include "vision/mask.h"

namespace vlrt {

using nlohmann::json;
using test::run_cli;
using test::source_path;

namespace {

const std::string kSam = source_path("tests/fixtures/sam/tiny");
const std::string kImage = source_path("assets/demo.png");
const std::string kPrompt = "'yellow heart . black ring .'";

vision::Mask rle_mask(const json& segmentation) {
  return vision::mask_from_rle(segmentation["size"][1], segmentation["size"][0],
                               segmentation["counts"].get<std::vector<int64_t>>());
}

}  // namespace

TEST(MasksCli, DetectJsonHasOneRleMaskPerDetectionAsSegmentGivesForItsBox) {
  std::string dir = test::temp_dir("masks_detect");
  auto r = run_cli("detect " + kImage + " --prompt " + kPrompt + " --masks " + kSam + " --json " + dir +
                   "/d.json --draw " + dir + "/d.png");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mask area"), std::string::npos) << r.output;
  auto j = json::parse(read_file(dir + "/d.json"));
  EXPECT_NE(j["rle"].get<std::string>().find("column-major"), std::string::npos);
  ASSERT_GE(j["detections"].size(), 2u) << j.dump();
  for (auto& d : j["detections"]) {
    ASSERT_TRUE(d.contains("segmentation")) << d.dump();
    EXPECT_EQ(d["segmentation"]["size"], json({398, 434}));
    vision::Mask mask = rle_mask(d["segmentation"]);
    EXPECT_EQ(vision::mask_area(mask), d["area"].get<int64_t>());
    EXPECT_GT(d["area"].get<int64_t>(), 0);
    // The same box given to `vlrt segment` gives the same mask.
    auto& b = d["box"];
    std::string box = b[0].dump() + "," + b[1].dump() + "," + b[2].dump() + "," + b[3].dump();
    auto s =
        run_cli("segment " + kImage + " --model " + kSam + " --box " + box + " --json " + dir + "/s.json");
    ASSERT_EQ(s.exit_code, 0) << s.output;
    auto sj = json::parse(read_file(dir + "/s.json"));
    EXPECT_EQ(sj["masks"][0]["segmentation"], d["segmentation"]) << "box " << box;
  }
  vision::Image drawn = vision::load_image(dir + "/d.png");
  EXPECT_EQ(drawn.width, 434);
}

}  // namespace vlrt

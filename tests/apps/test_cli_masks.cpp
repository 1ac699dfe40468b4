// detect and label with --masks: the shipped demo detector boxes objects in the demo image and
// the tiny SAM-contract model (tools/make_tiny_sam.py) segments each box. Its random weights
// give arbitrary masks, so the tests check structure and agreement with `vlrt segment`.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "io/files.h"
#include "vision/image.h"
#include "vision/mask.h"

namespace vlrt {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;
using test::source_path;

namespace {

const std::string kSam = source_path("tests/fixtures/sam/tiny");
const std::string kImage = source_path("assets/demo.png");
const std::string kPrompt = "'yellow heart . black ring .'";
// The small grounding model and image of test_cli_grounding.cpp: fast label runs.
const std::string kTinyDetector = source_path("tests/fixtures/grounding/tiny/model.onnx");
const std::string kTinyImage = source_path("tests/fixtures/image/src.png");

// A folder of two copies of the tiny image, one in a subfolder.
std::string image_folder(const std::string& name) {
  std::string dir = test::temp_dir(name);
  fs::create_directories(dir + "/sub");
  fs::copy_file(kTinyImage, dir + "/a.png");
  fs::copy_file(kTinyImage, dir + "/sub/b.png");
  return dir;
}

std::string label_args(const std::string& dir, const std::string& out, const std::string& extra) {
  return "label " + dir + " --model " + kTinyDetector + " --prompt \"red circle . blue star .\" " + "--out " +
         out + " " + extra;
}

// Polygon x y pairs: at least three points, an even count, each in [lo, hi].
void expect_polygon(const std::vector<double>& xy, double hi_x, double hi_y) {
  ASSERT_GE(xy.size(), 6u);
  ASSERT_EQ(xy.size() % 2, 0u);
  for (size_t i = 0; i < xy.size(); i++) {
    EXPECT_GE(xy[i], 0);
    EXPECT_LE(xy[i], i % 2 ? hi_y : hi_x);
  }
}

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

TEST(MasksCli, LabelWritesCocoRleAndPolygonsYoloSegAndLabelmePolygons) {
  std::string dir = image_folder("masks_label_in");
  std::string out = test::temp_dir("masks_label_out");
  auto r = run_cli(label_args(dir, out + "/coco", "--masks " + kSam));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto coco = json::parse(read_file(out + "/coco/annotations.json"));
  ASSERT_FALSE(coco["annotations"].empty());
  for (auto& a : coco["annotations"]) {
    ASSERT_TRUE(a["segmentation"].is_object()) << a.dump();
    EXPECT_EQ(a["segmentation"]["size"], json({23, 37}));
    EXPECT_EQ(vision::mask_area(rle_mask(a["segmentation"])), a["area"].get<int64_t>());
  }

  r = run_cli(
      label_args(dir, out + "/poly", "--masks " + kSam + " --mask-format polygon --polygon-tolerance 0"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto poly = json::parse(read_file(out + "/poly/annotations.json"));
  ASSERT_EQ(poly["annotations"].size(), coco["annotations"].size());
  for (size_t i = 0; i < poly["annotations"].size(); i++) {
    auto& a = poly["annotations"][i];
    ASSERT_TRUE(a["segmentation"].is_array()) << a.dump();
    ASSERT_FALSE(a["segmentation"].empty());
    for (auto& p : a["segmentation"]) expect_polygon(p.get<std::vector<double>>(), 37, 23);
    EXPECT_EQ(a["area"], coco["annotations"][i]["area"]);
  }

  r = run_cli(label_args(dir, out + "/yolo", "--masks " + kSam + " --format yolo"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string lines = read_file(out + "/yolo/labels/sub/b.txt");
  ASSERT_FALSE(lines.empty());
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    int id = -1;
    ASSERT_TRUE(fields >> id) << line;
    EXPECT_TRUE(id == 0 || id == 1) << line;
    std::vector<double> xy;
    for (double v; fields >> v;) xy.push_back(v);
    EXPECT_TRUE(fields.eof()) << line;
    expect_polygon(xy, 1, 1);
  }

  r = run_cli(label_args(dir, out + "/labelme", "--masks " + kSam + " --format labelme"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lm = json::parse(read_file(out + "/labelme/a.json"));
  ASSERT_FALSE(lm["shapes"].empty());
  for (auto& s : lm["shapes"]) {
    EXPECT_EQ(s["shape_type"], "polygon");
    std::vector<double> xy;
    for (auto& p : s["points"]) {
      ASSERT_EQ(p.size(), 2u);
      xy.push_back(p[0]), xy.push_back(p[1]);
    }
    expect_polygon(xy, 37, 23);
    EXPECT_GT(s["score"].get<double>(), 0.35);
  }
}

TEST(MasksCli, BadFoldersFormatsAndResumesAreClearErrors) {
  std::string dir = image_folder("masks_bad_in");
  std::string out = test::temp_dir("masks_bad_out");
  std::string partial = test::temp_dir("masks_bad_sam");
  fs::copy_file(kSam + "/encoder.onnx", partial + "/encoder.onnx");
  fs::copy_file(kSam + "/sam.json", partial + "/sam.json");
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"detect " + kTinyImage + " --model " + kTinyDetector + " --prompt 'red circle .' --masks " + partial,
       "has no decoder 'decoder.onnx'"},
      {"detect " + kTinyImage + " --model " + kTinyDetector + " --prompt 'red circle .' --masks " + out +
           "/none",
       "is not a directory"},
      {label_args(dir, out + "/1", "--masks " + kSam + " --format yolo --mask-format rle"),
       "--format yolo cannot hold RLE masks (YOLO-seg lines are polygons)"},
      {label_args(dir, out + "/2", "--masks " + kSam + " --format labelme --mask-format rle"),
       "--format labelme cannot hold RLE masks"},
      {label_args(dir, out + "/3", "--masks " + kSam + " --mask-format outline"),
       "--mask-format must be rle or polygon, got 'outline'"},
      {label_args(dir, out + "/4", "--mask-format polygon"), "--mask-format needs --masks SAM_DIR"},
  };
  for (auto& c : cases) {
    auto r = run_cli(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }

  ASSERT_EQ(run_cli(label_args(dir, out + "/run", "")).exit_code, 0);
  auto r = run_cli(label_args(dir, out + "/run", "--masks " + kSam));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("holds an earlier run made without masks; a resumed run cannot add them"),
            std::string::npos)
      << r.output;
  ASSERT_EQ(run_cli(label_args(dir, out + "/masked", "--masks " + kSam)).exit_code, 0);
  r = run_cli(label_args(dir, out + "/masked", ""));
  EXPECT_NE(r.output.find("holds an earlier run made with masks; a resumed run cannot drop them"),
            std::string::npos)
      << r.output;
}

}  // namespace vlrt

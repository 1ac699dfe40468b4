// The shipped demo model (models/demo) on the shipped demo images (assets/): every object
// the scene generator drew is found with its phrase and a box overlapping the generator's by
// IoU >= 0.7, and no box carries a phrase of the prompt that is not in the picture.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "cli_util.h"
#include "io/files.h"
#include "vision/detection.h"

namespace vlrt {
namespace {

using test::run_cli;
using test::source_path;

vision::Detection box_of(const nlohmann::json& xyxy) {
  vision::Detection d;
  d.x1 = xyxy[0].get<float>();
  d.y1 = xyxy[1].get<float>();
  d.x2 = xyxy[2].get<float>();
  d.y2 = xyxy[3].get<float>();
  return d;
}

void check_scene(const std::string& name) {
  auto truth = nlohmann::json::parse(read_file(source_path("assets/" + name + ".json")));
  std::string out = test::temp_dir("demo_" + name) + "/detections.json";
  // No --model: the program finds the shipped model and its vocab by itself.
  auto r = run_cli("detect " + source_path("assets/" + name + ".png") + " --prompt '" +
                   truth["prompt"].get<std::string>() + "' --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto dets = nlohmann::json::parse(read_file(out))["detections"];
  for (const auto& obj : truth["objects"]) {
    auto label = obj["label"].get<std::string>();
    vision::Detection truth_box = box_of(obj["box"]);
    float best = 0;
    for (const auto& d : dets)
      if (d["label"] == label) best = std::max(best, vision::iou(truth_box, box_of(d["box"])));
    EXPECT_GE(best, 0.7) << name << ": " << label << " at " << obj["box"].dump() << "\n" << r.output;
  }
  for (const auto& d : dets)
    for (const auto& absent : truth["absent"])
      EXPECT_NE(d["label"], absent) << name << ": " << d.dump() << " names an object not in the picture";
}

TEST(DemoModel, FindsEveryObjectOfTheDemoImage) { check_scene("demo"); }

TEST(DemoModel, FindsEveryObjectOfTheSecondStyleImage) { check_scene("demo_style2"); }

// --classes: the prompt is made of the phrases, the detections carry the class names and ids.
TEST(DemoModel, ClassesLabelDetectionsWithClassNames) {
  auto truth = nlohmann::json::parse(read_file(source_path("assets/demo.json")));
  std::string out = test::temp_dir("demo_classes") + "/detections.json";
  auto r = run_cli("detect " + source_path("assets/demo.png") +
                   " --classes 'yellow heart=heart, black ring=ring' --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prompt \"yellow heart . black ring .\""), std::string::npos) << r.output;
  auto j = nlohmann::json::parse(read_file(out));
  auto dets = j["detections"];
  for (const auto& [phrase, name, id] :
       {std::tuple{"yellow heart", "heart", 0}, std::tuple{"black ring", "ring", 1}}) {
    vision::Detection truth_box;
    for (const auto& obj : truth["objects"])
      if (obj["label"] == phrase) truth_box = box_of(obj["box"]);
    float best = 0;
    for (const auto& d : dets)
      if (d["label"] == name) {
        EXPECT_EQ(d["class_id"], id) << d.dump();
        best = std::max(best, vision::iou(truth_box, box_of(d["box"])));
      }
    EXPECT_GE(best, 0.7) << name << "\n" << r.output;
  }
  for (const auto& d : dets) EXPECT_TRUE(d["label"] == "heart" || d["label"] == "ring") << d.dump();
}

}  // namespace
}  // namespace vlrt

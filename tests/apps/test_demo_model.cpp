// The shipped demo model (models/demo) on the shipped demo images (assets/): every object
// the scene generator drew is found with its phrase and a box overlapping the generator's by
// IoU >= 0.7, and no box carries a phrase of the prompt that is not in the picture.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "io/files.h"

namespace vlrt {
namespace {

using test::run_cli;
using test::source_path;

double iou(const std::vector<double>& a, const std::vector<double>& b) {
  double w = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  double h = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  double inter = std::max(0.0, w) * std::max(0.0, h);
  double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return uni > 0 ? inter / uni : 0.0;
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
    auto box = obj["box"].get<std::vector<double>>();
    double best = 0;
    for (const auto& d : dets)
      if (d["label"] == label) best = std::max(best, iou(box, d["box"].get<std::vector<double>>()));
    EXPECT_GE(best, 0.7) << name << ": " << label << " at " << obj["box"].dump() << "\n" << r.output;
  }
  for (const auto& d : dets)
    for (const auto& absent : truth["absent"])
      EXPECT_NE(d["label"], absent) << name << ": " << d.dump() << " names an object not in the picture";
}

TEST(DemoModel, FindsEveryObjectOfTheDemoImage) { check_scene("demo"); }

TEST(DemoModel, FindsEveryObjectOfTheSecondStyleImage) { check_scene("demo_style2"); }

}  // namespace
}  // namespace vlrt

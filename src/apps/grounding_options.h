// Options shared by the grounding commands (detect, label, serve).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "apps/commands.h"
#include "pipelines/grounding/detector.h"

namespace vlrt {

struct GroundingArgs {
  std::string model;  // default: the shipped demo model
  std::string vocab;  // default: vocab.txt beside the model
  std::optional<float> box_threshold, text_threshold, nms;
  std::optional<int> short_side, max_side;
  std::string size;  // "WxH": fixed input size
  int threads = 0;
  DeviceArgs device_args;
  bool no_verify_hash = false;
};

void add_grounding_options(CLI::App* cmd, GroundingArgs& args);
// Loads the model (the demo model when none is given) and applies the options
// over the model's own defaults. Fails naming what is missing.
std::unique_ptr<grounding::Detector> make_detector(const GroundingArgs& args);

}  // namespace vlrt

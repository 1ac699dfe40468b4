// Options shared by the commands that run a pipeline (detect, label, serve).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "apps/commands.h"
#include "pipelines/pipeline.h"

namespace vlrt {

struct PipelineArgs {
  std::string pipeline = "grounding";
  std::string model;  // default: the pipeline's shipped model (grounding: the demo model)
  std::string vocab;  // default: vocab.txt beside the model
  std::optional<float> box_threshold, text_threshold, nms;
  std::optional<int> short_side, max_side;
  std::string size;  // "WxH": fixed input size
  int threads = 0;
  DeviceArgs device_args;
  bool no_verify_hash = false;
};

void add_pipeline_options(CLI::App* cmd, PipelineArgs& args);
// Loads the model (the pipeline's shipped model when none is given) and makes the pipeline
// with the options over the model's own defaults. Fails naming what is missing.
std::unique_ptr<Pipeline> make_pipeline(const PipelineArgs& args);

}  // namespace vlrt

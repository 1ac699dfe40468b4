// Options shared by the commands that run a pipeline (detect, label, serve).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "apps/commands.h"
#include "pipelines/pipeline.h"
#include "pipelines/vlm/chat.h"
#include "pipelines/segment/segmenter.h"

namespace vlrt {

struct PipelineArgs {
  std::string pipeline = "grounding";
  std::string model;  // default: the pipeline's shipped model (grounding: the demo model)
  std::string vocab;  // default: vocab.txt beside the model
  std::optional<float> box_threshold, text_threshold, nms;
  bool nms_agnostic = false;
  std::optional<int> short_side, max_side;
  std::optional<int> max_phrases_per_pass;
  bool no_text_cache = false;
  std::string size;  // "WxH": fixed input size
  int threads = 0;
  DeviceArgs device_args;
  int64_t max_loop_iterations = kDefaultMaxLoopIterations;
  bool no_verify_hash = false;
};

// What `vlrt detect` and `vlrt label` ask of every image: a prompt, or the classes of an
// ontology (the prompt is made of their phrases).
struct QueryArgs {
  std::string prompt;
  std::string classes;  // "PHRASE=NAME, NAME" or FILE.yaml
};

void add_pipeline_options(CLI::App* cmd, PipelineArgs& args);
void add_query_options(CLI::App* cmd, QueryArgs& args);
// --masks SAM_DIR (detect and label): a SAM model folder; every detection gets a mask.
void add_masks_option(CLI::App* cmd, std::string& sam_dir);
// The SAM model --masks names, on the devices and threads of the pipeline options; null when
// --masks is not given. Fails naming what the folder lacks.
std::unique_ptr<segment::Segmenter> make_segmenter(const std::string& sam_dir, const PipelineArgs& args);
// A VLM folder's options (chat, plan, serve): the vision encoder's and the text side's devices
// (the --memory caps are the text devices'), threads, the context and the hash check.
vlm::ChatOptions chat_options(const DeviceArgs& vision, const DeviceArgs& text, int threads, int64_t context,
                              bool verify_hash);
// The session options the device, memory and thread flags ask for.
SessionOptions session_options(const PipelineArgs& args);
// Loads the model (the pipeline's shipped model when none is given) and makes the pipeline
// with the options over the model's own defaults. Fails naming what is missing.
std::unique_ptr<Pipeline> make_pipeline(const PipelineArgs& args);
// The query (its truncation warning printed) and its ontology: --classes parsed, or each
// phrase of --prompt its own class. Fails unless exactly one of the two is given.
std::pair<std::shared_ptr<const Query>, Ontology> make_query(const Pipeline& pipeline, const QueryArgs& args);

}  // namespace vlrt

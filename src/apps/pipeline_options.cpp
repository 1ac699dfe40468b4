#include "apps/pipeline_options.h"

#include <iostream>

#include "integrity/load_model.h"

namespace vlrt {

void add_pipeline_options(CLI::App* cmd, PipelineArgs& a) {
  std::string names;
  for (auto& p : pipelines()) names += cat(names.empty() ? "" : ", ", p.name, " (", p.summary, ")");
  cmd->add_option("--pipeline", a.pipeline, "what to run the model for: " + names)->capture_default_str();
  cmd->add_option("-m,--model", a.model,
                  "GroundingDINO-contract ONNX model (default: the shipped demo model)");
  cmd->add_option("--vocab", a.vocab, "BERT vocab.txt (default: vocab.txt beside the model)");
  cmd->add_option("--box-threshold", a.box_threshold,
                  "keep queries whose best token score exceeds this (default: the model's, else 0.35)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--text-threshold", a.text_threshold,
                  "a phrase labels a box when a token exceeds this (default: the model's, else 0.25)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--nms", a.nms,
                  "per-label non-maximum suppression IoU, 0 = off (default: the model's, else off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag(
      "--nms-agnostic", a.nms_agnostic,
      "suppress overlapping boxes whatever their labels (one object boxed as \"car\" and \"truck\" keeps "
      "the higher score), at the --nms IoU, else 0.5");
  cmd->add_option("--short-side", a.short_side,
                  "resize so the short side is this (default: the model's, else 800)")
      ->check(CLI::Range(16, 8192));
  cmd->add_option("--max-side", a.max_side,
                  "... unless the long side would exceed this (default: the model's, else 1333)")
      ->check(CLI::Range(16, 16384));
  cmd->add_option("--max-phrases-per-pass", a.max_phrases_per_pass,
                  "a prompt longer than the model's text length runs as passes of whole phrases, the "
                  "detections merged; at most this many phrases per pass (default: as many as fit)")
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--no-text-cache", a.no_text_cache,
                "compute the prompt's text branch for every batch instead of once per prompt (for timing)");
  cmd->add_option("--size", a.size, "WxH: resize every image to exactly this (models with static shapes)");
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  add_device_options(cmd, a.device_args);
  add_loop_limit_option(cmd, a.max_loop_iterations);
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "check manifest sizes only, not SHA-256");
}

void add_query_options(CLI::App* cmd, QueryArgs& a) {
  cmd->add_option("-p,--prompt", a.prompt, "phrases separated by ' . ', e.g. \"person . bicycle .\"");
  cmd->add_option(
      "--classes", a.classes,
      "instead of --prompt: \"PHRASE=NAME, NAME, ...\" (the prompt is made of the phrases; labels, ids "
      "and annotations use the names; several phrases may name one class) or FILE.yaml, a list of "
      "'- {phrase: P, name: N, id: I}' entries (name and id optional; see the README)");
}

std::pair<std::shared_ptr<const Query>, Ontology> make_query(const Pipeline& pipeline, const QueryArgs& a) {
  if (a.prompt.empty() == a.classes.empty())
    fail(a.prompt.empty() ? "give --prompt \"phrase . phrase .\" or --classes \"phrase=name, name\""
                          : "give --prompt or --classes, not both");
  std::shared_ptr<const Query> query;
  Ontology classes;
  if (!a.classes.empty()) {
    classes = load_classes(a.classes);
    query = pipeline.query(classes);
  } else {
    query = pipeline.query(a.prompt);
    classes = ontology_from_phrases(query->categories);
  }
  if (!query->warning.empty()) std::cerr << "warning: " << query->warning << "\n";
  return {query, classes};
}

void add_masks_option(CLI::App* cmd, std::string& sam_dir) {
  cmd->add_option("--masks", sam_dir,
                  "SAM model folder (encoder.onnx, decoder.onnx, sam.json; tools/export_sam.py writes one): "
                  "segment every detection, its box the prompt (default: boxes only)");
}

std::unique_ptr<segment::Segmenter> make_segmenter(const std::string& sam_dir, const PipelineArgs& args) {
  if (sam_dir.empty()) return nullptr;
  return std::make_unique<segment::Segmenter>(sam_dir, session_options(args));
}

vlm::ChatOptions chat_options(const DeviceArgs& vision, const DeviceArgs& text, int threads, int64_t context,
                              bool verify_hash) {
  vlm::ChatOptions o;
  o.vision.plan = plan_options(vision);
  o.text.plan = plan_options(text);
  o.vision.threads = o.text.threads = threads;
  o.context = context;
  o.verify_hash = verify_hash;
  return o;
}

SessionOptions session_options(const PipelineArgs& a) {
  SessionOptions options;
  options.threads = a.threads;
  options.plan = plan_options(a.device_args);
  options.max_loop_iterations = a.max_loop_iterations;
  return options;
}

std::unique_ptr<Pipeline> make_pipeline(const PipelineArgs& a) {
  const PipelineInfo& info = find_pipeline(a.pipeline);
  PipelineConfig config;
  config.vocab = a.vocab;
  config.session = session_options(a);
  if (a.box_threshold) config.settings["box_threshold"] = *a.box_threshold;
  if (a.text_threshold) config.settings["text_threshold"] = *a.text_threshold;
  if (a.nms) config.settings["nms"] = *a.nms;
  if (a.nms_agnostic) config.settings["nms_agnostic"] = 1;
  if (a.short_side) config.settings["short_side"] = *a.short_side;
  if (a.max_side) config.settings["max_side"] = *a.max_side;
  if (a.no_text_cache) config.settings["text_cache"] = 0;
  if (a.max_phrases_per_pass) config.settings["max_phrases_per_pass"] = *a.max_phrases_per_pass;
  if (!a.size.empty()) {
    auto [name, shape] = parse_shape_arg("size=" + a.size);
    if (shape.size() != 2 || shape[0] <= 0 || shape[1] <= 0)
      fail("--size expects WxH, e.g. 800x800, got '", a.size, "'");
    config.settings["width"] = double(shape[0]);
    config.settings["height"] = double(shape[1]);
  }
  std::string model_path = a.model;
  if (model_path.empty()) {
    if (!info.default_model) fail("no model given; pass --model MODEL.onnx");
    model_path = info.default_model();
  }
  Model model = load_model(model_path, {.verify_hash = !a.no_verify_hash});
  return info.make(std::move(model), config);
}

}  // namespace vlrt

#include "apps/grounding_options.h"

#include "integrity/load_model.h"

namespace vlrt {

void add_grounding_options(CLI::App* cmd, GroundingArgs& a) {
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
  cmd->add_option("--short-side", a.short_side,
                  "resize so the short side is this (default: the model's, else 800)")
      ->check(CLI::Range(16, 8192));
  cmd->add_option("--max-side", a.max_side,
                  "... unless the long side would exceed this (default: the model's, else 1333)")
      ->check(CLI::Range(16, 16384));
  cmd->add_option("--size", a.size, "WxH: resize every image to exactly this (models with static shapes)");
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  add_device_options(cmd, a.device_args);
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "check manifest sizes only, not SHA-256");
}

std::unique_ptr<grounding::Detector> make_detector(const GroundingArgs& a) {
  std::string model_path = a.model.empty() ? grounding::default_model_path() : a.model;
  if (model_path.empty())
    fail("no model given and the demo model (models/demo/model.onnx) was not found; pass --model MODEL.onnx");
  Model model = load_model(model_path, {.verify_hash = !a.no_verify_hash});
  std::string vocab = a.vocab.empty() ? grounding::default_vocab_path(model) : a.vocab;
  if (vocab.empty()) fail("no vocab given and none beside ", model_path, "; pass --vocab vocab.txt");
  SessionOptions so;
  so.threads = a.threads;
  so.plan = plan_options(a.device_args);
  auto d = std::make_unique<grounding::Detector>(std::move(model), vocab, so);
  auto& o = d->options();
  if (a.box_threshold) o.box_threshold = *a.box_threshold;
  if (a.text_threshold) o.text_threshold = *a.text_threshold;
  if (a.nms) o.nms_iou = *a.nms;
  if (a.short_side) o.resize.short_side = *a.short_side;
  if (a.max_side) o.resize.max_side = *a.max_side;
  if (!a.size.empty()) {
    auto [name, shape] = parse_shape_arg("size=" + a.size);
    if (shape.size() != 2 || shape[0] <= 0 || shape[1] <= 0)
      fail("--size expects WxH, e.g. 800x800, got '", a.size, "'");
    o.resize.fixed_width = int(shape[0]);
    o.resize.fixed_height = int(shape[1]);
  }
  return d;
}

}  // namespace vlrt

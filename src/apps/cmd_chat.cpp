// vlrt chat [MODEL_DIR] --image IMG --prompt "...": one turn with a vision-language model
// (Qwen2-VL / Qwen2.5-VL folder; the shipped demo VLM, models/demo-vlm, when none is given),
// the answer streamed as it is generated.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/pipeline_options.h"
#include "io/files.h"
#include "io/shipped.h"
#include "pipelines/vlm/chat.h"

namespace vlrt {

namespace {

namespace fs = std::filesystem;

struct ChatArgs {
  std::string model;
  std::vector<std::string> images;
  std::string prompt, system;
  int64_t max_new_tokens = 0, context = 0;
  bool sample = false;
  float temperature = 1.0f, top_p = 1.0f, repetition_penalty = 1.0f;
  int64_t top_k = 0;
  uint64_t seed = 0;
  DeviceArgs vision_devices, text_devices;
  int threads = 0;
  std::string json_out;
  int64_t max_image_pixels = vision::kDefaultMaxPixels;
  bool no_verify_hash = false;
};

std::string placement_line(const vlm::TurnStats& s) {
  std::string line;
  for (const char* model : {"vision", "embedding", "decoder"}) {
    auto it = s.placement.find(model);
    if (it == s.placement.end()) continue;
    line += cat(line.empty() ? "" : "; ", model, " on ");
    for (size_t i = 0; i < it->second.size(); i++)
      line += cat(i ? ", " : "", it->second[i].first, " (", it->second[i].second, " nodes)");
  }
  return line;
}

double per_second(int64_t n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

// The shipped demo VLM's folder; fails saying what to pass when it is not there.
std::string default_vlm_folder() {
  std::string config = shipped_model_path("demo-vlm/config.json");
  if (config.empty())
    fail("no model given and the demo VLM (models/demo-vlm) was not found; pass a VLM folder: vlrt chat MODEL_DIR ...");
  return fs::path(config).parent_path().string();
}

void run_chat(const ChatArgs& a, CLI::App* cmd) {
  vlm::ChatOptions options = chat_options(a.vision_devices, a.text_devices, a.threads, a.context, !a.no_verify_hash);
  vlm::GenerateOptions g;
  g.max_new_tokens = a.max_new_tokens;
  vlm::Chat chat(a.model.empty() ? default_vlm_folder() : a.model, options);
  g.sampling = chat.folder().generation.sampling;
  if (cmd->count("--sample")) g.sampling.sample = a.sample;
  if (cmd->count("--temperature")) g.sampling.temperature = a.temperature;
  if (cmd->count("--top-k")) g.sampling.top_k = a.top_k;
  if (cmd->count("--top-p")) g.sampling.top_p = a.top_p;
  if (cmd->count("--repetition-penalty")) g.sampling.repetition_penalty = a.repetition_penalty;
  g.sampling.seed = a.seed;

  std::vector<vision::Image> images;
  std::vector<text::ChatMessage> messages;
  if (!a.system.empty()) messages.push_back(text::ChatMessage::of_text("system", a.system));
  text::ChatMessage user{"user", {}};
  for (auto& path : a.images) {
    images.push_back(vision::load_image(path, a.max_image_pixels));
    user.content.push_back({text::ChatPart::Kind::kImage, ""});
  }
  user.content.push_back({text::ChatPart::Kind::kText, a.prompt});
  messages.push_back(user);

  vlm::Answer answer = chat.generate(messages, images, g, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  const vlm::TurnStats& s = answer.stats;
  std::fprintf(stderr,
               "%lld images (%lld image tokens), prompt %lld tokens; vision %.1f ms; prefill %.1f ms (%.0f tokens/s); "
               "first token after %.1f ms; decode %lld tokens in %.1f ms (%.1f tokens/s); stopped by %s\n"
               "KV cache: %lld tokens, %s (planned %s); transfers %zu planned, %zu executed; %s\n",
               (long long)s.images, (long long)s.image_tokens, (long long)s.prompt_tokens, s.vision_ms, s.prefill_ms,
               per_second(s.prompt_tokens, s.prefill_ms), s.first_token_ms, (long long)s.generated_tokens, s.decode_ms,
               per_second(s.generated_tokens, s.decode_ms), s.stop.c_str(), (long long)s.context,
               human_bytes(double(s.cache_bytes)).c_str(), human_bytes(double(s.planned_cache_bytes)).c_str(),
               s.transfers_planned, s.transfers_executed,
               placement_line(s).c_str());
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"text", answer.text},
                        {"tokens", answer.tokens},
                        {"prompt_tokens", s.prompt_tokens},
                        {"image_tokens", s.image_tokens},
                        {"context", s.context},
                        {"cache_bytes", s.cache_bytes},
                        {"planned_cache_bytes", s.planned_cache_bytes},
                        {"vision_ms", s.vision_ms},
                        {"prefill_ms", s.prefill_ms},
                        {"first_token_ms", s.first_token_ms},
                        {"decode_ms", s.decode_ms},
                        {"transfers_planned", s.transfers_planned},
                        {"transfers_executed", s.transfers_executed},
                        {"stop", s.stop},
                        {"placement", s.placement}};
    write_file_atomically(a.json_out, j.dump() + "\n");
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  static ChatArgs a;
  auto* cmd = app.add_subcommand("chat", "Ask a vision-language model (Qwen2-VL / Qwen2.5-VL folder) about images");
  cmd->add_option("model", a.model,
                  "VLM folder: vision.onnx, embedding.onnx, decoder.onnx, tokenizer.json, config.json, "
                  "generation_config.json, preprocessor_config.json (tools/export_qwen_vl.py writes one; default: the "
                  "shipped demo VLM, models/demo-vlm, which knows the generated scenes of tools/scenes.py)");
  cmd->add_option("--image", a.images, "PNG, JPEG, BMP, GIF, WebP or TIFF image (repeatable; in prompt order)");
  cmd->add_option("-p,--prompt", a.prompt, "the question")->required();
  cmd->add_option("--system", a.system, "system message (default: the template's, \"You are a helpful assistant.\")");
  cmd->add_option("--max-new-tokens", a.max_new_tokens, "tokens to generate at most (default: generation_config.json's, else 128)");
  cmd->add_option("--context", a.context,
                  "tokens a turn may hold, prompt and answer: the KV cache's size, planned and checked against the devices' "
                  "memory at load (default: the model's max_position_embeddings, at most 4096)");
  cmd->add_flag("--sample,!--greedy", a.sample, "sample instead of taking the most likely token (default: generation_config.json's do_sample)");
  cmd->add_option("--temperature", a.temperature, "sampling temperature (> 0)");
  cmd->add_option("--top-k", a.top_k, "sample among the k most likely tokens (0: all)");
  cmd->add_option("--top-p", a.top_p, "sample among the most likely tokens whose probabilities sum to p");
  cmd->add_option("--repetition-penalty", a.repetition_penalty, "penalty for tokens already in the sequence (1: none)");
  cmd->add_option("--seed", a.seed, "sampling seed")->capture_default_str();
  cmd->add_option("--vision-devices", a.vision_devices.devices, "devices of the vision encoder, in order of preference")
      ->capture_default_str();
  cmd->add_option("--text-devices", a.text_devices.devices,
                  "devices of the embedding and the decoder (the KV cache lives with the decoder layers)")
      ->capture_default_str();
  cmd->add_option("--memory", a.text_devices.memory,
                  "DEVICE=SIZE caps a device's memory for the decoder and its KV cache (e.g. cpu=1GiB); the decoder is "
                  "split across --text-devices when it does not fit");
  cmd->add_option("--max-image-pixels", a.max_image_pixels,
                  "refuse an image with more pixels than this before decoding it (the model itself sees at most "
                  "preprocessor_config.json's max_pixels)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  cmd->add_option("--json", a.json_out, "write the answer's tokens, text and timings as JSON");
  cmd->add_flag("--no-verify-hash", a.no_verify_hash, "skip the manifest's SHA-256 check (sizes are still checked)");
  cmd->callback([cmd] { run_chat(a, cmd); });
}

}  // namespace vlrt

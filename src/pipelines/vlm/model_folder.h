// A VLM model folder (Qwen2-VL / Qwen2.5-VL, docs/ARCHITECTURE.md "Vision-language chat"):
// the reference's JSON files read into the sizes, special tokens, generation defaults and
// preprocessing vlrt needs, and the three models checked against their contracts. Every
// failure names the file and what is missing or mismatched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "pipelines/vlm/image_patches.h"
#include "pipelines/vlm/sampler.h"

namespace vlrt::vlm {

enum class Variant { qwen2_vl, qwen2_5_vl };

struct TextConfig {
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int64_t max_positions = 0;
  std::vector<int64_t> mrope_section;
};

struct SpecialTokens {
  int64_t image_pad = -1, vision_start = -1, vision_end = -1;
};

struct GenerationDefaults {
  std::vector<int64_t> stop_tokens;  // eos_token_id, one or several
  SamplingOptions sampling;          // do_sample, temperature, top_k, top_p, repetition_penalty
  int64_t max_new_tokens = 128;
};

struct ModelFolder {
  std::string dir;
  Variant variant = Variant::qwen2_vl;
  TextConfig text;
  PatchConfig patches;        // preprocessor_config.json (patch, merge and temporal sizes)
  VisionIndexConfig vision;   // config.json's vision_config (Qwen2.5-VL's window size)
  SpecialTokens tokens;
  GenerationDefaults generation;

  std::string path(const std::string& file) const;
  std::string vision_model() const { return path("vision.onnx"); }
  std::string embedding_model() const { return path("embedding.onnx"); }
  std::string decoder_model() const { return path("decoder.onnx"); }
  std::string tokenizer() const { return path("tokenizer.json"); }
};

// Whether `path` is a folder holding a config.json: what vlrt chat, plan and serve take for a VLM
// folder (read_model_folder then names anything else wrong with it).
bool is_model_folder(const std::string& path);

// Reads DIR's config.json, generation_config.json and preprocessor_config.json and checks
// that the models and tokenizer.json are there; fails listing every missing file.
ModelFolder read_model_folder(const std::string& dir);

// Each fails listing every input and output the model lacks or has of another dtype or rank.
void check_vision_contract(const Model& vision, const ModelFolder& folder);
void check_embedding_contract(const Model& embedding);
void check_decoder_contract(const Model& decoder, const ModelFolder& folder);

// The names of the decoder's cache inputs and outputs of a layer.
std::string past_key_name(int64_t layer);
std::string past_value_name(int64_t layer);
std::string present_key_name(int64_t layer);
std::string present_value_name(int64_t layer);

}  // namespace vlrt::vlm

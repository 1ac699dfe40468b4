#include "pipelines/vlm/model_folder.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/files.h"
#include "pipelines/contract.h"

namespace vlrt::vlm {

namespace fs = std::filesystem;

std::string ModelFolder::path(const std::string& file) const { return (fs::path(dir) / file).string(); }

std::string past_key_name(int64_t layer) { return cat("past_key_values.", layer, ".key"); }
std::string past_value_name(int64_t layer) { return cat("past_key_values.", layer, ".value"); }
std::string present_key_name(int64_t layer) { return cat("present.", layer, ".key"); }
std::string present_value_name(int64_t layer) { return cat("present.", layer, ".value"); }

namespace {

const char* const kFiles[] = {"vision.onnx",      "embedding.onnx",         "decoder.onnx",
                              "tokenizer.json",   "config.json",            "generation_config.json",
                              "preprocessor_config.json"};

nlohmann::json read_json(const ModelFolder& f, const char* file) {
  std::string path = f.path(file);
  try {
    nlohmann::json j = nlohmann::json::parse(read_file(path));
    if (!j.is_object()) fail("it is not a JSON object");
    return j;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": ", e.what());
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

// A positive integer field of `j` (a JSON file named `file`).
int64_t positive(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || !j.at(key).is_number_integer() || j.at(key).get<int64_t>() <= 0)
    fail(file, ": '", key, "' is missing or not a positive integer");
  return j.at(key).get<int64_t>();
}

int64_t token_id(const nlohmann::json& j, const char* key, const std::string& file) {
  if (!j.contains(key) || !j.at(key).is_number_integer())
    fail(file, ": '", key, "' is missing; the model's special token ids come from it");
  return j.at(key).get<int64_t>();
}

void read_config(ModelFolder& f) {
  std::string file = f.path("config.json");
  nlohmann::json j = read_json(f, "config.json");
  std::string type = j.value("model_type", "");
  if (type == "qwen2_vl") f.variant = Variant::qwen2_vl;
  else if (type == "qwen2_5_vl") f.variant = Variant::qwen2_5_vl;
  else fail(file, ": model_type '", type, "' is not a supported VLM (qwen2_vl, qwen2_5_vl)");
  // Qwen2.5-VL releases after 4.49 nest the language model's sizes under text_config.
  const nlohmann::json& t = j.contains("text_config") && !j.contains("hidden_size") ? j.at("text_config") : j;
  TextConfig& c = f.text;
  c.hidden = positive(t, "hidden_size", file);
  c.layers = positive(t, "num_hidden_layers", file);
  c.heads = positive(t, "num_attention_heads", file);
  c.kv_heads = t.contains("num_key_value_heads") ? positive(t, "num_key_value_heads", file) : c.heads;
  c.vocab = positive(t, "vocab_size", file);
  c.max_positions = positive(t, "max_position_embeddings", file);
  if (c.hidden % c.heads != 0) fail(file, ": hidden_size ", c.hidden, " is not a multiple of num_attention_heads ", c.heads);
  c.head_dim = c.hidden / c.heads;
  const nlohmann::json& rope = t.value("rope_scaling", nlohmann::json::object());
  if (!rope.contains("mrope_section")) fail(file, ": rope_scaling.mrope_section is missing (the 3-D rotary split)");
  c.mrope_section = rope.at("mrope_section").get<std::vector<int64_t>>();
  int64_t sum = 0;
  for (int64_t s : c.mrope_section) sum += s;
  if (c.mrope_section.size() != 3 || sum * 2 != c.head_dim)
    fail(file, ": rope_scaling.mrope_section must be 3 numbers summing to head_dim / 2 = ", c.head_dim / 2);
  f.tokens.image_pad = token_id(j, "image_token_id", file);
  f.tokens.vision_start = token_id(j, "vision_start_token_id", file);
  f.tokens.vision_end = token_id(j, "vision_end_token_id", file);
  if (!j.contains("vision_config")) fail(file, ": vision_config is missing");
  const nlohmann::json& v = j.at("vision_config");
  f.vision.patch_size = v.value("patch_size", f.vision.patch_size);
  f.vision.merge_size = v.value("spatial_merge_size", f.vision.merge_size);
  if (f.variant == Variant::qwen2_5_vl) f.vision.window_size = int(positive(v, "window_size", file + " vision_config"));
}

void read_generation_config(ModelFolder& f) {
  std::string file = f.path("generation_config.json");
  nlohmann::json j = read_json(f, "generation_config.json");
  GenerationDefaults& g = f.generation;
  if (j.contains("eos_token_id")) {
    const auto& eos = j.at("eos_token_id");
    g.stop_tokens = eos.is_array() ? eos.get<std::vector<int64_t>>() : std::vector<int64_t>{eos.get<int64_t>()};
  }
  if (g.stop_tokens.empty()) fail(file, ": eos_token_id is missing; generation would never stop");
  SamplingOptions& s = g.sampling;
  s.sample = j.value("do_sample", false);
  s.temperature = j.value("temperature", 1.0f);
  s.top_k = j.value("top_k", int64_t{0});
  s.top_p = j.value("top_p", 1.0f);
  s.repetition_penalty = j.value("repetition_penalty", 1.0f);
  if (j.contains("max_new_tokens")) g.max_new_tokens = positive(j, "max_new_tokens", file);
  try {
    check_sampling(s);
  } catch (const Error& e) {
    fail(file, ": ", e.what());
  }
}

void read_preprocessor_config(ModelFolder& f) {
  std::string file = f.path("preprocessor_config.json");
  nlohmann::json j = read_json(f, "preprocessor_config.json");
  PatchConfig& p = f.patches;
  // Newer processors keep the pixel budget under "size".
  const nlohmann::json& size = j.contains("min_pixels") ? j : j.value("size", nlohmann::json::object());
  if (size.contains("min_pixels")) p.min_pixels = positive(size, "min_pixels", file);
  if (size.contains("max_pixels")) p.max_pixels = positive(size, "max_pixels", file);
  if (p.min_pixels > p.max_pixels) fail(file, ": min_pixels ", p.min_pixels, " is above max_pixels ", p.max_pixels);
  for (auto [key, out] : {std::pair{"image_mean", &p.image_mean}, std::pair{"image_std", &p.image_std}}) {
    if (!j.contains(key)) continue;
    auto v = j.at(key).get<std::vector<float>>();
    if (v.size() != 3) fail(file, ": '", key, "' has ", v.size(), " values, expected 3 (R, G, B)");
    std::copy(v.begin(), v.end(), out->begin());
  }
  for (float s : p.image_std)
    if (!(s > 0)) fail(file, ": image_std must be positive");
  p.rescale_factor = j.value("rescale_factor", p.rescale_factor);
  p.patch_size = j.value("patch_size", p.patch_size);
  p.temporal_patch_size = j.value("temporal_patch_size", p.temporal_patch_size);
  p.merge_size = j.value("merge_size", p.merge_size);
}

}  // namespace

bool is_model_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

ModelFolder read_model_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("VLM model folder '", dir, "' is not a directory; pass the folder holding vision.onnx, decoder.onnx and ",
         "the reference's JSON files");
  ModelFolder f;
  f.dir = dir;
  std::vector<std::string> missing;
  for (const char* file : kFiles)
    if (!fs::exists(f.path(file), ec)) missing.push_back(file);
  if (!missing.empty()) {
    std::string list;
    for (auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    fail("VLM model folder '", dir, "' lacks ", list,
         " (a Qwen2-VL folder holds vision.onnx, embedding.onnx, decoder.onnx, tokenizer.json, config.json, "
         "generation_config.json and preprocessor_config.json; see the README)");
  }
  read_config(f);
  read_generation_config(f);
  read_preprocessor_config(f);
  if (f.patches.patch_size != f.vision.patch_size || f.patches.merge_size != f.vision.merge_size)
    fail(f.path("preprocessor_config.json"), ": patch_size ", f.patches.patch_size, " and merge_size ",
         f.patches.merge_size, " differ from config.json's vision_config (", f.vision.patch_size, ", ",
         f.vision.merge_size, ")");
  return f;
}

void check_vision_contract(const Model& m, const ModelFolder& f) {
  std::vector<ValueWant> inputs{{"pixel_values", 2}, {"rotary_pos_ids", 2, DType::i64}, {"attention_bias", 2}};
  if (f.variant == Variant::qwen2_5_vl) {
    inputs.push_back({"window_index", 1, DType::i64});
    inputs.push_back({"reverse_window_index", 1, DType::i64});
    inputs.push_back({"window_attention_bias", 2});
  }
  std::vector<std::string> problems;
  check_values(m.graph.inputs, inputs, "input", problems);
  check_values(m.graph.outputs, {{"image_embeds", 2}}, "output", problems);
  if (!problems.empty())
    fail_contract(m, "VLM vision", problems,
                  "inputs pixel_values float32[Np,C*T*P*P], rotary_pos_ids int64[Np,2], attention_bias "
                  "float32[Np,Np] (Qwen2.5-VL also window_index, reverse_window_index int64[Np/4] and "
                  "window_attention_bias float32[Np,Np]); output image_embeds float32[Np/4,H]");
}

void check_embedding_contract(const Model& m) {
  std::vector<std::string> problems;
  check_values(m.graph.inputs, {{"input_ids", 2, DType::i64}, {"image_embeds", 2}}, "input", problems);
  check_values(m.graph.outputs, {{"inputs_embeds", 3}}, "output", problems);
  if (!problems.empty())
    fail_contract(m, "VLM embedding", problems,
                  "inputs input_ids int64[B,S], image_embeds float32[Ni,H]; output inputs_embeds float32[B,S,H]");
}

void check_decoder_contract(const Model& m, const ModelFolder& f) {
  std::vector<ValueWant> inputs{{"inputs_embeds", 3}, {"attention_mask", 2, DType::i64}, {"position_ids", 3, DType::i64}};
  std::vector<ValueWant> outputs{{"logits", 3}};
  for (int64_t l = 0; l < f.text.layers; l++) {
    inputs.push_back({past_key_name(l), 4});
    inputs.push_back({past_value_name(l), 4});
    outputs.push_back({present_key_name(l), 4});
    outputs.push_back({present_value_name(l), 4});
  }
  std::vector<std::string> problems;
  check_values(m.graph.inputs, inputs, "input", problems);
  check_values(m.graph.outputs, outputs, "output", problems);
  if (!find_decl(m.graph.inputs, past_key_name(0)))
    problems.push_back("it has no KV-cache inputs: export the decoder with past_key_values (use_cache) so that "
                       "each token does not recompute the whole sequence");
  if (!problems.empty())
    fail_contract(m, "VLM decoder", problems,
                  cat("inputs inputs_embeds float32[B,S,H], attention_mask int64[B,P+S], position_ids int64[3,B,S], "
                      "past_key_values.{i}.key/value float32[B,kvh,P,hd] for the ", f.text.layers,
                      " layers of config.json; outputs logits float32[B,S,V], present.{i}.key/value"));
}

}  // namespace vlrt::vlm

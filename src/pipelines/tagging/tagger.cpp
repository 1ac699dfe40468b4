#include "pipelines/tagging/tagger.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/files.h"

namespace vlrt::tagging {

namespace fs = std::filesystem;

namespace {

// ImageNet's, on 0..1 pixels (torchvision Normalize after ToTensor).
constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};

std::string metadata_or(const Model& model, const std::string& key, const std::string& fallback) {
  auto it = model.metadata.find(key);
  return it == model.metadata.end() ? fallback : it->second;
}

Tag tag_from_json(const nlohmann::json& j, size_t i, float default_threshold) {
  Tag t;
  t.threshold = default_threshold;
  if (j.is_string()) {
    t.name = j.get<std::string>();
    return t;
  }
  if (!j.is_object())
    fail("entry ", i + 1, " is JSON ", j.type_name(), "; expected {\"name\", \"threshold\"}");
  if (!j.contains("name") || !j.at("name").is_string()) fail("entry ", i + 1, " has no string 'name'");
  t.name = j.at("name").get<std::string>();
  if (j.contains("threshold")) {
    if (!j.at("threshold").is_number())
      fail("entry ", i + 1, " ('", t.name, "'): 'threshold' is not a number");
    t.threshold = j.at("threshold").get<float>();
  }
  if (j.contains("names")) {
    if (!j.at("names").is_object()) fail("entry ", i + 1, " ('", t.name, "'): 'names' is not an object");
    for (auto& [lang, name] : j.at("names").items()) {
      if (!name.is_string()) fail("entry ", i + 1, " ('", t.name, "'): names['", lang, "'] is not a string");
      t.names[lang] = name.get<std::string>();
    }
  }
  if (!(t.threshold >= 0 && t.threshold <= 1))
    fail("entry ", i + 1, " ('", t.name, "'): threshold ", t.threshold, " is not in 0..1");
  return t;
}

}  // namespace

const std::string& Tag::name_in(const std::string& lang) const {
  auto it = names.find(lang);
  return it == names.end() ? name : it->second;
}

std::vector<Tag> read_tag_list(const std::string& path, float default_threshold) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error& e) {
    fail("tag list: ", e.what());
  }
  std::vector<Tag> tags;
  if (fs::path(path).extension() == ".txt") {
    size_t begin = 0;
    while (begin < text.size()) {
      size_t end = std::min(text.find('\n', begin), text.size());
      std::string line = text.substr(begin, end - begin);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) tags.push_back({line, default_threshold, {}});
      begin = end + 1;
    }
  } else {
    try {
      nlohmann::json j = nlohmann::json::parse(text);
      if (!j.is_object() || !j.contains("tags") || !j.at("tags").is_array())
        fail("expected {\"tags\": [{\"name\": ..., \"threshold\": ..., \"names\": {\"zh\": ...}}, ...]}");
      const nlohmann::json& list = j.at("tags");
      for (size_t i = 0; i < list.size(); i++) tags.push_back(tag_from_json(list[i], i, default_threshold));
    } catch (const nlohmann::json::exception& e) {
      fail("tag list ", path, ": ", e.what());
    } catch (const Error& e) {
      fail("tag list ", path, ": ", e.what());
    }
  }
  if (tags.empty()) fail("tag list ", path, " has no tags");
  return tags;
}

std::string find_tag_list(const Model& model, const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  fs::path dir = fs::path(model.path).parent_path();
  auto named = model.metadata.find("vlrt.tags");
  std::vector<std::string> candidates;
  if (named != model.metadata.end()) candidates.push_back(named->second);
  candidates.insert(candidates.end(), {"tags.json", "tags.txt"});
  std::error_code ec;
  for (auto& name : candidates)
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  std::string looked;
  for (auto& name : candidates) looked += cat(looked.empty() ? "" : ", ", (dir / name).string());
  fail(model.path, " has no tag list beside it (looked for ", looked,
       "); pass --tags FILE or write one with tools/export_ram_plus.py");
}

Tagger::Tagger(Model model, SessionOptions session, TaggerOptions options) : threshold_(options.threshold) {
  const auto& inputs = model.graph.inputs;
  if (inputs.size() != 1 || inputs[0].dtype != DType::f32 || !inputs[0].has_shape ||
      inputs[0].dims.size() != 4 || (inputs[0].dims[1].value > 0 && inputs[0].dims[1].value != 3))
    fail(model.path, " does not follow the tagging contract: its input",
         inputs.size() == 1 ? cat(" is ", inputs[0].describe()) : cat("s are ", inputs.size(), " values"),
         "; expected one input float32[B,3,S,S] (an RGB image) and one output [B,N], a score per tag");
  if (model.graph.outputs.empty()) fail(model.path, " has no output; expected one score per tag [B,N]");
  input_ = inputs[0].name;
  output_ = model.graph.outputs[0].name;
  const auto& dims = inputs[0].dims;
  if (dims[2].value > 0) image_size_ = int(dims[2].value);
  if (dims[2].value > 0 && dims[3].value > 0 && dims[2].value != dims[3].value)
    fail(model.path, ": input '", input_, "' is ", inputs[0].describe(),
         "; a tagger's image input is square");
  std::string output_kind = metadata_or(model, "vlrt.tag_output", "logits");
  if (output_kind != "logits" && output_kind != "probabilities")
    fail(model.path, ": metadata vlrt.tag_output is '", output_kind, "'; expected logits or probabilities");
  logits_ = output_kind == "logits";
  float default_threshold = kDefaultThreshold;
  std::string meta_threshold = metadata_or(model, "vlrt.threshold", "");
  if (!meta_threshold.empty()) default_threshold = std::stof(meta_threshold);

  std::string list = find_tag_list(model, options.tag_list);
  tags_ = read_tag_list(list, default_threshold);
  const ValueDecl& out = model.graph.outputs[0];
  if (out.has_shape &&
      (out.dims.size() != 2 || (out.dims[1].value > 0 && out.dims[1].value != int64_t(tags_.size()))))
    fail("the tag list ", list, " has ", tags_.size(), " tags but ", model.path, "'s output '", output_,
         "' is ", out.describe(), "; the list needs one tag per score, in the model's order");
  session_ = std::make_unique<Session>(std::move(model), std::move(session));
}

void Tagger::write_pixels(const vision::Image& image, float* out) const {
  int s = image_size_;
  vision::Image resized =
      image.width == s && image.height == s ? image : vision::resize_bilinear(image, s, s);
  size_t plane = size_t(s) * size_t(s);
  for (int ch = 0; ch < 3; ch++)
    for (size_t p = 0; p < plane; p++)
      out[ch * plane + p] = (float(resized.rgb[p * 3 + ch]) / 255.f - kMean[ch]) / kStd[ch];
}

Tensor Tagger::pixels(const std::vector<const vision::Image*>& images) const {
  int64_t s = image_size_;
  Tensor t(DType::f32, {int64_t(images.size()), 3, s, s});
  for (size_t i = 0; i < images.size(); i++) write_pixels(*images[i], t.data<float>() + i * 3 * s * s);
  return t;
}

std::vector<ImageTags> Tagger::tag(const std::vector<const vision::Image*>& images) {
  TensorMap out = session_->run({{input_, pixels(images)}});
  const Tensor& scores = out.at(output_);
  int64_t b = int64_t(images.size()), n = int64_t(tags_.size());
  VLRT_CHECK(scores.rank() == 2 && scores.dim(0) == b && scores.dim(1) == n && scores.dtype() == DType::f32,
             session_->model().path, ": output '", output_, "' is ", scores.describe(), "; expected float32[",
             b, ",", n, "] for ", b, " images and the ", n, " tags of the tag list");
  std::vector<ImageTags> result;
  for (int64_t i = 0; i < b; i++) result.push_back(select(scores.data<float>() + i * n));
  return result;
}

ImageTags Tagger::select(const float* scores) const {
  ImageTags r;
  r.probabilities.resize(tags_.size());
  for (size_t i = 0; i < tags_.size(); i++) {
    float p = logits_ ? 1.f / (1.f + std::exp(-scores[i])) : scores[i];
    r.probabilities[i] = p;
    if (p > threshold_.value_or(tags_[i].threshold)) r.tags.push_back({int(i), p});
  }
  std::stable_sort(r.tags.begin(), r.tags.end(),
                   [](const ScoredTag& a, const ScoredTag& b) { return a.score > b.score; });
  return r;
}

}  // namespace vlrt::tagging

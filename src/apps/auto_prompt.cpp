#include "apps/auto_prompt.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "integrity/load_model.h"
#include "io/shipped.h"

namespace vlrt {

namespace fs = std::filesystem;

std::string tagger_model_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  std::string file = (fs::path(path) / "model.onnx").string();
  if (!fs::exists(file, ec))
    fail("model folder '", path,
         "' has no model.onnx; pass the .onnx file or a folder holding model.onnx and tags.json");
  return file;
}

std::string find_tagger(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  std::string shipped = shipped_model_path(kDemoTagger);
  if (shipped.empty())
    fail("--auto needs a tagger and the demo tagger (models/", kDemoTagger,
         ") was not found beside the program or in the working directory; pass --tagger DIR (a folder with "
         "model.onnx and tags.json, as tools/train_demo_tagger.py or tools/export_ram_plus.py write) or give "
         "--prompt instead of --auto");
  return shipped;
}

std::string prompt_from_tags(const std::vector<std::string>& tags, const std::string& image) {
  std::vector<std::string> kept;
  for (const std::string& tag : tags) {
    size_t begin = tag.find_first_not_of(" \t\r\n");
    if (begin == std::string::npos) continue;
    std::string t = tag.substr(begin, tag.find_last_not_of(" \t\r\n") - begin + 1);
    if (std::find(kept.begin(), kept.end(), t) == kept.end()) kept.push_back(t);
  }
  if (kept.empty())
    fail("--auto: the tagger found nothing in ", image,
         " above its tags' thresholds, so there is no prompt; give --prompt \"phrase . phrase .\" or "
         "lower the thresholds with --tag-threshold");
  std::string prompt;
  for (const std::string& t : kept) prompt += t + " . ";
  prompt.pop_back();
  return prompt;
}

AutoPrompt auto_prompt(const std::string& tagger_path, const vision::Image& image, const std::string& image_name,
                       SessionOptions options, std::optional<float> threshold) {
  tagging::Tagger tagger(load_model(tagger_model_file(tagger_path)), std::move(options), {threshold, ""});
  tagging::ImageTags found = tagger.tag({&image}).at(0);
  AutoPrompt a;
  for (const tagging::ScoredTag& t : found.tags) {
    a.tags.push_back(tagger.tags()[size_t(t.index)].name);
    a.scores.push_back(t.score);
  }
  a.prompt = prompt_from_tags(a.tags, image_name);
  return a;
}

}  // namespace vlrt

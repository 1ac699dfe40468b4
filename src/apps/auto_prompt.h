// `vlrt detect --auto`: a tagger names what is in the image and its tags become the detector's
// prompt ("red circle . blue star ."), so no prompt has to be written.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exec/session.h"
#include "pipelines/tagging/tagger.h"
#include "vision/image.h"

namespace vlrt {

// The shipped demo tagger's folder, models/demo-tagger.
inline constexpr const char* kDemoTagger = "demo-tagger";

// The tagger folder (or .onnx) to use: `explicit_path` when given, else the shipped demo tagger;
// fails saying what was looked for and what to pass when there is none.
std::string find_tagger(const std::string& explicit_path);

// DIR/model.onnx for a tagger folder, else the file itself; fails when the folder has none.
std::string tagger_model_file(const std::string& path);

// The tags joined into a detector prompt, "tag . tag ." (each tag trimmed, empty ones and repeats
// left out, in their order); fails when no tag is left, naming `image` and what to do.
std::string prompt_from_tags(const std::vector<std::string>& tags, const std::string& image);

struct AutoPrompt {
  std::vector<std::string> tags;  // above their thresholds, highest score first
  std::vector<float> scores;
  std::string prompt;
};

// Runs the tagger at `tagger_path` (folder or .onnx) on the image and makes the prompt;
// `threshold`, when given, replaces every tag's own.
AutoPrompt auto_prompt(const std::string& tagger_path, const vision::Image& image, const std::string& image_name,
                       SessionOptions options, std::optional<float> threshold = std::nullopt);

}  // namespace vlrt

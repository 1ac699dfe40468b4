// Image tagging with a model of the RAM / RAM++ contract: image float32 [B,3,S,S] (resized to
// SxS with PIL's bilinear filter, ImageNet mean and std on 0..1 pixels) -> one score per tag
// [B,N]. The tag list beside the model names the N tags, each with its threshold and optional
// names in other languages.
//
// Model metadata (all optional): vlrt.tags, the tag list's file name beside the model
// (default tags.json, then tags.txt); vlrt.tag_output, "logits" (the default, as RAM's fc
// gives them: sigmoid is applied here) or "probabilities"; vlrt.threshold, the threshold of
// tags the list gives none.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exec/session.h"
#include "vision/image.h"

namespace vlrt::tagging {

inline constexpr float kDefaultThreshold = 0.68f;  // RAM's

struct Tag {
  std::string name;
  float threshold = kDefaultThreshold;
  std::map<std::string, std::string> names;  // language -> name ("zh" -> ...)

  // The name in `lang` when the list has one, else the name.
  const std::string& name_in(const std::string& lang) const;
};

// tags.json: {"tags": [{"name": "cat", "threshold": 0.7, "names": {"zh": "猫"}}, ...]}, or a
// text file with one name per line; `default_threshold` for tags without one. Fails naming the
// file, the entry and what is wrong.
std::vector<Tag> read_tag_list(const std::string& path, float default_threshold = kDefaultThreshold);

struct ScoredTag {
  int index = 0;
  float score = 0;  // probability
};

struct ImageTags {
  std::vector<float> probabilities;  // one per tag
  std::vector<ScoredTag> tags;       // those above their threshold, highest score first
};

struct TaggerOptions {
  std::optional<float> threshold;  // one threshold for every tag instead of the list's
  std::string tag_list;            // "" : the one the model's metadata names, beside it
};

class Tagger {
 public:
  // Checks the model's input ([B,3,S,S] float32) and that the tag list has one tag per output
  // score; fails naming the model, the list and both sizes.
  Tagger(Model model, SessionOptions session, TaggerOptions options = {});

  Session& session() { return *session_; }
  const std::vector<Tag>& tags() const { return tags_; }
  int image_size() const { return image_size_; }
  const std::string& input_name() const { return input_; }

  // RAM's transform of one image: the batch row [3,S,S] written to `out`.
  void write_pixels(const vision::Image& image, float* out) const;
  // The model's input for a batch of images.
  Tensor pixels(const std::vector<const vision::Image*>& images) const;
  // One run for the whole batch.
  std::vector<ImageTags> tag(const std::vector<const vision::Image*>& images);
  // The tags of one image from its row of the model's output.
  ImageTags select(const float* scores) const;

 private:
  std::unique_ptr<Session> session_;
  std::vector<Tag> tags_;
  std::string input_, output_;
  int image_size_ = 384;
  bool logits_ = true;
  std::optional<float> threshold_;
};

// The tag list file a model uses: `explicit_path` when given, else the metadata's vlrt.tags,
// tags.json or tags.txt beside the model; fails saying what was looked for.
std::string find_tag_list(const Model& model, const std::string& explicit_path);

}  // namespace vlrt::tagging

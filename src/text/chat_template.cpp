#include "text/chat_template.h"

#include <algorithm>

#include "core/error.h"

namespace vlrt::text {

namespace {

constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";
constexpr const char* kVisionStart = "<|vision_start|>";
constexpr const char* kImagePad = "<|image_pad|>";
constexpr const char* kVisionEnd = "<|vision_end|>";
constexpr const char* kDefaultSystem = "You are a helpful assistant.";

}  // namespace

int64_t image_token_count(int64_t t, int64_t h, int64_t w, int64_t merge_size) {
  int64_t merge = merge_size * merge_size;
  if (t <= 0 || h <= 0 || w <= 0 || merge <= 0 || (t * h * w) % merge != 0)
    fail("image grid ", t, "x", h, "x", w, " does not merge into ", merge_size, "x", merge_size, " tokens");
  return t * h * w / merge;
}

ChatTemplate::ChatTemplate(const ByteLevelBpe& tokenizer) : source_(tokenizer.source()) {
  for (const char* token : {kImStart, kImEnd, kVisionStart, kImagePad, kVisionEnd})
    if (tokenizer.find(token) < 0)
      fail(source_, ": the chat template needs the special token ", token, ", which this tokenizer lacks");
  image_pad_ = tokenizer.find(kImagePad);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (!messages.empty() && messages.front().role != "system")
    out += std::string(kImStart) + "system\n" + kDefaultSystem + kImEnd + "\n";
  for (const ChatMessage& m : messages) {
    out += std::string(kImStart) + m.role + "\n";
    for (const ChatPart& part : m.content)
      out += part.kind == ChatPart::Kind::kImage ? std::string(kVisionStart) + kImagePad + kVisionEnd : part.text;
    out += std::string(kImEnd) + "\n";
  }
  if (add_generation_prompt) out += std::string(kImStart) + "assistant\n";
  return out;
}

std::vector<int64_t> ChatTemplate::expand_image_pads(const std::vector<int64_t>& ids,
                                                     const std::vector<int64_t>& tokens_per_image) const {
  size_t pads = size_t(std::count(ids.begin(), ids.end(), image_pad_));
  if (pads != tokens_per_image.size())
    fail(source_, ": the prompt has ", pads, " image placeholders (", kImagePad, ") for ", tokens_per_image.size(),
         " images");
  for (int64_t n : tokens_per_image)
    if (n <= 0) fail(source_, ": an image has ", n, " tokens; each needs at least one");
  std::vector<int64_t> out;
  size_t image = 0;
  for (int64_t id : ids) {
    if (id == image_pad_)
      out.insert(out.end(), size_t(tokens_per_image[image++]), image_pad_);
    else
      out.push_back(id);
  }
  return out;
}

}  // namespace vlrt::text

// Qwen2-VL's chat template (ChatML) rendered as its processor renders it, and the expansion of
// each image's placeholder to the image's token count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/byte_level_bpe.h"

namespace vlrt::text {

struct ChatPart {
  enum class Kind { kText, kImage };
  Kind kind = Kind::kText;
  std::string text;  // for kText
};

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::vector<ChatPart> content;
  static ChatMessage of_text(std::string role, std::string text) {
    return {std::move(role), {{ChatPart::Kind::kText, std::move(text)}}};
  }
};

// Image tokens the language model sees for an image of t x h x w patches: the vision encoder
// merges merge_size x merge_size patches into one.
int64_t image_token_count(int64_t t, int64_t h, int64_t w, int64_t merge_size = 2);

class ChatTemplate {
 public:
  // Fails naming the token and the tokenizer's file when the tokenizer lacks one of the
  // template's special tokens.
  explicit ChatTemplate(const ByteLevelBpe& tokenizer);

  // "<|im_start|>role\ncontent<|im_end|>\n" per message, after a default system message ("You are
  // a helpful assistant.") when the first message is not a system one; an image part is
  // "<|vision_start|><|image_pad|><|vision_end|>"; add_generation_prompt ends with
  // "<|im_start|>assistant\n".
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // The n-th <|image_pad|> in `ids` repeated tokens_per_image[n] times, as Qwen2-VL's processor
  // expands them. Fails when the counts of placeholders and images differ.
  std::vector<int64_t> expand_image_pads(const std::vector<int64_t>& ids,
                                         const std::vector<int64_t>& tokens_per_image) const;

  int64_t image_pad_id() const { return image_pad_; }

 private:
  std::string source_;
  int64_t image_pad_;
};

}  // namespace vlrt::text

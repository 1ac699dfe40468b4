// GroundingDINO's text inputs: the caption normalized and tokenized as the reference does it,
// and the phrase masks and position ids of groundingdino's
// generate_masks_with_special_tokens_and_transfer_map.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "text/bert_tokenizer.h"

namespace vlrt::grounding {

constexpr int64_t kDefaultMaxTextLength = 256;

// A phrase of the caption ("traffic light") and its tokens [begin, end) in input_ids, the
// separator after it excluded: the span whose scores make its label.
struct Phrase {
  std::string text;
  int64_t begin = 0, end = 0;
};

// One caption as the model will see it, before batching.
struct EncodedCaption {
  std::string caption;              // normalized: lower-cased, stripped, ends with "."
  std::vector<std::string> tokens;  // [CLS] ... [SEP]
  std::vector<int64_t> input_ids;
  std::vector<Phrase> phrases;
  std::vector<std::string> dropped_phrases;  // by truncation
  std::string warning;                       // says what truncation dropped; empty if nothing
  size_t first_phrase = 0;  // a pass of a longer prompt: the index of its first phrase in that prompt
};

// As groundingdino's preprocess_caption: lower-case, strip, append "." unless it ends with one.
std::string normalize_caption(std::string_view caption);

// Normalizes and tokenizes; when [CLS] tokens [SEP] exceed max_length, drops whole phrases from
// the end (the rest stays valid: each kept phrase with its separator, then [SEP]) and says so in
// `warning`. Fails on a caption with no words, or whose first phrase alone does not fit.
EncodedCaption encode_caption(const text::BertTokenizer& tokenizer, std::string_view caption,
                              int64_t max_length = kDefaultMaxTextLength);

// A prompt as passes of whole phrases, each at most max_length tokens and, when
// max_phrases_per_pass > 0, at most that many phrases: one pass (the caption as encode_caption
// makes it) when it fits. Fails naming a phrase too long for a pass of its own.
std::vector<EncodedCaption> split_caption(const text::BertTokenizer& tokenizer, std::string_view caption,
                                          int64_t max_length = kDefaultMaxTextLength,
                                          size_t max_phrases_per_pass = 0);

// The model's text inputs for a batch of captions padded with [PAD] to the longest.
struct TextInputs {
  Tensor input_ids;        // int64 [B,L]
  Tensor attention_mask;   // bool [B,L]: false on padding
  Tensor position_ids;     // int64 [B,L]: restart at 0 in each phrase
  Tensor token_type_ids;   // int64 [B,L]: zeros
  Tensor text_token_mask;  // bool [B,L,L]: block-diagonal, one block per phrase and its separator
};
TextInputs make_text_inputs(const text::BertTokenizer& tokenizer, const std::vector<EncodedCaption>& captions);

}  // namespace vlrt::grounding

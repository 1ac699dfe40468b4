#include "pipelines/grounding/text_inputs.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "text/unicode.h"

namespace vlrt::grounding {

using text::CodePoint;
using text::WordPiece;

namespace {

// Tokens [begin, end) of the tokenized caption (no [CLS]) between two separators.
struct Span {
  size_t begin, end;
};

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "'" : ", '") + s + "'";
  return out;
}

}  // namespace

std::string normalize_caption(std::string_view caption) {
  std::vector<CodePoint> lower = text::to_lower(text::decode_utf8(caption), true);
  auto not_space = [](const CodePoint& c) { return !text::is_python_space(c.cp); };
  auto first = std::find_if(lower.begin(), lower.end(), not_space);
  auto last = std::find_if(lower.rbegin(), lower.rend(), not_space);
  std::string out = first < last.base() ? text::encode_utf8({first, last.base()}) : "";
  if (!out.ends_with('.')) out += '.';
  return out;
}

EncodedCaption encode_caption(const text::BertTokenizer& tokenizer, std::string_view caption, int64_t max_length) {
  VLRT_CHECK(max_length >= 3, "the maximum text length must be at least 3 ([CLS], '.', [SEP]), got ",
             max_length);
  EncodedCaption e;
  e.caption = normalize_caption(caption);
  std::vector<WordPiece> body = tokenizer.tokenize(e.caption);
  auto is_separator = [&](int64_t id) {
    return id == tokenizer.dot_id() || (id >= 0 && id == tokenizer.question_id());
  };
  std::vector<Span> spans;
  for (size_t i = 0, start = 0; i < body.size(); i++) {
    if (!is_separator(body[i].id)) continue;
    if (i > start) spans.push_back({start, i});
    start = i + 1;
  }
  auto text_of = [&](const Span& s) {
    return e.caption.substr(body[s.begin].begin, body[s.end - 1].end - body[s.begin].begin);
  };
  if (spans.empty())
    fail("empty caption: '", caption, "' has no words once normalized (to '", e.caption,
         "'); give the object names separated by ' . ', e.g. \"person . bicycle .\"");

  // Whole phrases go, never part of one: a cut phrase would give a label that is not in the prompt.
  size_t keep = body.size();
  size_t budget = size_t(max_length) - 2;
  if (keep > budget) {
    keep = 0;
    for (size_t i = 0; i < budget; i++)
      if (is_separator(body[i].id)) keep = i + 1;
    if (spans[0].end >= keep)
      fail("the first phrase of the caption, '", text_of(spans[0]), "', is ", spans[0].end - spans[0].begin,
           " tokens: with [CLS], its '.' and [SEP] it does not fit in the maximum text length ", max_length);
    for (const Span& s : spans)
      if (s.end >= keep) e.dropped_phrases.push_back(text_of(s));
    e.warning = cat("the caption is ", body.size() + 2, " tokens, more than the maximum text length ",
                    max_length, ": dropped the last ", e.dropped_phrases.size(), " of ", spans.size(),
                    " phrases: ", quoted_list(e.dropped_phrases));
  }

  e.tokens.push_back(tokenizer.token(tokenizer.cls_id()));
  e.input_ids.push_back(tokenizer.cls_id());
  for (size_t i = 0; i < keep; i++) {
    e.tokens.push_back(body[i].text);
    e.input_ids.push_back(body[i].id);
  }
  e.tokens.push_back(tokenizer.token(tokenizer.sep_id()));
  e.input_ids.push_back(tokenizer.sep_id());
  for (const Span& s : spans)
    if (s.end < keep) e.phrases.push_back({text_of(s), int64_t(s.begin) + 1, int64_t(s.end) + 1});
  return e;
}

std::vector<EncodedCaption> split_caption(const text::BertTokenizer& tokenizer, std::string_view caption,
                                          int64_t max_length, size_t max_phrases_per_pass) {
  EncodedCaption whole = encode_caption(tokenizer, caption, std::numeric_limits<int64_t>::max());
  const std::vector<Phrase>& phrases = whole.phrases;
  bool fits = int64_t(whole.input_ids.size()) <= max_length;
  if (fits && (max_phrases_per_pass == 0 || phrases.size() <= max_phrases_per_pass))
    return {encode_caption(tokenizer, caption, max_length)};
  // A pass is [CLS], each phrase and its '.', [SEP].
  for (const Phrase& p : phrases)
    if (p.end - p.begin + 3 > max_length)
      fail("the phrase '", p.text, "' is ", p.end - p.begin, " tokens: with [CLS], its '.' and [SEP] it does not fit ",
           "in the maximum text length ", max_length, "; shorten it");
  std::vector<std::pair<size_t, size_t>> ranges;  // [first, last) phrase of each pass
  int64_t tokens = 2;
  for (size_t i = 0; i < phrases.size(); i++) {
    int64_t cost = phrases[i].end - phrases[i].begin + 1;
    bool full = !ranges.empty() && (tokens + cost > max_length ||
                                    (max_phrases_per_pass > 0 && i - ranges.back().first >= max_phrases_per_pass));
    if (ranges.empty() || full) {
      ranges.push_back({i, i});
      tokens = 2;
    }
    ranges.back().second = i + 1;
    tokens += cost;
  }
  std::vector<EncodedCaption> passes;
  for (auto [first, last] : ranges) {
    std::string text;
    for (size_t i = first; i < last; i++) text += phrases[i].text + " . ";
    EncodedCaption pass = encode_caption(tokenizer, text, max_length);
    pass.first_phrase = first;
    bool same = pass.dropped_phrases.empty() && pass.phrases.size() == last - first;
    for (size_t i = 0; same && i < pass.phrases.size(); i++) same = pass.phrases[i].text == phrases[first + i].text;
    VLRT_CHECK(same, "internal error: the prompt's phrases ", first, "..", last - 1,
               " do not tokenize to the same phrases on their own");
    passes.push_back(std::move(pass));
  }
  return passes;
}

TextInputs make_text_inputs(const text::BertTokenizer& tokenizer, const std::vector<EncodedCaption>& captions) {
  VLRT_CHECK(!captions.empty(), "make_text_inputs: no captions");
  int64_t batch = int64_t(captions.size());
  int64_t len = 0;
  for (const auto& c : captions) len = std::max(len, int64_t(c.input_ids.size()));

  TextInputs t;
  t.input_ids = Tensor(DType::i64, {batch, len});
  t.attention_mask = Tensor::zeros(DType::boolean, {batch, len});
  t.position_ids = Tensor::zeros(DType::i64, {batch, len});
  t.token_type_ids = Tensor::zeros(DType::i64, {batch, len});
  t.text_token_mask = Tensor::zeros(DType::boolean, {batch, len, len});
  int64_t* ids = t.input_ids.data<int64_t>();
  bool* attention = t.attention_mask.data<bool>();
  int64_t* position = t.position_ids.data<int64_t>();
  bool* mask = t.text_token_mask.data<bool>();
  for (int64_t b = 0; b < batch; b++) {
    const auto& c = captions[size_t(b)].input_ids;
    for (int64_t i = 0; i < len; i++) {
      bool real = i < int64_t(c.size());
      ids[b * len + i] = real ? c[size_t(i)] : tokenizer.pad_id();
      attention[b * len + i] = real;
    }
  }

  // A transcription of the reference: every token attends to itself; a special token at
  // column j (not the first or last column) closes the block (previous special, j], whose
  // position ids count from 0. As there, `previous` carries over from one row to the next.
  std::vector<int64_t> specials = {tokenizer.cls_id(), tokenizer.sep_id(), tokenizer.dot_id()};
  if (tokenizer.question_id() >= 0) specials.push_back(tokenizer.question_id());
  for (int64_t i = 0; i < batch * len; i++) mask[i * len + i % len] = true;
  int64_t previous = 0;
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t col = 0; col < len; col++) {
      if (std::find(specials.begin(), specials.end(), ids[b * len + col]) == specials.end()) continue;
      if (col == 0 || col == len - 1) {
        mask[(b * len + col) * len + col] = true;
        position[b * len + col] = 0;
      } else {
        for (int64_t r = previous + 1; r <= col; r++) {
          for (int64_t k = previous + 1; k <= col; k++) mask[(b * len + r) * len + k] = true;
          position[b * len + r] = r - previous - 1;
        }
      }
      previous = col;
    }
  }
  return t;
}

}  // namespace vlrt::grounding

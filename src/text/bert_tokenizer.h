// BERT's uncased WordPiece tokenizer, token for token what HuggingFace's BertTokenizer
// (do_lower_case=True) gives on the same vocab.txt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vlrt::text {

// A WordPiece and the bytes [begin, end) of the text its word came from (every piece of a
// word has the word's span), so that phrases can be cut from the caption as written.
struct WordPiece {
  std::string text;
  int64_t id = 0;
  size_t begin = 0, end = 0;
};

class BertTokenizer {
 public:
  // Reads a vocab.txt: one token per line, id = line number. Fails naming the file when it is
  // missing or lacks one of [CLS] [SEP] [PAD] [UNK] ".".
  static BertTokenizer load(const std::string& vocab_path);
  // `source` names the vocab in error messages.
  BertTokenizer(std::vector<std::string> vocab, std::string source);

  // Clean (drop control characters, normalize whitespace), split off CJK characters, lower-case,
  // strip accents, split punctuation, then greedy longest-match-first WordPiece with "##"
  // continuations; a word longer than 100 characters or with no match is [UNK].
  // Special-token strings in `text` are ordinary text (GroundingDINO lower-cases captions, so
  // the reference never sees them either).
  std::vector<WordPiece> tokenize(std::string_view text) const;

  // The id of a token, or -1 when the vocab lacks it.
  int64_t find(std::string_view token) const;
  const std::string& token(int64_t id) const { return vocab_.at(size_t(id)); }
  int64_t size() const { return int64_t(vocab_.size()); }
  const std::string& source() const { return source_; }

  int64_t cls_id() const { return cls_; }
  int64_t sep_id() const { return sep_; }
  int64_t pad_id() const { return pad_; }
  int64_t unk_id() const { return unk_; }
  int64_t dot_id() const { return dot_; }
  int64_t question_id() const { return question_; }  // -1 when the vocab has no "?"

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  int64_t require(const char* token) const;
  void wordpiece(const std::string& word, const std::vector<size_t>& char_ends, size_t begin, size_t end,
                 std::vector<WordPiece>& out) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  std::string source_;
  int64_t cls_, sep_, pad_, unk_, dot_, question_;
};

}  // namespace vlrt::text

// The byte-level BPE tokenizer of Qwen2 and Qwen2-VL, id for id what HuggingFace's tokenizers
// library gives on the same tokenizer.json.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vlrt::text {

class ByteLevelBpe {
 public:
  // Reads a tokenizer.json: model BPE (merges as "a b" strings or [a, b] pairs), added tokens,
  // normalizer NFC or none, and Qwen2's pre-tokenizer (Sequence of Split with its regex, then
  // ByteLevel without regex). Any other component is refused, naming the file and the component.
  static ByteLevelBpe load(const std::string& tokenizer_json);

  // Added tokens are matched first (leftmost, then longest); the text between them is NFC'd,
  // split by Qwen2's regex, mapped to byte-level symbols and merged by rank. With
  // `parse_special` false, special tokens' text is ordinary text (HuggingFace's
  // split_special_tokens=True). Fails when `text` is not valid UTF-8.
  std::vector<int64_t> encode(std::string_view text, bool parse_special = true) const;
  // The tokens' bytes joined; bytes that are not complete UTF-8 become U+FFFD as HuggingFace's
  // byte-level decoder does. Fails on an id outside the vocab.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const;

  // The id of a token as tokenizer.json writes it (byte-level symbols, or an added token's text),
  // or -1 when there is none.
  int64_t find(std::string_view token) const;
  const std::string& token(int64_t id) const;
  // The bytes a token stands for.
  const std::string& token_bytes(int64_t id) const;
  bool is_special(int64_t id) const;
  int64_t size() const { return int64_t(tokens_.size()); }
  const std::string& source() const { return source_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Merge {
    int32_t rank;
    int64_t merged;
  };
  struct AddedToken {
    std::string text;
    int64_t id;
    bool special;
  };

  ByteLevelBpe() = default;
  void check_id(int64_t id) const;
  // The added token that starts text[pos...] (the longest when several do), or nullptr.
  const AddedToken* added_token_at(std::string_view text, size_t pos, bool parse_special) const;
  void encode_ordinary(std::string_view text, std::vector<int64_t>& out) const;
  void encode_word(std::string_view word, std::vector<int64_t>& out) const;

  std::string source_;
  std::vector<std::string> tokens_;       // as tokenizer.json writes them
  std::vector<std::string> token_bytes_;  // what they stand for
  std::vector<bool> special_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  int64_t byte_ids_[256];
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, merged id
  std::vector<AddedToken> added_;               // longest first
  bool nfc_ = false;
  bool ignore_merges_ = false;

  // Words seen before and their ids; encode() is const and may run on several threads.
  struct WordCache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int64_t>> ids;
  };
  std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();
};

// Text for streaming generation: push each new id, get the text it completes. A character whose
// bytes span several tokens is emitted whole once its last byte arrives, never in halves; bytes
// that can never become a character are U+FFFD, as decode() gives them.
class StreamDecoder {
 public:
  explicit StreamDecoder(const ByteLevelBpe& tokenizer, bool skip_special = false)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  std::string push(int64_t id);
  // What is still held (an unfinished character) as U+FFFD; the decoder is then empty.
  std::string finish();

 private:
  const ByteLevelBpe& tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace vlrt::text

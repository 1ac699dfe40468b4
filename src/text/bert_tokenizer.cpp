#include "text/bert_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/unicode.h"

namespace vlrt::text {

namespace {

constexpr size_t kMaxCharsPerWord = 100;

// Python's universal newlines: "\n", "\r\n" and "\r" all end a line.
std::vector<std::string> split_lines(const std::string& data) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < data.size(); i++) {
    if (data[i] != '\n' && data[i] != '\r') continue;
    lines.push_back(data.substr(start, i - start));
    if (data[i] == '\r' && i + 1 < data.size() && data[i + 1] == '\n') i++;
    start = i + 1;
  }
  if (start < data.size()) lines.push_back(data.substr(start));
  return lines;
}

}  // namespace

BertTokenizer BertTokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, ": no such file (expected a BERT vocab.txt, one token per line)");
  if (fs::is_directory(path, ec)) fail(path, ": is a directory, expected a BERT vocab.txt");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open for reading");
  std::ostringstream data;
  data << f.rdbuf();
  if (f.bad()) fail(path, ": read error");
  std::vector<std::string> vocab = split_lines(data.str());
  if (vocab.empty()) fail(path, ": the vocab file is empty");
  return BertTokenizer(std::move(vocab), path);
}

BertTokenizer::BertTokenizer(std::vector<std::string> vocab, std::string source)
    : vocab_(std::move(vocab)), source_(std::move(source)) {
  // A repeated token keeps its last line, as HuggingFace's load_vocab does.
  for (size_t i = 0; i < vocab_.size(); i++) ids_[vocab_[i]] = int64_t(i);
  cls_ = require("[CLS]");
  sep_ = require("[SEP]");
  pad_ = require("[PAD]");
  unk_ = require("[UNK]");
  dot_ = require(".");
  question_ = find("?");
}

int64_t BertTokenizer::require(const char* token) const {
  int64_t id = find(token);
  if (id < 0)
    fail(source_, ": the vocab has no '", token,
         "' token; GroundingDINO needs [CLS], [SEP], [PAD], [UNK] and '.' ",
         "(is this the BERT vocab.txt the model was exported with?)");
  return id;
}

int64_t BertTokenizer::find(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

// Greedy longest-match-first over one word; `char_ends[i]` is the byte end of its i-th character.
void BertTokenizer::wordpiece(const std::string& word, const std::vector<size_t>& char_ends, size_t begin,
                              size_t end, std::vector<WordPiece>& out) const {
  size_t n = char_ends.size();
  if (n > kMaxCharsPerWord) {
    out.push_back({vocab_[size_t(unk_)], unk_, begin, end});
    return;
  }
  size_t first = out.size();
  std::string piece;
  for (size_t start = 0; start < n;) {
    size_t start_byte = start ? char_ends[start - 1] : 0;
    int64_t id = -1;
    size_t stop = n;
    for (; stop > start; stop--) {
      piece.assign(start ? "##" : "");
      piece.append(word, start_byte, char_ends[stop - 1] - start_byte);
      if ((id = find(piece)) >= 0) break;
    }
    if (id < 0) {
      out.resize(first);
      out.push_back({vocab_[size_t(unk_)], unk_, begin, end});
      return;
    }
    out.push_back({piece, id, begin, end});
    start = stop;
  }
}

std::vector<WordPiece> BertTokenizer::tokenize(std::string_view text) const {
  // Cleaning and whitespace splitting; CJK ideographs are words of their own.
  std::vector<std::vector<CodePoint>> words(1);
  for (const CodePoint& c : decode_utf8(text)) {
    if (c.cp == 0 || c.cp == 0xFFFD || is_control(c.cp)) continue;
    bool cjk = is_cjk(c.cp);
    if (is_bert_whitespace(c.cp) || is_python_space(c.cp) || cjk) {
      if (!words.back().empty()) words.emplace_back();
      if (!cjk) continue;
    }
    words.back().push_back(c);
    if (cjk) words.emplace_back();
  }

  std::vector<WordPiece> out;
  std::string word;
  std::vector<size_t> char_ends;
  for (const auto& w : words) {
    std::vector<CodePoint> chars = strip_accents(to_lower(w, false));
    // Punctuation splits: every punctuation character is a word, and so is each run between them.
    for (size_t i = 0; i < chars.size();) {
      size_t j = i + 1;
      if (!is_punctuation(chars[i].cp))
        while (j < chars.size() && !is_punctuation(chars[j].cp)) j++;
      word.clear();
      char_ends.clear();
      for (size_t k = i; k < j; k++) {
        append_utf8(word, chars[k].cp);
        char_ends.push_back(word.size());
      }
      wordpiece(word, char_ends, chars[i].begin, chars[j - 1].end, out);
      i = j;
    }
  }
  return out;
}

}  // namespace vlrt::text

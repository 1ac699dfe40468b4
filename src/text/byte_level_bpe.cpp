#include "text/byte_level_bpe.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "text/unicode.h"

namespace vlrt::text {

namespace {

using Json = nlohmann::json;

// Qwen2's pre-tokenizer split, as its tokenizer.json writes it; split_qwen2() implements it.
constexpr std::string_view kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr size_t kMaxCachedWords = 1 << 16;

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other bytes
// for U+0100 onwards in order, so that every byte is a visible character.
struct ByteAlphabet {
  char32_t of_byte[256];
  std::unordered_map<char32_t, uint8_t> to_byte;
  ByteAlphabet() {
    char32_t next = 256;
    for (int b = 0; b < 256; b++) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      of_byte[b] = printable ? char32_t(b) : next++;
      to_byte[of_byte[b]] = uint8_t(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

// The bytes a token stands for, as the byte-level decoder reads it: its symbols mapped back to
// bytes, or its own text when one of them is not a byte-level symbol (an added token).
std::string bytes_of(const std::string& token) {
  std::string bytes;
  for (const CodePoint& c : decode_utf8(token)) {
    auto it = byte_alphabet().to_byte.find(c.cp);
    if (it == byte_alphabet().to_byte.end()) return token;
    bytes += char(it->second);
  }
  return bytes;
}

bool is_cr_or_lf(char32_t c) { return c == '\r' || c == '\n'; }
bool is_other(char32_t c) { return !is_white_space(c) && !is_letter(c) && !is_number(c); }

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at cps[i]: the code points it matches, or 0. Under case folding
// the long s (U+017F) is an s.
size_t contraction_at(const std::vector<CodePoint>& cps, size_t i) {
  auto folded = [&](size_t k) -> char32_t {
    if (k >= cps.size()) return 0;
    char32_t c = cps[k].cp;
    return c == 0x17F ? 's' : c >= 'A' && c <= 'Z' ? c + 32 : c;
  };
  if (cps[i].cp != '\'') return 0;
  char32_t a = folded(i + 1), b = folded(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// The length in code points of the match of Qwen2's split regex at cps[i]: its alternatives in
// order, each with the backtracking a regex engine would do.
size_t qwen2_match_at(const std::vector<CodePoint>& cps, size_t i) {
  size_t n = cps.size();
  auto letters_end = [&](size_t j) {
    while (j < n && is_letter(cps[j].cp)) j++;
    return j;
  };
  if (size_t k = contraction_at(cps, i)) return k;
  char32_t c = cps[i].cp;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (is_letter(c)) return letters_end(i + 1) - i;
  if (!is_cr_or_lf(c) && !is_number(c) && i + 1 < n && is_letter(cps[i + 1].cp)) return letters_end(i + 2) - i;
  // \p{N}
  if (is_number(c)) return 1;
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  size_t j = c == ' ' && i + 1 < n && is_other(cps[i + 1].cp) ? i + 1 : i;
  if (is_other(cps[j].cp)) {
    while (j < n && is_other(cps[j].cp)) j++;
    while (j < n && is_cr_or_lf(cps[j].cp)) j++;
    return j - i;
  }
  // c is white space: \s*[\r\n]+ ends at the run's last line break, \s+(?!\S) leaves the run's
  // last character to the word after it, \s+ takes a lone one.
  size_t end = i;
  while (end < n && is_white_space(cps[end].cp)) end++;
  for (size_t k = end; k > i; k--)
    if (is_cr_or_lf(cps[k - 1].cp)) return k - i;
  if (end == n || end - i == 1) return end - i;
  return end - 1 - i;
}

std::string read_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, ": no such file (expected a HuggingFace tokenizer.json)");
  if (fs::is_directory(path, ec)) fail(path, ": is a directory, expected a HuggingFace tokenizer.json");
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open for reading");
  std::ostringstream data;
  data << f.rdbuf();
  return data.str();
}

std::string type_of(const Json& component) {
  if (component.is_null()) return "none";
  if (!component.is_object() || !component.contains("type") || !component["type"].is_string()) return "untyped";
  return component["type"].get<std::string>();
}

bool flag(const Json& component, const char* name) {
  return component.contains(name) && component[name].is_boolean() && component[name].get<bool>();
}

void check_pre_tokenizer(const std::string& path, const Json& pre) {
  const char* expected =
      "; only Qwen2's is supported: Sequence of Split (its regex, behavior Isolated) and ByteLevel "
      "(use_regex false, add_prefix_space false)";
  if (type_of(pre) != "Sequence" || !pre.contains("pretokenizers") || pre["pretokenizers"].size() != 2)
    fail(path, ": unsupported pre_tokenizer ", type_of(pre), expected);
  const Json& split = pre["pretokenizers"][0];
  const Json& byte_level = pre["pretokenizers"][1];
  if (type_of(split) != "Split") fail(path, ": unsupported pre_tokenizer step ", type_of(split), expected);
  std::string regex = split.value("pattern", Json::object()).value("Regex", "");
  if (regex != kQwen2Split) fail(path, ": unsupported Split pattern ", split.value("pattern", Json()).dump(), expected);
  if (split.value("behavior", "") != "Isolated" || flag(split, "invert"))
    fail(path, ": unsupported Split behavior ", split.value("behavior", Json()).dump(), expected);
  if (type_of(byte_level) != "ByteLevel" || flag(byte_level, "use_regex") || flag(byte_level, "add_prefix_space"))
    fail(path, ": unsupported pre_tokenizer step ", byte_level.dump(), expected);
}

void check_components(const std::string& path, const Json& j) {
  if (!j.contains("model") || type_of(j["model"]) != "BPE")
    fail(path, ": unsupported model ", j.contains("model") ? type_of(j["model"]) : "none", "; expected BPE");
  const Json& model = j["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object() || !model.contains("merges") ||
      !model["merges"].is_array())
    fail(path, ": the BPE model lacks its vocab object or merges list");
  for (const char* option : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(option) && !model[option].is_null() && model[option] != "")
      fail(path, ": unsupported BPE option ", option, " = ", model[option].dump());
  if (flag(model, "byte_fallback")) fail(path, ": unsupported BPE option byte_fallback = true");
  std::string normalizer = type_of(j.value("normalizer", Json()));
  if (normalizer != "none" && normalizer != "NFC")
    fail(path, ": unsupported normalizer ", normalizer, "; only NFC or none is supported");
  check_pre_tokenizer(path, j.value("pre_tokenizer", Json()));
  std::string decoder = type_of(j.value("decoder", Json()));
  if (decoder != "ByteLevel") fail(path, ": unsupported decoder ", decoder, "; only ByteLevel is supported");
  std::string post = type_of(j.value("post_processor", Json()));
  if (post != "none" && post != "ByteLevel")
    fail(path, ": unsupported post_processor ", post, "; only ByteLevel or none is supported");
}

}  // namespace

ByteLevelBpe ByteLevelBpe::load(const std::string& path) {
  Json j;
  try {
    j = Json::parse(read_file(path));
  } catch (const Json::exception& e) {
    fail(path, ": not a valid tokenizer.json (", e.what(), ")");
  }
  check_components(path, j);
  const Json& model = j["model"];

  ByteLevelBpe t;
  t.source_ = path;
  t.nfc_ = type_of(j.value("normalizer", Json())) == "NFC";
  t.ignore_merges_ = flag(model, "ignore_merges");
  auto set_token = [&](int64_t id, const std::string& text) {
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) fail(path, ": token ", text, " has id ", id);
    if (size_t(id) >= t.tokens_.size()) {
      t.tokens_.resize(size_t(id) + 1);
      t.token_bytes_.resize(size_t(id) + 1);
      t.special_.resize(size_t(id) + 1);
    }
    t.tokens_[size_t(id)] = text;
    t.token_bytes_[size_t(id)] = bytes_of(text);
    t.ids_[text] = id;
  };
  for (const auto& entry : model["vocab"].items()) {
    if (!entry.value().is_number_integer()) fail(path, ": vocab entry ", entry.key(), " has no integer id");
    set_token(entry.value().get<int64_t>(), entry.key());
  }

  for (const Json& a : j.value("added_tokens", Json::array())) {
    std::string text = a.value("content", "");
    for (const char* option : {"normalized", "lstrip", "rstrip", "single_word"})
      if (flag(a, option)) fail(path, ": added token ", text, " has ", option, " = true, which is not supported");
    if (text.empty()) continue;
    int64_t id = a.value("id", int64_t(-1));
    set_token(id, text);
    t.special_[size_t(id)] = flag(a, "special");
    t.added_.push_back({text, id, flag(a, "special")});
  }
  std::stable_sort(t.added_.begin(), t.added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.text.size() > b.text.size(); });

  for (int b = 0; b < 256; b++) {
    std::string symbol;
    append_utf8(symbol, byte_alphabet().of_byte[b]);
    t.byte_ids_[b] = t.find(symbol);
  }

  const Json& merges = model["merges"];
  for (size_t rank = 0; rank < merges.size(); rank++) {
    const Json& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      std::string s = m.get<std::string>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail(path, ": merge ", rank, " (", s, ") is not two tokens separated by a space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      fail(path, ": merge ", rank, " is ", m.dump(), ", expected \"a b\" or [\"a\", \"b\"]");
    }
    int64_t l = t.find(left), r = t.find(right), merged = t.find(left + right);
    if (l < 0 || r < 0 || merged < 0)
      fail(path, ": merge ", rank, " (", left, " ", right, ") names a token the vocab lacks");
    t.merges_.try_emplace(uint64_t(l) << 32 | uint64_t(r), Merge{int32_t(rank), merged});
  }
  return t;
}

int64_t ByteLevelBpe::find(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

void ByteLevelBpe::check_id(int64_t id) const {
  if (id < 0 || id >= size()) fail(source_, ": token id ", id, " is outside the vocab (", size(), " tokens)");
}

const std::string& ByteLevelBpe::token(int64_t id) const {
  check_id(id);
  return tokens_[size_t(id)];
}

const std::string& ByteLevelBpe::token_bytes(int64_t id) const {
  check_id(id);
  return token_bytes_[size_t(id)];
}

bool ByteLevelBpe::is_special(int64_t id) const {
  check_id(id);
  return special_[size_t(id)];
}

const ByteLevelBpe::AddedToken* ByteLevelBpe::added_token_at(std::string_view text, size_t pos,
                                                             bool parse_special) const {
  for (const AddedToken& a : added_)
    if ((parse_special || !a.special) && text.compare(pos, a.text.size(), a.text) == 0) return &a;
  return nullptr;
}

std::vector<int64_t> ByteLevelBpe::encode(std::string_view text, bool parse_special) const {
  if (size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
    fail(source_, ": cannot encode text that is not valid UTF-8 (byte ", bad, " of ", text.size(), ")");
  std::vector<int64_t> out;
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* added = added_token_at(text, pos, parse_special);
    if (!added) {
      pos++;
      continue;
    }
    encode_ordinary(text.substr(start, pos - start), out);
    out.push_back(added->id);
    pos += added->text.size();
    start = pos;
  }
  encode_ordinary(text.substr(start), out);
  return out;
}

void ByteLevelBpe::encode_ordinary(std::string_view text, std::vector<int64_t>& out) const {
  if (text.empty()) return;
  std::string normalized = nfc_ ? nfc(text) : std::string(text);
  std::vector<CodePoint> cps = decode_utf8(normalized);
  for (size_t i = 0; i < cps.size();) {
    size_t len = qwen2_match_at(cps, i);
    encode_word(std::string_view(normalized).substr(cps[i].begin, cps[i + len - 1].end - cps[i].begin), out);
    i += len;
  }
}

void ByteLevelBpe::encode_word(std::string_view word, std::vector<int64_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->ids.find(std::string(word));
    if (it != cache_->ids.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> symbols;
  std::string as_symbols;
  for (char byte : word) append_utf8(as_symbols, byte_alphabet().of_byte[uint8_t(byte)]);
  if (int64_t whole = ignore_merges_ ? find(as_symbols) : -1; whole >= 0) {
    symbols.push_back(whole);
  } else {
    for (char byte : word)
      if (int64_t id = byte_ids_[uint8_t(byte)]; id >= 0) symbols.push_back(id);
    // The lowest-ranked adjacent pair merges first, the leftmost among equals, as HuggingFace's
    // priority queue does.
    while (symbols.size() > 1) {
      const Merge* best = nullptr;
      size_t at = 0;
      for (size_t i = 0; i + 1 < symbols.size(); i++) {
        auto it = merges_.find(uint64_t(symbols[i]) << 32 | uint64_t(symbols[i + 1]));
        if (it != merges_.end() && (!best || it->second.rank < best->rank)) {
          best = &it->second;
          at = i;
        }
      }
      if (!best) break;
      symbols[at] = best->merged;
      symbols.erase(symbols.begin() + std::ptrdiff_t(at) + 1);
    }
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (cache_->ids.size() >= kMaxCachedWords) cache_->ids.clear();
  cache_->ids.emplace(std::string(word), std::move(symbols));
}

std::string ByteLevelBpe::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int64_t id : ids)
    if (!(skip_special && is_special(id))) bytes += token_bytes(id);
  return utf8_lossy(bytes);
}

std::string StreamDecoder::push(int64_t id) {
  if (!(skip_special_ && tokenizer_.is_special(id))) pending_ += tokenizer_.token_bytes(id);
  size_t held = incomplete_utf8_tail(pending_);
  std::string text = utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - held));
  pending_.erase(0, pending_.size() - held);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text = utf8_lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace vlrt::text

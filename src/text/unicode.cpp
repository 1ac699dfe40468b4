#include "text/unicode.h"

#include <algorithm>
#include <iterator>

namespace vlrt::text {

namespace {

struct CodeRange {
  uint32_t first, last;
};
struct LowerRun {
  uint32_t first, last;
  int32_t delta;
  uint32_t stride;
};
struct Decomposition {
  uint32_t cp;
  uint32_t out[3];
};

#include "text/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodeRange (&table)[N], char32_t cp) {
  auto it = std::upper_bound(std::begin(table), std::end(table), uint32_t(cp),
                             [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

constexpr char32_t kReplacement = 0xFFFD;
constexpr char32_t kCapitalSigma = 0x3A3, kSmallSigma = 0x3C3, kFinalSigma = 0x3C2;

char32_t lower_one(char32_t cp) {
  auto it = std::upper_bound(std::begin(kLower), std::end(kLower), uint32_t(cp),
                             [](uint32_t c, const LowerRun& r) { return c < r.first; });
  if (it == std::begin(kLower)) return cp;
  const LowerRun& r = *std::prev(it);
  if (cp > r.last || (cp - r.first) % r.stride != 0) return cp;
  return char32_t(int64_t(cp) + r.delta);
}

bool is_cased(char32_t cp) { return in_ranges(kCased, cp); }
bool is_case_ignorable(char32_t cp) { return in_ranges(kCaseIgnorable, cp); }

// CPython's handle_capital_sigma: final when a cased letter comes before (skipping
// case-ignorables) and none comes after.
bool is_final_sigma(const std::vector<CodePoint>& text, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(text[j - 1].cp)) j--;
  if (j == 0 || !is_cased(text[j - 1].cp)) return false;
  size_t k = i + 1;
  while (k < text.size() && is_case_ignorable(text[k].cp)) k++;
  return k == text.size() || !is_cased(text[k].cp);
}

}  // namespace

std::vector<CodePoint> decode_utf8(std::string_view s) {
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // shortest form per length
  std::vector<CodePoint> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto byte = [&](size_t k) { return uint8_t(s[i + k]); };
    uint8_t c = byte(0);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool valid = len > 0 && i + len <= s.size();
    char32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; valid && k < len; k++) {
      valid = (byte(k) & 0xC0) == 0x80;
      cp = (cp << 6) | (byte(k) & 0x3F);
    }
    valid = valid && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!valid) {
      cp = kReplacement;
      len = 1;
    }
    out.push_back({cp, uint32_t(i), uint32_t(i + len)});
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(const std::vector<CodePoint>& text) {
  std::string out;
  for (const CodePoint& c : text) append_utf8(out, c.cp);
  return out;
}

bool is_control(char32_t cp) { return cp != '\t' && cp != '\n' && cp != '\r' && in_ranges(kControl, cp); }
bool is_bert_whitespace(char32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || in_ranges(kSpaceSeparator, cp);
}
bool is_python_space(char32_t cp) { return in_ranges(kPythonSpace, cp); }

bool is_punctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  return in_ranges(kPunctuation, cp);
}

bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::vector<CodePoint> to_lower(const std::vector<CodePoint>& text, bool final_sigma) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); i++) {
    CodePoint c = text[i];
    if (c.cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> "i" + COMBINING DOT ABOVE
      out.push_back({'i', c.begin, c.end});
      out.push_back({0x307, c.begin, c.end});
      continue;
    }
    c.cp = c.cp == kCapitalSigma ? (final_sigma && is_final_sigma(text, i) ? kFinalSigma : kSmallSigma)
                                 : lower_one(c.cp);
    out.push_back(c);
  }
  return out;
}

std::vector<CodePoint> strip_accents(const std::vector<CodePoint>& text) {
  // Hangul syllables decompose algorithmically into conjoining jamo (Unicode 3.12).
  constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
  constexpr char32_t kVCount = 21, kTCount = 28, kSCount = 11172;
  std::vector<CodePoint> out;
  out.reserve(text.size());
  for (const CodePoint& c : text) {
    if (c.cp >= kSBase && c.cp < kSBase + kSCount) {
      char32_t s = c.cp - kSBase;
      out.push_back({kLBase + s / (kVCount * kTCount), c.begin, c.end});
      out.push_back({kVBase + (s % (kVCount * kTCount)) / kTCount, c.begin, c.end});
      if (s % kTCount) out.push_back({kTBase + s % kTCount, c.begin, c.end});
      continue;
    }
    auto it = std::lower_bound(std::begin(kDecomposition), std::end(kDecomposition), uint32_t(c.cp),
                               [](const Decomposition& d, uint32_t cp) { return d.cp < cp; });
    if (it != std::end(kDecomposition) && it->cp == c.cp) {
      for (uint32_t d : it->out)
        if (d) out.push_back({d, c.begin, c.end});
    } else if (!in_ranges(kMarkNonspacing, c.cp)) {
      out.push_back(c);
    }
  }
  return out;
}

size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < n; k++) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 2) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace vlrt::text

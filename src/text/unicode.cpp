#include "text/unicode.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>

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
struct CombiningClassRun {
  uint32_t first, last;
  uint8_t ccc;
};
struct CanonicalDecomposition {
  uint32_t cp, first, second;
  bool composes;
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

// Hangul syllables (de)compose algorithmically into conjoining jamo (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kSCount = 11172;

uint8_t combining_class(char32_t cp) {
  auto it = std::upper_bound(std::begin(kCombiningClass), std::end(kCombiningClass), uint32_t(cp),
                             [](uint32_t c, const CombiningClassRun& r) { return c < r.first; });
  return it != std::begin(kCombiningClass) && cp <= std::prev(it)->last ? std::prev(it)->ccc : 0;
}

void decompose_canonical(char32_t cp, std::u32string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out += kLBase + s / (kVCount * kTCount);
    out += kVBase + (s % (kVCount * kTCount)) / kTCount;
    if (s % kTCount) out += kTBase + s % kTCount;
    return;
  }
  auto it = std::lower_bound(std::begin(kCanonicalDecomposition), std::end(kCanonicalDecomposition), uint32_t(cp),
                             [](const CanonicalDecomposition& d, uint32_t c) { return d.cp < c; });
  if (it == std::end(kCanonicalDecomposition) || it->cp != cp) {
    out += cp;
    return;
  }
  decompose_canonical(it->first, out);
  if (it->second) decompose_canonical(it->second, out);
}

// The primary composite of a starter and the character that follows it, or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  static const std::unordered_map<uint64_t, char32_t> pairs = [] {
    std::unordered_map<uint64_t, char32_t> m;
    for (const CanonicalDecomposition& d : kCanonicalDecomposition)
      if (d.composes) m[uint64_t(d.first) << 32 | d.second] = d.cp;
    return m;
  }();
  auto it = pairs.find(uint64_t(a) << 32 | b);
  return it == pairs.end() ? 0 : it->second;
}

// Canonical composition (UAX #15): a mark joins the last starter unless a mark of the same or
// a higher class, or a starter, stands between them.
std::u32string compose_canonical(const std::u32string& decomposed) {
  std::u32string out;
  size_t starter = std::u32string::npos;
  uint8_t last_class = 0;
  for (char32_t c : decomposed) {
    uint8_t cc = combining_class(c);
    if (starter != std::u32string::npos) {
      bool adjacent = starter + 1 == out.size();
      bool unblocked = adjacent || (last_class != 0 && last_class < cc);
      if (char32_t composite = unblocked ? compose_pair(out[starter], c) : 0) {
        out[starter] = composite;
        continue;
      }
    }
    if (cc == 0) starter = out.size();
    last_class = cc;
    out += c;
  }
  return out;
}

// The bytes at s[i...] as UTF-8 (Unicode's table 3-7): the length of a whole character, or
// of the longest prefix of one (at least 1 byte); `at_end` when that prefix reaches the end.
struct Utf8Step {
  size_t len;
  bool whole, at_end;
};

Utf8Step utf8_step(std::string_view s, size_t i) {
  auto b = uint8_t(s[i]);
  if (b < 0x80) return {1, true, false};
  size_t width;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    width = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    width = 3;
    lo = b == 0xE0 ? 0xA0 : 0x80;
    hi = b == 0xED ? 0x9F : 0xBF;
  } else if (b >= 0xF0 && b <= 0xF4) {
    width = 4;
    lo = b == 0xF0 ? 0x90 : 0x80;
    hi = b == 0xF4 ? 0x8F : 0xBF;
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k < width; k++) {
    if (i + k >= s.size()) return {k, false, true};
    auto c = uint8_t(s[i + k]);
    if (c < lo || c > hi) return {k, false, false};
    lo = 0x80, hi = 0xBF;
  }
  return {width, true, false};
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

bool is_letter(char32_t cp) { return in_ranges(kLetter, cp); }
bool is_number(char32_t cp) { return in_ranges(kNumber, cp); }
bool is_white_space(char32_t cp) { return in_ranges(kWhiteSpace, cp); }

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

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Utf8Step step = utf8_step(s, i);
    if (step.whole)
      out.append(s.substr(i, step.len));
    else
      append_utf8(out, kReplacement);
    i += step.len;
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t i = s.size() > 3 ? s.size() - 3 : 0; i < s.size(); i++) {
    // A lead byte is never a continuation byte, so it starts a character wherever it stands.
    if (uint8_t(s[i]) >= 0xC2 && utf8_step(s, i).at_end) return s.size() - i;
  }
  return 0;
}

std::string nfc(std::string_view text) {
  // Every code point below U+0300 is its own NFC, and only those are written with bytes below 0xCC.
  if (std::none_of(text.begin(), text.end(), [](char c) { return uint8_t(c) >= 0xCC; })) return std::string(text);
  std::u32string decomposed;
  for (const CodePoint& c : decode_utf8(text)) decompose_canonical(c.cp, decomposed);
  // Canonical ordering: each run of marks sorted by combining class, stably.
  for (size_t i = 0; i < decomposed.size();) {
    if (combining_class(decomposed[i]) == 0) {
      i++;
      continue;
    }
    size_t end = i;
    while (end < decomposed.size() && combining_class(decomposed[end]) != 0) end++;
    std::stable_sort(decomposed.begin() + i, decomposed.begin() + end,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }
  std::string out;
  for (char32_t c : compose_canonical(decomposed)) append_utf8(out, c);
  return out;
}

}  // namespace vlrt::text

// The byte-level BPE tokenizer against transformers' Qwen2TokenizerFast on the fixture
// tokenizer (tests/fixtures/vlm/bpe_vectors.json, made by tools/make_bpe_vectors.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/error.h"
#include "text/byte_level_bpe.h"
#include "text/unicode.h"

namespace vlrt::text {

namespace {

const std::string kTokenizer = test::source_path("tests/fixtures/vlm/tokenizer/tokenizer.json");

const nlohmann::json& vectors() {
  static const nlohmann::json j =
      nlohmann::json::parse(std::ifstream(test::source_path("tests/fixtures/vlm/bpe_vectors.json")));
  return j;
}

const ByteLevelBpe& tokenizer() {
  static const ByteLevelBpe t = ByteLevelBpe::load(kTokenizer);
  return t;
}

std::vector<int64_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int64_t>>(); }

// The fixture tokenizer.json with one component replaced.
std::string tokenizer_with(const std::string& name, const nlohmann::json& pointer_value, const std::string& key) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kTokenizer));
  j[nlohmann::json::json_pointer(key)] = pointer_value;
  std::string path = test::temp_dir("bpe_" + name) + "/tokenizer.json";
  std::ofstream(path) << j.dump();
  return path;
}

}  // namespace

TEST(ByteLevelBpe, EveryVectorIsIdExact) {
  size_t compared = 0, specials_as_text = 0;
  for (const auto& c : vectors()["encode"]) {
    std::string text = c["text"];
    EXPECT_EQ(tokenizer().encode(text), ids_of(c["ids"])) << nlohmann::json(text).dump();
    std::vector<int64_t> plain = ids_of(c.value("ids_specials_as_text", c["ids"]));
    EXPECT_EQ(tokenizer().encode(text, /*parse_special=*/false), plain) << nlohmann::json(text).dump();
    specials_as_text += c.contains("ids_specials_as_text");
    compared++;
  }
  EXPECT_GE(compared, 500u);
  EXPECT_GT(specials_as_text, 0u);
}

TEST(ByteLevelBpe, DecodeMatchesTheReference) {
  for (const auto& c : vectors()["encode"])
    EXPECT_EQ(tokenizer().decode(ids_of(c["ids"])), c["decode"].get<std::string>()) << c["text"].dump();
  // Random ids cut characters between tokens: the reference's U+FFFD, and its skipping of specials.
  for (const auto& c : vectors()["decode"]) {
    EXPECT_EQ(tokenizer().decode(ids_of(c["ids"])), c["decode"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(tokenizer().decode(ids_of(c["ids"]), /*skip_special=*/true), c["decode_skip_special"].get<std::string>())
        << c["ids"].dump();
  }
}

TEST(ByteLevelBpe, DecodeRoundTripsNormalizedText) {
  for (std::string text : {"Is there a red star? 你好 😀", "<|im_start|>user\n👨‍👩‍👧 café\r\n\t x<|im_end|>"})
    EXPECT_EQ(tokenizer().decode(tokenizer().encode(text)), nfc(text));
}

TEST(ByteLevelBpe, FindTokenAndSize) {
  EXPECT_EQ(tokenizer().size(), 762);
  EXPECT_EQ(tokenizer().find("<|im_start|>"), 749);
  EXPECT_EQ(tokenizer().find("<|image_pad|>"), 760);
  EXPECT_EQ(tokenizer().find("<|no_such|>"), -1);
  EXPECT_EQ(tokenizer().token(760), "<|image_pad|>");
  EXPECT_TRUE(tokenizer().is_special(760));
  EXPECT_FALSE(tokenizer().is_special(0));
  int64_t space = tokenizer().find("\xC4\xA0");  // "Ġ", the byte-level symbol of a space
  ASSERT_GE(space, 0);
  EXPECT_EQ(tokenizer().token_bytes(space), " ");
  EXPECT_NE(test::error_of([] { tokenizer().token(762); }).find("token id 762 is outside the vocab"), std::string::npos);
}

TEST(ByteLevelBpe, StreamDecoderNeverEmitsHalfACharacter) {
  // An emoji with a skin tone modifier, a ZWJ family and CJK: the fixture vocab splits them into bytes.
  std::string text = "Hi 👍🏽 👨‍👩‍👧 你好!";
  std::vector<int64_t> ids = tokenizer().encode(text);
  StreamDecoder stream(tokenizer());
  std::string streamed;
  size_t held_back = 0;
  for (int64_t id : ids) {
    std::string piece = stream.push(id);
    EXPECT_EQ(invalid_utf8_at(piece), std::string::npos);
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "no U+FFFD for a character still arriving";
    held_back += piece.empty();
    streamed += piece;
  }
  streamed += stream.finish();
  EXPECT_EQ(streamed, text);
  EXPECT_GT(held_back, 0u) << "the fixture should split a character across tokens";
}

TEST(ByteLevelBpe, StreamDecoderAgreesWithDecodeOnBrokenBytes) {
  for (const auto& c : vectors()["decode"]) {
    StreamDecoder stream(tokenizer());
    std::string streamed;
    for (int64_t id : ids_of(c["ids"])) streamed += stream.push(id);
    streamed += stream.finish();
    EXPECT_EQ(streamed, c["decode"].get<std::string>()) << c["ids"].dump();
  }
}

TEST(ByteLevelBpe, InvalidUtf8TextIsRefused) {
  std::string error = test::error_of([] { tokenizer().encode("ab\xFF"); });
  EXPECT_NE(error.find("not valid UTF-8 (byte 2"), std::string::npos) << error;
}

TEST(ByteLevelBpe, MissingFileIsNamed) {
  std::string error = test::error_of([] { ByteLevelBpe::load("/nonexistent/tokenizer.json"); });
  EXPECT_NE(error.find("/nonexistent/tokenizer.json: no such file"), std::string::npos) << error;
}

TEST(ByteLevelBpe, UnsupportedComponentsAreNamed) {
  struct Case {
    const char* name;
    const char* pointer;
    nlohmann::json value;
    const char* expected;
  };
  std::vector<Case> cases = {
      {"whitespace", "/pre_tokenizer", {{"type", "Whitespace"}}, "unsupported pre_tokenizer Whitespace"},
      {"pattern", "/pre_tokenizer/pretokenizers/0/pattern", {{"Regex", "\\s+"}}, "unsupported Split pattern"},
      {"nfkc", "/normalizer", {{"type", "NFKC"}}, "unsupported normalizer NFKC"},
      {"wordpiece", "/decoder", {{"type", "WordPiece"}}, "unsupported decoder WordPiece"},
      {"unigram", "/model/type", "Unigram", "unsupported model Unigram"},
      {"merge", "/model/merges/0", "a b c", "merge 0 (a b c) is not two tokens"},
  };
  for (const Case& c : cases) {
    std::string path = tokenizer_with(c.name, c.value, c.pointer);
    std::string error = test::error_of([&] { ByteLevelBpe::load(path); });
    EXPECT_NE(error.find(path + ": " + c.expected), std::string::npos) << c.name << ": " << error;
  }
}

TEST(ByteLevelBpe, MergesAsStringsEqualMergesAsPairs) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kTokenizer));
  for (auto& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  std::string path = test::temp_dir("bpe_string_merges") + "/tokenizer.json";
  std::ofstream(path) << j.dump();
  ByteLevelBpe strings = ByteLevelBpe::load(path);
  for (const auto& c : vectors()["encode"]) EXPECT_EQ(strings.encode(c["text"].get<std::string>()), ids_of(c["ids"]));
}

TEST(ByteLevelBpe, TokenizeCommandPrintsIdsAndDecode) {
  std::vector<int64_t> ids = tokenizer().encode("<|im_start|>Is there a star? 你好");
  std::string expected = "input_ids:";
  for (int64_t id : ids) expected.append(" ").append(std::to_string(id));
  expected += "\n";
  auto r = test::run_cli("tokenize --tokenizer " + kTokenizer + " --decode '<|im_start|>Is there a star? 你好'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decode: <|im_start|>Is there a star? 你好\n"), std::string::npos) << r.output;

  auto neither = test::run_cli("tokenize 'text'");
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.output.find("--vocab or --tokenizer"), std::string::npos) << neither.output;
  auto missing = test::run_cli("tokenize --tokenizer /nonexistent/tokenizer.json 'text'");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("/nonexistent/tokenizer.json: no such file"), std::string::npos) << missing.output;
}

TEST(Unicode, NfcComposesReordersAndKeepsExclusions) {
  EXPECT_EQ(nfc("cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");                   // Hangul L V T
  EXPECT_EQ(nfc("e\u0323\u0301"), nfc("e\u0301\u0323"));            // canonical ordering
  EXPECT_EQ(nfc("\u212b"), "\u00c5");                               // singleton ANGSTROM SIGN
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");                         // a composition exclusion
  EXPECT_EQ(nfc("\u0301a"), "\u0301a");                             // a mark with no starter
}

TEST(Unicode, Utf8LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("a\xE4\xBD"), "a\uFFFD");            // one for a truncated sequence
  EXPECT_EQ(utf8_lossy("\xE0\x80" "b"), "\uFFFD\uFFFD" "b");  // E0 80 is no prefix of a character
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(incomplete_utf8_tail("x\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("x\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("x\xFF"), 0u);
}

}  // namespace vlrt::text

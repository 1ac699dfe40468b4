// The GroundingDINO text side against the reference: transformers' BertTokenizer and
// groundingdino's mask function on a corpus of tricky captions
// (tests/fixtures/grounding/tokenizer_vectors.json, from tools/make_tokenizer_vectors.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "pipelines/grounding/text_inputs.h"

namespace vlrt::grounding {

using test::source_path;
using text::BertTokenizer;

namespace {

const std::string kVocab = source_path("tests/fixtures/grounding/vocab.txt");

const nlohmann::json& vectors() {
  static const nlohmann::json j =
      nlohmann::json::parse(std::ifstream(source_path("tests/fixtures/grounding/tokenizer_vectors.json")));
  return j;
}

const BertTokenizer& tokenizer() {
  static const BertTokenizer t = BertTokenizer::load(kVocab);
  return t;
}

template <class T>
std::vector<int64_t> row(const Tensor& t, int64_t b) {
  int64_t n = t.dim(1);
  return std::vector<int64_t>(t.data<T>() + b * n, t.data<T>() + (b + 1) * n);
}

// The [L,L] mask of batch item b from the fixture's runs of ones per row.
std::vector<int64_t> mask_from_runs(const nlohmann::json& rows) {
  size_t n = rows.size();
  std::vector<int64_t> m(n * n, 0);
  for (size_t r = 0; r < n; r++)
    for (size_t k = 0; k + 1 < rows[r].size(); k += 2)
      for (int64_t c = rows[r][k]; c < int64_t(rows[r][k + 1]); c++) m[r * n + size_t(c)] = 1;
  return m;
}

std::vector<int64_t> mask_of(const Tensor& mask, int64_t b) {
  int64_t n = mask.dim(1);
  const bool* p = mask.data<bool>() + b * n * n;
  return std::vector<int64_t>(p, p + n * n);
}

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = test::temp_dir("tokenizer_" + name) + "/vocab.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST(Tokenizer, MatchesReferenceOnEveryVector) {
  const auto& cases = vectors()["cases"];
  ASSERT_GE(cases.size(), 300u);
  int checked = 0;
  for (const auto& c : cases) {
    std::string caption = c["caption"];
    int64_t max_length = c["max_length"];
    SCOPED_TRACE(testing::Message() << "caption " << nlohmann::json(caption).dump() << ", max length "
                                    << max_length);
    EXPECT_EQ(normalize_caption(caption), c["normalized"].get<std::string>());
    if (c.contains("error")) {
      try {
        encode_caption(tokenizer(), caption, max_length);
        ADD_FAILURE() << "expected an error: " << c["error"];
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << e.what();
      }
      continue;
    }
    EncodedCaption e = encode_caption(tokenizer(), caption, max_length);
    ASSERT_EQ(e.tokens, c["tokens"].get<std::vector<std::string>>());
    ASSERT_EQ(e.input_ids, c["input_ids"].get<std::vector<int64_t>>());
    TextInputs t = make_text_inputs(tokenizer(), {e});
    EXPECT_EQ(row<int64_t>(t.input_ids, 0), e.input_ids);
    EXPECT_EQ(row<bool>(t.attention_mask, 0), c["attention_mask"].get<std::vector<int64_t>>());
    EXPECT_EQ(row<int64_t>(t.position_ids, 0), c["position_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(row<int64_t>(t.token_type_ids, 0), c["token_type_ids"].get<std::vector<int64_t>>());
    EXPECT_EQ(mask_of(t.text_token_mask, 0), mask_from_runs(c["text_token_mask"]));
    std::vector<std::vector<int64_t>> spans;
    for (const auto& p : e.phrases) spans.push_back({p.begin, p.end});
    EXPECT_EQ(spans, c["phrases"].get<std::vector<std::vector<int64_t>>>());
    EXPECT_EQ(e.dropped_phrases.size(), c["dropped"].get<size_t>());
    EXPECT_EQ(e.warning.empty(), e.dropped_phrases.empty());
    checked++;
  }
  EXPECT_GE(checked, 300);
}

TEST(Tokenizer, BatchesPadLikeReference) {
  const auto& cases = vectors()["cases"];
  for (const auto& batch : vectors()["batches"]) {
    std::vector<EncodedCaption> captions;
    for (size_t i : batch["cases"].get<std::vector<size_t>>())
      captions.push_back(
          encode_caption(tokenizer(), cases[i]["caption"].get<std::string>(), cases[i]["max_length"]));
    TextInputs t = make_text_inputs(tokenizer(), captions);
    int64_t len = t.input_ids.dim(1);
    ASSERT_EQ(t.text_token_mask.shape(), Shape({int64_t(captions.size()), len, len}));
    for (int64_t b = 0; b < int64_t(captions.size()); b++) {
      EXPECT_EQ(row<int64_t>(t.input_ids, b), batch["input_ids"][b].get<std::vector<int64_t>>());
      EXPECT_EQ(row<bool>(t.attention_mask, b), batch["attention_mask"][b].get<std::vector<int64_t>>());
      EXPECT_EQ(row<int64_t>(t.position_ids, b), batch["position_ids"][b].get<std::vector<int64_t>>());
      EXPECT_EQ(row<int64_t>(t.token_type_ids, b), std::vector<int64_t>(size_t(len), 0));
      EXPECT_EQ(mask_of(t.text_token_mask, b), mask_from_runs(batch["text_token_mask"][b]));
    }
  }
}

TEST(Tokenizer, TensorsHaveTheModelContractTypes) {
  TextInputs t = make_text_inputs(tokenizer(), {encode_caption(tokenizer(), "person . bicycle")});
  EXPECT_EQ(t.input_ids.describe(), "int64[1,6]");
  EXPECT_EQ(t.attention_mask.describe(), "bool[1,6]");
  EXPECT_EQ(t.position_ids.describe(), "int64[1,6]");
  EXPECT_EQ(t.token_type_ids.describe(), "int64[1,6]");
  EXPECT_EQ(t.text_token_mask.describe(), "bool[1,6,6]");
}

TEST(Tokenizer, PhrasesAreCutFromTheCaption) {
  EncodedCaption e = encode_caption(tokenizer(), "  Café au Lait . a DOG's toy ? T-shirt  ");
  EXPECT_EQ(e.caption, "café au lait . a dog's toy ? t-shirt.");
  ASSERT_EQ(e.phrases.size(), 3u);
  EXPECT_EQ(e.phrases[0].text, "café au lait");
  EXPECT_EQ(e.phrases[1].text, "a dog's toy");
  EXPECT_EQ(e.phrases[2].text, "t-shirt");
  EXPECT_EQ(e.tokens[size_t(e.phrases[2].begin)], "t");
  EXPECT_EQ(e.tokens[size_t(e.phrases[2].end)], ".");
}

TEST(Tokenizer, InvalidUtf8IsDropped) {
  // As BERT drops U+FFFD: each invalid byte becomes one and goes.
  EncodedCaption e = encode_caption(tokenizer(), "cat\xff\xfe . dog\xc3 . \xe2\x82");
  EXPECT_EQ(e.tokens, (std::vector<std::string>{"[CLS]", "cat", ".", "dog", ".", ".", "[SEP]"}));
}

TEST(Tokenizer, TruncationWarningNamesDroppedPhrases) {
  EncodedCaption e = encode_caption(tokenizer(), "person . bicycle . traffic light . fire hydrant", 7);
  EXPECT_EQ(e.tokens, (std::vector<std::string>{"[CLS]", "person", ".", "bicycle", ".", "[SEP]"}));
  EXPECT_EQ(e.dropped_phrases, (std::vector<std::string>{"traffic light", "fire hydrant"}));
  EXPECT_NE(e.warning.find("'traffic light', 'fire hydrant'"), std::string::npos) << e.warning;
  EXPECT_NE(e.warning.find("maximum text length 7"), std::string::npos) << e.warning;
  EXPECT_TRUE(encode_caption(tokenizer(), "person . bicycle . traffic light").warning.empty());
}

TEST(Tokenizer, FirstPhraseTooLongIsAnError) {
  try {
    encode_caption(tokenizer(), "a large red traffic light . car", 5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a large red traffic light', is 5 tokens"), std::string::npos)
        << e.what();
  }
}

TEST(Tokenizer, EmptyCaptionIsAnError) {
  for (const char* caption : {"", "   ", " . ", "...", "?"}) {
    try {
      encode_caption(tokenizer(), caption);
      ADD_FAILURE() << "expected an error for '" << caption << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("empty caption"), std::string::npos) << e.what();
    }
  }
}

TEST(Tokenizer, SpecialIdsComeFromTheVocab) {
  // Another order, Windows line ends and no "?": ids follow the lines.
  BertTokenizer t =
      BertTokenizer::load(write_file("order", "cat\r\n.\r\n[SEP]\r\n[CLS]\r\n[UNK]\r\n[PAD]\r\n##s\r\n"));
  EXPECT_EQ(t.size(), 7);
  EXPECT_EQ(t.cls_id(), 3);
  EXPECT_EQ(t.sep_id(), 2);
  EXPECT_EQ(t.pad_id(), 5);
  EXPECT_EQ(t.question_id(), -1);
  EncodedCaption e = encode_caption(t, "Cats? dog");
  EXPECT_EQ(e.input_ids, (std::vector<int64_t>{3, 0, 6, 4, 4, 1, 2}));
  TextInputs batch = make_text_inputs(t, {e, encode_caption(t, "cat")});
  EXPECT_EQ(row<int64_t>(batch.input_ids, 1), (std::vector<int64_t>{3, 0, 1, 2, 5, 5, 5}));
  EXPECT_EQ(row<bool>(batch.attention_mask, 1), (std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0}));
}

TEST(Tokenizer, CliPrintsJson) {
  auto r = test::run_cli("tokenize --vocab " + kVocab + " --json \"Person . Traffic light\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["caption"], "person . traffic light.");
  EXPECT_EQ(j["tokens"], nlohmann::json({"[CLS]", "person", ".", "traffic", "light", ".", "[SEP]"}));
  EXPECT_EQ(j["input_ids"].size(), 7u);
  EXPECT_EQ(j["input_ids"][0], 101);
  EXPECT_EQ(j["attention_mask"], nlohmann::json({1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(j["position_ids"], nlohmann::json({0, 0, 1, 0, 1, 2, 0}));
  EXPECT_EQ(j["token_type_ids"], nlohmann::json({0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(j["text_token_mask"][4], nlohmann::json({0, 0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(j["phrases"][1], nlohmann::json({{"text", "traffic light"}, {"begin", 3}, {"end", 5}}));
}

TEST(Tokenizer, CliBadInputsAreClearErrors) {
  auto empty = test::run_cli("tokenize --vocab " + kVocab + " \" . \"");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("empty caption"), std::string::npos) << empty.output;
  auto novocab = test::run_cli("tokenize --vocab /nonexistent/vocab.txt cat");
  EXPECT_NE(novocab.exit_code, 0);
  EXPECT_NE(novocab.output.find("no such file"), std::string::npos) << novocab.output;
  auto text = test::run_cli("tokenize --vocab " + kVocab + " --max-length 5 \"person . bicycle\"");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("warning: "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("'bicycle'"), std::string::npos) << text.output;
}

}  // namespace vlrt::grounding

// The BERT WordPiece tokenizer's vocab loading; its tokens against the reference are
// checked with GroundingDINO's captions (tests/pipelines/grounding/test_text_inputs.cpp).
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"
#include "core/error.h"
#include "text/bert_tokenizer.h"

namespace vlrt::text {

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = test::temp_dir("tokenizer_" + name) + "/vocab.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST(Tokenizer, MissingVocabFileIsNamed) {
  try {
    BertTokenizer::load("/nonexistent/vocab.txt");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/vocab.txt: no such file"), std::string::npos)
        << e.what();
  }
}

TEST(Tokenizer, VocabMissingASpecialTokenIsNamed) {
  for (std::string missing : {"[CLS]", "[SEP]", "[PAD]", "[UNK]", "."}) {
    std::string text;
    for (std::string t : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", ".", "cat"})
      if (t != missing) text += t + "\n";
    std::string path = write_file("missing", text);
    try {
      BertTokenizer::load(path);
      ADD_FAILURE() << "expected an error for a vocab without " << missing;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": the vocab has no '" + missing + "' token"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace vlrt::text

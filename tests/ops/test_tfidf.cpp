// TfIdfVectorizer against outputs of the ONNX reference implementation (onnx.reference).
#include "op_test_util.h"

namespace vlrt {
namespace {

using test::attr_floats;
using test::attr_i;
using test::attr_ints;
using test::attr_s;
using test::expect_close;
using test::f32;
using test::run_op;

// Unigrams 2 3 5 4, bigrams (5,6) (7,8) (6,7); n-grams of 1 and 2 tokens, gaps of up to one token.
std::map<std::string, Attribute> pool_attrs(const std::string& mode) {
  std::map<std::string, Attribute> a = {
      {"mode", attr_s(mode)},
      {"min_gram_length", attr_i(1)},
      {"max_gram_length", attr_i(2)},
      {"max_skip_count", attr_i(1)},
      {"ngram_counts", attr_ints({0, 4})},
      {"ngram_indexes", attr_ints({0, 1, 2, 3, 4, 5, 6})},
      {"pool_int64s", attr_ints({2, 3, 5, 4, 5, 6, 7, 8, 6, 7})},
  };
  if (mode != "TF") a["weights"] = attr_floats({0.5f, 1, 2, 3, 4, 5, 6});
  return a;
}

Tensor ids() { return Tensor::from_vector<int32_t>({1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8}, {2, 6}); }

TEST(TfIdfVectorizer, CountsWeighsAndMarksPresenceAsTheReference) {
  expect_close(run_op("TfIdfVectorizer", {ids()}, pool_attrs("TF"))[0],
               f32({0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1}, {2, 7}));
  expect_close(run_op("TfIdfVectorizer", {ids()}, pool_attrs("IDF"))[0],
               f32({0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 4, 0, 6}, {2, 7}));
  expect_close(run_op("TfIdfVectorizer", {ids()}, pool_attrs("TFIDF"))[0],
               f32({0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 4, 0, 6}, {2, 7}));
}

TEST(TfIdfVectorizer, OneRowGivesOneVector) {
  Tensor row = Tensor::from_vector<int64_t>({8, 6, 7, 5, 6, 8}, {6});
  expect_close(run_op("TfIdfVectorizer", {row}, pool_attrs("TF"))[0], f32({0, 0, 1, 0, 1, 0, 1}, {7}));
}

TEST(TfIdfVectorizer, StringPoolsAreRefusedWithAReason) {
  auto attrs = pool_attrs("TF");
  attrs.erase("pool_int64s");
  Attribute strings;
  strings.kind = Attribute::Kind::strings;
  strings.strings = {"a", "b"};
  attrs["pool_strings"] = strings;
  try {
    run_op("TfIdfVectorizer", {ids()}, attrs);
    FAIL() << "expected an error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("pool_strings"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vlrt

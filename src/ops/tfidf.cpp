// TfIdfVectorizer: n-gram counts (TF), presence (IDF) or weighted counts (TFIDF) of a
// pool of integer-id n-grams, per row of token ids.
#include <algorithm>

#include "ops/op_schema.h"

namespace vlrt {

namespace {

void infer_tfidf_vectorizer(InferContext& ctx) {
  const Node& n = ctx.node;
  if (n.has_attr("pool_strings"))
    unsupported("string n-gram pools (pool_strings) are not supported; map the tokens to integer ids and use "
                "pool_int64s");
  DType dt = ctx.input_dtype(0);
  if (dt != DType::i32 && dt != DType::i64) fail("the input is ", dtype_name(dt), ", expected int32 or int64 ids");
  std::vector<int64_t> indexes = n.attr_ints("ngram_indexes");
  if (indexes.empty()) fail("the attribute ngram_indexes is missing or empty");
  for (int64_t i : indexes)
    if (i < 0) fail("ngram_indexes holds a negative index ", i);
  std::string mode = n.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") fail("mode is '", mode, "', expected TF, IDF or TFIDF");
  int64_t min_gram = n.attr_int("min_gram_length", 0), max_gram = n.attr_int("max_gram_length", 0);
  if (min_gram < 1 || max_gram < min_gram)
    fail("min_gram_length ", min_gram, " and max_gram_length ", max_gram, " must satisfy 1 <= min <= max");
  int64_t size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  const Shape& x = ctx.input_shape(0);
  if (x.size() > 2) fail("the input has rank ", x.size(), ", expected [C] or [N, C]");
  ctx.set_output(0, DType::f32, x.size() == 2 ? Shape{x[0], size} : Shape{size});
}

}  // namespace

void register_tfidf_schemas(SchemaTable& t) { t["TfIdfVectorizer"] = {infer_tfidf_vectorizer, 1, 1}; }

}  // namespace vlrt

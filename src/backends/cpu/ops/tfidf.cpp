// TfIdfVectorizer on the CPU, following the ONNX reference: n-grams are read at every
// start with gaps of 0..max_skip_count tokens (unigrams once), counted at their output
// index, then weighted by the mode.
#include <map>

#include "backends/cpu/kernel.h"

namespace vlrt {

namespace {

// The pool's n-grams of sizes min..max, each with its position in pool order (the index
// into ngram_indexes). pool_int64s holds the 1-grams, then the 2-grams, ...; ngram_counts
// gives where each size starts.
std::map<std::vector<int64_t>, size_t> ngram_table(const Node& n, int64_t min_gram, int64_t max_gram) {
  std::vector<int64_t> pool = n.attr_ints("pool_int64s");
  std::vector<int64_t> starts = n.attr_ints("ngram_counts");
  std::map<std::vector<int64_t>, size_t> table;
  size_t id = 0;
  for (size_t level = 0; level < starts.size(); level++) {
    int64_t size = int64_t(level) + 1;
    int64_t begin = starts[level], end = level + 1 < starts.size() ? starts[level + 1] : int64_t(pool.size());
    if (begin < 0 || end < begin || end > int64_t(pool.size()) || (end - begin) % size)
      fail("ngram_counts ", begin, "..", end, " of the ", size, "-grams do not fit pool_int64s of ", pool.size());
    for (int64_t at = begin; at < end; at += size, id++)
      if (size >= min_gram && size <= max_gram) table[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + size)] = id;
  }
  return table;
}

void tfidf_vectorizer_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t min_gram = n.attr_int("min_gram_length", 1), max_gram = n.attr_int("max_gram_length", 1);
  int64_t max_skip = n.attr_int("max_skip_count", 0);
  std::vector<int64_t> indexes = n.attr_ints("ngram_indexes");
  std::vector<float> weights = n.attr_floats("weights");
  std::string mode = n.attr_string("mode", "TF");
  auto table = ngram_table(n, min_gram, max_gram);
  if (table.size() > indexes.size() || (!table.empty() && table.rbegin()->second >= indexes.size()))
    fail("ngram_indexes has ", indexes.size(), " entries, fewer than the pool's n-grams");
  int64_t size = y.dim(-1);
  int64_t rows = x.rank() == 2 ? x.dim(0) : 1, cols = x.rank() == 0 ? 1 : x.dim(-1);
  if (!weights.empty() && int64_t(weights.size()) < size)
    fail("weights has ", weights.size(), " entries, the output ", size);
  std::vector<int64_t> ids = x.to_int64_vector();
  std::vector<double> counts(size_t(rows * size), 0);
  for (int64_t r = 0; r < rows; r++) {
    const int64_t* row = ids.data() + r * cols;
    int64_t first_size = min_gram;
    for (int64_t skip = 1; skip <= max_skip + 1; skip++) {
      for (int64_t start = 0; start + skip * (first_size - 1) < cols; start++) {
        std::vector<int64_t> gram;
        for (int64_t item = start; int64_t(gram.size()) < max_gram && item < cols; item += skip) {
          gram.push_back(row[item]);
          if (int64_t(gram.size()) < first_size) continue;
          auto hit = table.find(gram);
          if (hit != table.end()) counts[size_t(r * size + indexes[hit->second])] += 1;
        }
      }
      // Unigrams do not depend on the skip: count them once.
      if (first_size == 1 && ++first_size > max_gram) break;
    }
  }
  float* out = y.data<float>();
  for (size_t i = 0; i < counts.size(); i++) {
    double w = weights.empty() ? 1.0 : weights[i % size_t(size)];
    if (mode == "TF") out[i] = float(counts[i]);
    else if (mode == "IDF") out[i] = counts[i] > 0 ? float(w) : 0.f;
    else out[i] = float(w * counts[i]);
  }
}

}  // namespace

void register_tfidf_kernels(CpuKernelTable& t) { t["TfIdfVectorizer"] = {tfidf_vectorizer_kernel}; }

}  // namespace vlrt

// The branch of a model that depends on some inputs alone, cached per content of those inputs:
// on the demo model (the text inputs), outputs bit-identical with and without the cache.
#include <gtest/gtest.h>

#include <cstring>

#include "cli_util.h"
#include "exec/session.h"
#include "integrity/load_model.h"
#include "pipelines/grounding/detector.h"

namespace vlrt {
namespace {

using test::source_path;

const std::vector<std::string> kTextInputs = {"input_ids", "attention_mask", "position_ids", "token_type_ids",
                                              "text_token_mask"};

Tensor random_image(int seed) {
  Tensor t(DType::f32, {1, 3, 64, 80});
  uint32_t x = uint32_t(seed) * 2654435761u + 1;
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = float(x >> 8) / float(1 << 24) * 4 - 2;
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(BranchCache, DemoModelOutputsBitIdenticalWithAndWithoutTheCache) {
  std::string path = source_path("models/demo/model.onnx");
  Session plain(load_model(path));
  SessionOptions options;
  options.cached_inputs = kTextInputs;
  options.branch_cache_entries = 2;
  Session cached(load_model(path), options);
  auto tokenizer = text::BertTokenizer::load(source_path("models/demo/vocab.txt"));
  std::vector<grounding::TextInputs> prompts;
  for (const char* p : {"black ring . yellow heart .", "orange cross . green heart . red triangle ."})
    prompts.push_back(grounding::make_text_inputs(tokenizer, {grounding::encode_caption(tokenizer, p)}));

  for (int image = 0; image < 3; image++)  // images 1 and 2: the text branch from the cache
    for (auto& text : prompts) {
      TensorMap inputs = grounding::grounding_inputs(random_image(image), text);
      TensorMap want = plain.run(inputs), got = cached.run(inputs);
      for (auto& [name, t] : want) EXPECT_TRUE(same_bytes(t, got.at(name))) << name << " image " << image;
    }
  BranchStats s = cached.branch_stats();
  EXPECT_EQ(s.misses, 2);  // one per prompt
  EXPECT_EQ(s.hits, 4);
  EXPECT_EQ(s.entries, 2u);
  const Branch& b = cached.branch(signature_of(grounding::grounding_inputs(random_image(0), prompts[0])));
  EXPECT_GT(b.steps, 10u);
  EXPECT_FALSE(b.boundary.empty());
}

TEST(BranchCache, KeepsTheMostRecentlyUsedEntries) {
  BranchCache cache(2);
  auto content = [](int64_t v) {
    Tensor t(DType::i64, {1});
    t.data<int64_t>()[0] = v;
    return std::vector<Tensor>{t};
  };
  for (int64_t v : {1, 2}) {
    EXPECT_EQ(cache.find("plan", content(v)), nullptr);
    cache.insert("plan", BranchValues{content(v), {}, true});
  }
  EXPECT_NE(cache.find("plan", content(1)), nullptr);  // 1 is now the most recent
  cache.insert("plan", BranchValues{content(3), {}, true});
  EXPECT_EQ(cache.find("plan", content(2)), nullptr);  // evicted
  EXPECT_NE(cache.find("plan", content(1)), nullptr);
  EXPECT_EQ(cache.find("other plan", content(1)), nullptr);
  EXPECT_EQ(cache.stats().entries, 2u);
}

TEST(BranchCache, UnknownInputIsAnErrorNamingIt) {
  SessionOptions options;
  options.cached_inputs = {"input_idz"};
  try {
    Session s(load_model(source_path("models/demo/model.onnx")), options);
    FAIL() << "an input the model does not have must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'input_idz'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vlrt

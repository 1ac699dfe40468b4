// Prompts longer than the model's text length: split into passes of whole phrases, each run as
// its own prompt, the detections merged. On the demo model with a 300-phrase prompt mixing the
// demo image's phrases with made-up ones.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "integrity/load_model.h"
#include "pipelines/grounding/detector.h"
#include "pipelines/pipeline.h"

namespace vlrt::grounding {

using test::source_path;

namespace {

const text::BertTokenizer& demo_tokenizer() {
  static const text::BertTokenizer t = text::BertTokenizer::load(source_path("models/demo/vocab.txt"));
  return t;
}

// Every 7th phrase one of the demo image's (present and absent), the others made up.
std::vector<std::string> long_phrase_list(size_t count) {
  const std::vector<std::string> real = {"orange cross", "black ring",   "orange heart",   "red triangle",
                                         "green heart",  "yellow heart", "yellow triangle"};
  const std::vector<std::string> adjectives = {"striped", "tiny", "wooden", "shiny", "purple", "old", "bent"};
  const std::vector<std::string> nouns = {"blob",   "kettle", "mountain", "lamp", "cloud", "spoon",
                                          "candle", "bucket", "pillow",   "kite", "anvil"};
  std::vector<std::string> out;
  for (size_t i = 0; i < count; i++)
    out.push_back(i % 7 == 3 ? real[(i / 7) % real.size()]
                             : adjectives[i % adjectives.size()] + " " + nouns[(i / 3) % nouns.size()]);
  return out;
}

std::string prompt_of(const std::vector<std::string>& phrases, size_t first = 0, size_t last = SIZE_MAX) {
  std::string p;
  for (size_t i = first; i < std::min(last, phrases.size()); i++) p += phrases[i] + " . ";
  return p;
}

}  // namespace

TEST(PromptPasses, ShortPromptIsOnePassAsBefore) {
  auto passes = split_caption(demo_tokenizer(), "black ring . yellow heart .", 256);
  ASSERT_EQ(passes.size(), 1u);
  EncodedCaption whole = encode_caption(demo_tokenizer(), "black ring . yellow heart .", 256);
  EXPECT_EQ(passes[0].input_ids, whole.input_ids);
  EXPECT_EQ(passes[0].first_phrase, 0u);
}

TEST(PromptPasses, LongPromptSplitsIntoPassesOfWholePhrases) {
  auto phrases = long_phrase_list(300);
  auto passes = split_caption(demo_tokenizer(), prompt_of(phrases), 64);
  ASSERT_GT(passes.size(), 3u);
  std::vector<std::string> seen;
  for (auto& pass : passes) {
    EXPECT_LE(pass.input_ids.size(), 64u);
    EXPECT_TRUE(pass.dropped_phrases.empty());
    EXPECT_EQ(pass.first_phrase, seen.size());
    for (auto& p : pass.phrases) seen.push_back(p.text);
  }
  EXPECT_EQ(seen, phrases);  // every phrase, once, in order, whole
}

TEST(PromptPasses, MaxPhrasesPerPassCapsEachPass) {
  auto phrases = long_phrase_list(50);
  auto passes = split_caption(demo_tokenizer(), prompt_of(phrases), 256, 8);
  ASSERT_EQ(passes.size(), 7u);  // 6 x 8 + 2
  for (auto& pass : passes) EXPECT_LE(pass.phrases.size(), 8u);
  EXPECT_EQ(passes.back().first_phrase, 48u);
}

TEST(PromptPasses, PhraseLongerThanThePassIsAnErrorNamingIt) {
  try {
    split_caption(demo_tokenizer(), "black ring . red red red red red red red red heart . yellow heart .", 8);
    FAIL() << "a phrase that cannot fit any pass must be refused";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'red red red red red red red red heart'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("maximum text length 8"), std::string::npos) << msg;
  }
}

// The detections of a 300-phrase prompt are those of its passes run as prompts of their own.
TEST(PromptPasses, DemoModelLongPromptEqualsItsPassesRunAlone) {
  const PipelineInfo& info = find_pipeline("grounding");
  PipelineConfig config;
  config.settings["nms"] = 0;  // the merge is then the plain union
  auto pipeline = info.make(load_model(source_path("models/demo/model.onnx")), config);
  vision::Image image = vision::load_image(source_path("assets/demo.png"));
  auto detect = [&](const std::shared_ptr<const Query>& q) {
    auto r = pipeline->request(q, image);
    pipeline->run({r.get()});
    pipeline->postprocess(*r);
    return pipeline->record(*r).detections;
  };

  auto phrases = long_phrase_list(300);
  auto query = pipeline->query(prompt_of(phrases));
  EXPECT_EQ(query->categories, phrases);  // each phrase can be a label
  EXPECT_TRUE(query->warning.empty()) << query->warning;
  auto merged = detect(query);

  auto passes = split_caption(demo_tokenizer(), prompt_of(phrases), 256);
  ASSERT_GT(passes.size(), 1u);
  std::vector<Detection> expected;
  std::set<size_t> passes_with_detections;
  for (size_t p = 0; p < passes.size(); p++) {
    size_t first = passes[p].first_phrase, last = first + passes[p].phrases.size();
    for (Detection d : detect(pipeline->query(prompt_of(phrases, first, last)))) {
      d.category += int(first);
      expected.push_back(d);
      passes_with_detections.insert(p);
    }
  }
  EXPECT_GT(passes_with_detections.size(), 1u);
  std::stable_sort(expected.begin(), expected.end(), [](auto& a, auto& b) { return a.score > b.score; });
  ASSERT_EQ(merged.size(), expected.size());
  for (size_t i = 0; i < merged.size(); i++) {
    EXPECT_EQ(merged[i].label, expected[i].label) << i;
    EXPECT_EQ(merged[i].category, expected[i].category) << i;
    EXPECT_EQ(merged[i].label, phrases[size_t(merged[i].category)]) << i;
    EXPECT_EQ(merged[i].score, expected[i].score) << i;
    EXPECT_EQ(std::tie(merged[i].x1, merged[i].y1, merged[i].x2, merged[i].y2),
              std::tie(expected[i].x1, expected[i].y1, expected[i].x2, expected[i].y2))
        << i;
  }
}

}  // namespace vlrt::grounding

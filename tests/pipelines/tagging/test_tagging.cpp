// The tagging pipeline on a tiny model of the RAM contract (tools/make_tiny_tagger.py): RAM's
// preprocessing and the probabilities against PyTorch's, per-tag thresholds, the served JSON, the
// command, and the errors of a tag list or a model that does not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "integrity/load_model.h"
#include "io/base64.h"
#include "io/files.h"
#include "io/npy.h"
#include "pipelines/pipeline.h"
#include "pipelines/tagging/tagger.h"

namespace vlrt::tagging {

namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return test::source_path("tests/fixtures/tagging/" + name); }

using test::error_of;

// A folder holding the tiny tagger and, when given, a tag list file of that name and text.
std::string model_folder(const std::string& name, const std::string& list_name,
                         const std::string& list_text) {
  std::string dir = test::temp_dir(name);
  fs::copy_file(fixture("tagger.onnx"), dir + "/model.onnx");
  if (!list_name.empty()) write_file_atomically(dir + "/" + list_name, list_text);
  return dir;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(Tagger, PreprocessesAndScoresAsPyTorch) {
  Tagger tagger(load_model(fixture("tagger.onnx")), {});
  EXPECT_EQ(tagger.image_size(), 32);
  ASSERT_EQ(tagger.tags().size(), 5u);
  vision::Image img = vision::load_image(fixture("tiny.png"));
  Tensor want = read_npy(fixture("pixels.npy"));
  Tensor got = tagger.pixels({&img});
  ASSERT_EQ(got.shape(), want.shape());
  float err = 0;
  for (int64_t i = 0; i < got.numel(); i++)
    err = std::max(err, std::abs(got.data<float>()[i] - want.data<float>()[i]));
  EXPECT_LT(err, 1e-5f);

  Tensor probs = read_npy(fixture("probs.npy"));
  std::vector<ImageTags> r = tagger.tag({&img, &img});
  ASSERT_EQ(r.size(), 2u);
  for (auto& one : r)
    for (size_t t = 0; t < 5; t++) EXPECT_NEAR(one.probabilities[t], probs.data<float>()[t], 1e-5) << t;
  // Thresholds 0.6, 0.5, 0.6, 0.5, 0.6 over 0.179, 0.489, 0.326, 0.591, 0.776: tags 5 and 4.
  ASSERT_EQ(r[0].tags.size(), 2u);
  EXPECT_EQ(r[0].tags[0].index, 4);
  EXPECT_EQ(r[0].tags[1].index, 3);
  EXPECT_EQ(tagger.tags()[4].name_in("zh"), "标签5");
  EXPECT_EQ(tagger.tags()[4].name_in("fr"), "tag5");

  Tagger low(load_model(fixture("tagger.onnx")), {}, {0.1f, ""});
  EXPECT_EQ(low.tag({&img})[0].tags.size(), 5u);
}

TEST(Tagger, ReadsATextTagList) {
  std::string dir = model_folder("tag_txt", "tags.txt", "a\nb\r\nc\nd\ne\n");
  Tagger tagger(load_model(dir + "/model.onnx"), {});
  ASSERT_EQ(tagger.tags().size(), 5u);
  EXPECT_EQ(tagger.tags()[1].name, "b");
  EXPECT_FLOAT_EQ(tagger.tags()[1].threshold, kDefaultThreshold);
}

TEST(Tagger, RefusesATagListOfAnotherSize) {
  std::string dir = model_folder("tag_size", "tags.txt", "a\nb\nc\nd\n");
  std::string e = error_of([&] { Tagger(load_model(dir + "/model.onnx"), {}); });
  EXPECT_TRUE(contains(e, "tags.txt has 4 tags")) << e;
  EXPECT_TRUE(contains(e, "model.onnx's output 'logits' is float32[batch,5]")) << e;
}

TEST(Tagger, RefusesAMissingOrBrokenTagList) {
  std::string dir = model_folder("tag_missing", "", "");
  std::string e = error_of([&] { Tagger(load_model(dir + "/model.onnx"), {}); });
  EXPECT_TRUE(contains(e, "has no tag list beside it")) << e;
  EXPECT_TRUE(contains(e, "tags.json")) << e;
  dir = model_folder("tag_broken", "tags.json", "{\"tags\": [{\"name\": \"a\", \"threshold\": 2}]}");
  e = error_of([&] { Tagger(load_model(dir + "/model.onnx"), {}); });
  EXPECT_TRUE(contains(e, "entry 1 ('a'): threshold 2 is not in 0..1")) << e;
}

TEST(Tagger, RefusesAModelWithoutAnImageInput) {
  std::string e = error_of([&] {
    Tagger(load_model(fixture("no_image.onnx")), {}, {{}, fixture("tags.json")});
  });
  EXPECT_TRUE(contains(e, "does not follow the tagging contract")) << e;
  EXPECT_TRUE(contains(e, "float32[batch,8]")) << e;
}

TEST(TagPipeline, ServesJsonAndRefusesABadImage) {
  auto pipeline = find_pipeline("tag").make(load_model(fixture("tagger.onnx")), {});
  EXPECT_EQ(pipeline->endpoint(), "/v1/tag");
  std::string text;
  auto body = [&](const std::string& json) {
    RequestBody b;
    b.content_type = "application/json";
    text = json;
    b.body = text;
    return b;
  };
  auto r = pipeline->parse(
      body("{\"image\": \"" + base64_encode(read_file(fixture("tiny.png"))) + "\", \"lang\": \"zh\"}"));
  pipeline->preprocess(*r, {});
  pipeline->run({r.get()});
  pipeline->postprocess(*r);
  nlohmann::json j = pipeline->response(*r);
  ASSERT_EQ(j["tags"].size(), 2u);
  EXPECT_EQ(j["tags"][0]["name"], "标签5");
  EXPECT_EQ(j["image"]["width"], 50);
  EXPECT_EQ(pipeline->record(*r).detections.size(), 2u);

  auto bad = pipeline->parse(body("{\"image\": \"" + base64_encode("not an image") + "\"}"));
  try {
    pipeline->preprocess(*bad, {});
    ADD_FAILURE() << "a bad image was accepted";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
  }
  EXPECT_TRUE(
      contains(error_of([&] { pipeline->parse(body("{\"prompt\": 1}")); }), "unknown field 'prompt'"));
  EXPECT_TRUE(contains(error_of([&] { pipeline->query("a cat"); }), "takes no prompt"));
}

TEST(TagCommand, PrintsTagsAndWritesJson) {
  std::string dir = model_folder("tag_cli", "tags.json", read_file(fixture("tags.json")));
  std::string json = dir + "/out.json";
  auto r = test::run_cli("tag " + fixture("tiny.png") + " " + fixture("tiny.png") + " --model " + dir +
                         " --lang zh --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "2 image(s) in one batch")) << r.output;
  EXPECT_TRUE(contains(r.output, "0.7758  标签5")) << r.output;
  auto j = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(j["images"].size(), 2u);
  EXPECT_EQ(j["images"][1]["tags"][1]["index"], 3);

  std::string bad = dir + "/bad.png";
  write_file_atomically(bad, "not an image");
  r = test::run_cli("tag " + bad + " --model " + dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "bad.png")) << r.output;
}

}  // namespace vlrt::tagging

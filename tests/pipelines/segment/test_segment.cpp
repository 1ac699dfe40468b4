// The SAM pipeline's pieces: preprocessing against segment-anything's (numbers from
// tools/make_tiny_sam.py), prompts to decoder points, mask choice, RLE, and the model folder's
// error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "integrity/load_model.h"
#include "io/base64.h"
#include "io/files.h"
#include "pipelines/pipeline.h"
#include "pipelines/segment/segmenter.h"

namespace vlrt::segment {

namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return test::source_path("tests/fixtures/sam/" + name); }

using test::error_of;

}  // namespace

TEST(SamPreprocess, MatchesSegmentAnythingOnATinyImage) {
  auto want = nlohmann::json::parse(read_file(fixture("preprocess.json")));
  vision::Image img = vision::load_image(fixture("tiny.png"));
  SamConfig config;
  auto [w, h] = resized_size(img.width, img.height, config.image_size);
  EXPECT_EQ(w, want["resized"][0].get<int>());
  EXPECT_EQ(h, want["resized"][1].get<int>());
  Tensor px = sam_pixels(img, config);
  ASSERT_EQ(px.shape(), (Shape{1, 3, 1024, 1024}));
  const float* p = px.data<float>();
  for (int c = 0; c < 3; c++) {
    double sum = 0;
    for (int64_t i = 0; i < 1024 * 1024; i++) sum += p[c * 1024 * 1024 + i];
    EXPECT_NEAR(sum, want["channel_sums"][c].get<double>(), 1e-3) << "channel " << c;
  }
  for (auto& v : want["values"]) {
    int c = v[0], y = v[1], x = v[2];
    EXPECT_FLOAT_EQ(p[(c * 1024 + y) * 1024 + x], v[3].get<float>()) << "c " << c << " y " << y << " x " << x;
  }
}

TEST(SamPreprocess, ResizedSizeKeepsTheAspectRoundingHalfUp) {
  EXPECT_EQ(resized_size(900, 600, 1024), std::make_pair(1024, 683));
  EXPECT_EQ(resized_size(600, 900, 1024), std::make_pair(683, 1024));
  EXPECT_EQ(resized_size(1024, 1024, 1024), std::make_pair(1024, 1024));
  EXPECT_EQ(resized_size(2048, 512, 1024), std::make_pair(1024, 256));
}

TEST(SamPrompt, BoxBecomesTwoCornersLabelledTwoAndThreeInTheResizedFrame) {
  Prompt p{Box{10, 20, 300, 450}, {}};
  DecoderPoints d = decoder_points(p, 900, 600, 1024, 683);
  ASSERT_EQ(d.labels, (std::vector<float>{2, 3}));
  double sx = 1024.0 / 900, sy = 683.0 / 600;
  EXPECT_EQ(d.coords, (std::vector<float>{float(10 * sx), float(20 * sy), float(300 * sx), float(450 * sy)}));
}

TEST(SamPrompt, PointsAloneGetAPaddingPointAndPointsWithABoxComeFirst) {
  Prompt points{std::nullopt, {{5, 6, kForeground}, {7, 8, kBackground}}};
  DecoderPoints d = decoder_points(points, 100, 100, 100, 100);
  EXPECT_EQ(d.labels, (std::vector<float>{1, 0, -1}));
  EXPECT_EQ(d.coords, (std::vector<float>{5, 6, 7, 8, 0, 0}));
  Prompt both{Box{1, 2, 3, 4}, {{5, 6, kForeground}}};
  d = decoder_points(both, 100, 100, 100, 100);
  EXPECT_EQ(d.labels, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(d.coords, (std::vector<float>{5, 6, 1, 2, 3, 4}));
}

TEST(SamPrompt, ParsesBoxesAndPointsAndNamesWhatIsWrong) {
  Box b = parse_box("10,20.5,30,40");
  EXPECT_EQ(b.y1, 20.5f);
  Point p = parse_point("3,4,0");
  EXPECT_EQ(p.label, kBackground);
  EXPECT_EQ(parse_point("3,4").label, kForeground);
  EXPECT_NE(error_of([] { parse_box("10,20,30"); }).find("has 3 numbers; expected x1,y1,x2,y2"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_box("10,a,30,40"); }).find("'a' is not a number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_box(""); }).find("is not x1,y1,x2,y2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_point("1,2,5"); }).find("has label 5"), std::string::npos);
}

TEST(SamPrompt, RefusesEmptyOrInvertedBoxesAndPromptsOutsideTheImage) {
  EXPECT_NE(error_of([] {
              check_prompt({Box{50, 10, 40, 20}, {}}, 100, 80);
            }).find("x2 must be greater than x1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              check_prompt({Box{10, 10, 10, 20}, {}}, 100, 80);
            }).find("x2 must be greater"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              check_prompt({Box{10, 10, 120, 20}, {}}, 100, 80);
            }).find("outside the 100x80 image"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              check_prompt({std::nullopt, {{-1, 5, 1}}}, 100, 80);
            }).find("point -1,5 is outside"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_prompt({}, 100, 80); }).find("needs a box or at least one point"),
            std::string::npos);
  EXPECT_EQ(error_of([] { check_prompt({Box{0, 0, 100, 80}, {{100, 80, 1}}}, 100, 80); }), "");
}

TEST(SamMasks, SelectMaskFollowsSamOnnxModel) {
  EXPECT_EQ(select_mask({0.9f, 0.1f, 0.7f, 0.3f}, 2), 2);  // two points: the best multimask output
  EXPECT_EQ(select_mask({0.1f, 0.9f, 0.7f, 0.3f}, 3), 0);  // more: the single-mask output
  EXPECT_EQ(select_mask({0.4f}, 2), 0);
}

TEST(SamMasks, RleCountsAreColumnMajorAndStartWithZeros) {
  // 3 wide, 2 high:  0 1 1
  //                  0 1 0   column-major: 0 0 | 1 1 | 1 0
  vision::Mask m{3, 2, {0, 1, 1, 0, 1, 0}};
  EXPECT_EQ(vision::rle_counts(m), (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(vision::mask_area(m), 3);
  vision::MaskBox b = vision::mask_box(m);
  EXPECT_EQ(std::vector<int>({b.x1, b.y1, b.x2, b.y2}), std::vector<int>({1, 0, 3, 2}));
  vision::Mask full{2, 2, {1, 1, 1, 1}};
  EXPECT_EQ(vision::rle_counts(full), (std::vector<int64_t>{0, 4}));
  vision::Mask empty{2, 1, {0, 0}};
  EXPECT_EQ(vision::rle_counts(empty), (std::vector<int64_t>{2}));
  EXPECT_EQ(vision::mask_box(empty).x2, 0);
}

TEST(SamModelFolder, NamesAMissingFileAndMissingDecoderInputs) {
  std::string dir = test::temp_dir("sam_folder");
  EXPECT_NE(error_of([&] { Segmenter(dir + "/nothing", {}); }).find("is not a directory"), std::string::npos);
  std::string err = error_of([&] { Segmenter(dir, {}); });
  EXPECT_NE(err.find("has no encoder 'encoder.onnx'"), std::string::npos) << err;
  // A decoder that is really the encoder: every missing input and output is named.
  fs::copy_file(fixture("tiny/encoder.onnx"), dir + "/encoder.onnx");
  fs::copy_file(fixture("tiny/sam.json"), dir + "/sam.json");
  err = error_of([&] { Segmenter(dir, {}); });
  EXPECT_NE(err.find("has no decoder 'decoder.onnx'"), std::string::npos) << err;
  fs::copy_file(fixture("tiny/encoder.onnx"), dir + "/decoder.onnx");
  err = error_of([&] { Segmenter(dir, {}); });
  for (const char* name :
       {"'image_embeddings'", "'point_coords'", "'point_labels'", "'mask_input'", "'has_mask_input'",
        "'orig_im_size'", "output 'masks'", "output 'iou_predictions'"})
    EXPECT_NE(err.find(name), std::string::npos) << name << " in " << err;
  EXPECT_NE(err.find("does not follow the SAM decoder contract"), std::string::npos) << err;
}

TEST(SamModelFolder, RefusesABadSamJson) {
  std::string dir = test::temp_dir("sam_bad_json");
  write_file_atomically(dir + "/sam.json", "{\"pixel_mean\": [1, 2]}");
  std::string err = error_of([&] { read_sam_config(dir); });
  EXPECT_NE(err.find("sam.json: 'pixel_mean' has 2 values, expected 3"), std::string::npos) << err;
  write_file_atomically(dir + "/sam.json", "not json");
  EXPECT_NE(error_of([&] { read_sam_config(dir); }).find("sam.json"), std::string::npos);
}

TEST(SamSegmenter, TinyModelMatchesSegmentAnything) {
  auto want = nlohmann::json::parse(read_file(fixture("tiny/expected.json")));
  Segmenter segmenter(fixture("tiny"), {});
  vision::Image img = vision::load_image(fixture("tiny.png"));
  ImageEmbedding e = segmenter.embed(img);
  EXPECT_EQ(e.embeddings.shape(), (Shape{1, 16, 8, 8}));
  auto& box = want["prompts"]["box"]["box"];
  auto& pts = want["prompts"]["points"]["points"];
  std::vector<Prompt> prompts = {
      {Box{box[0], box[1], box[2], box[3]}, {}},
      {std::nullopt, {{pts[0][0], pts[0][1], pts[0][2]}, {pts[1][0], pts[1][1], pts[1][2]}}}};
  std::vector<Segment> got = segmenter.segment(e, prompts);
  ASSERT_EQ(got.size(), 2u);
  const char* names[] = {"box", "points"};
  for (size_t i = 0; i < 2; i++) {
    auto& w = want["prompts"][names[i]];
    EXPECT_EQ(got[i].mask_index, w["mask_index"].get<int>()) << names[i];
    ASSERT_EQ(got[i].iou_predictions.size(), 4u);
    for (size_t m = 0; m < 4; m++)
      EXPECT_NEAR(got[i].iou_predictions[m], w["iou_predictions"][m].get<float>(), 1e-4);
    EXPECT_EQ(vision::mask_area(got[i].mask), w["area"].get<int64_t>()) << names[i];
    EXPECT_EQ(got[i].mask.width, img.width);
  }
}

// A decoder with a dynamic prompt batch runs prompts of one point count together; each mask is
// the one the batch-1 decoder gives for that prompt alone.
TEST(SamSegmenter, BatchedPromptsGiveTheMasksOfSingleRuns) {
  std::string dir = test::temp_dir("sam_batched");
  write_file_atomically(dir + "/sam.json", nlohmann::json({{"encoder", fixture("tiny/encoder.onnx")},
                                                           {"decoder", fixture("tiny/decoder_batched.onnx")},
                                                           {"image_size", 128}})
                                               .dump());
  Segmenter batched(dir, {}), single(fixture("tiny"), {});
  vision::Image img = vision::load_image(fixture("tiny.png"));
  std::vector<Prompt> prompts = {{Box{2, 1, 15, 11}, {}},
                                 {std::nullopt, {{6, 5, kForeground}}},
                                 {Box{0, 0, 23, 13}, {}},
                                 {Box{5, 4, 9, 12}, {}}};
  auto got = batched.segment(batched.embed(img), prompts);
  auto want = single.segment(single.embed(img), prompts);
  ASSERT_EQ(got.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); i++) {
    EXPECT_EQ(got[i].prompt.describe(), prompts[i].describe());
    EXPECT_EQ(got[i].mask_index, want[i].mask_index) << i;
    for (size_t m = 0; m < 4; m++)
      EXPECT_NEAR(got[i].iou_predictions[m], want[i].iou_predictions[m], 1e-5) << i;
    float err = 0;
    for (size_t p = 0; p < got[i].logits.size(); p++)
      err = std::max(err, std::abs(got[i].logits[p] - want[i].logits[p]));
    EXPECT_LT(err, 1e-4f) << i;
  }
}

// A detection's box is its prompt; one without width or height gets an empty mask. An image
// already embedded gives what the image gives.
TEST(SamSegmenter, DetectionsBecomeBoxPromptsAndEmptyBoxesEmptyMasks) {
  Segmenter segmenter(fixture("tiny"), {});
  vision::Image img = vision::load_image(fixture("tiny.png"));
  std::vector<vision::Detection> dets = {{"a", 0, 0.9f, 2, 1, 15, 11}, {"b", 1, 0.8f, 4, 4, 4, 9}};
  ImageEmbedding e = segmenter.embed(img);
  std::vector<vision::Mask> masks = segment_detections(segmenter, e, dets);
  ASSERT_EQ(masks.size(), 2u);
  EXPECT_EQ(masks[0].pixels, segmenter.segment(e, {{Box{2, 1, 15, 11}, {}}})[0].mask.pixels);
  EXPECT_EQ(masks[1].width, img.width);
  EXPECT_EQ(masks[1].pixels.size(), size_t(img.width * img.height));
  EXPECT_EQ(vision::mask_area(masks[1]), 0);
  std::vector<vision::Mask> from_image = segment_detections(segmenter, img, dets);
  for (size_t i = 0; i < 2; i++) EXPECT_EQ(from_image[i].pixels, masks[i].pixels) << i;
  EXPECT_EQ(segment_detections(segmenter, img, {dets[1]})[0].pixels, masks[1].pixels);
}

TEST(SamPipeline, ServesJsonRequestsAndRefusesBadOnes) {
  auto pipeline = find_pipeline("segment").make(load_model(fixture("tiny/encoder.onnx")), {});
  EXPECT_EQ(pipeline->endpoint(), "/v1/segment");
  std::string image = base64_encode(read_file(fixture("tiny.png")));
  std::string text;  // the body a RequestBody views
  auto body = [&](const std::string& fields) {
    RequestBody b;
    b.content_type = "application/json";
    text = "{\"image\": \"" + image + "\"" + fields + "}";
    b.body = text;
    return b;
  };
  auto r = pipeline->parse(body(", \"boxes\": [[2, 1, 15, 11]]"));
  pipeline->preprocess(*r, {});
  pipeline->run({r.get()});
  pipeline->postprocess(*r);
  nlohmann::json j = pipeline->response(*r);
  auto want = nlohmann::json::parse(read_file(fixture("tiny/expected.json")))["prompts"]["box"];
  ASSERT_EQ(j["masks"].size(), 1u);
  EXPECT_EQ(j["masks"][0]["area"], want["area"]);
  EXPECT_EQ(pipeline->record(*r).detections.size(), 1u);

  auto status = [&](const std::string& fields, const std::string& message) {
    try {
      auto bad = pipeline->parse(body(fields));
      pipeline->preprocess(*bad, {});
    } catch (const RequestError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      return e.status();
    }
    return 200;
  };
  EXPECT_EQ(status(", \"boxes\": [[2, 1, 15]]", "has 3 numbers"), 400);
  EXPECT_EQ(status(", \"boxes\": [[2, 1, 40, 11]]", "outside the 23x13 image"), 400);
  EXPECT_EQ(status(", \"boxes\": [[2, 1, 15, 11], [1, 1, 4, 4]], \"points\": [[3, 3]]", "points refine"),
            400);
  EXPECT_EQ(status("", "give at least one box"), 400);
  EXPECT_EQ(status(", \"points\": [[3, \"a\"]]", "expected numbers"), 400);
  EXPECT_NE(error_of([&] { pipeline->query(Ontology{}); }).find("not with classes"), std::string::npos);
}

}  // namespace vlrt::segment

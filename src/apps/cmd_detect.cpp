// vlrt detect IMAGE --prompt "person . bicycle ." (or --classes "phrase=name, ...", or --auto:
// a tagger's tags are the prompt): labelled boxes for one image; with --masks, a SAM mask for
// each box.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/auto_prompt.h"
#include "apps/pipeline_options.h"
#include "io/files.h"
#include "vision/draw.h"

namespace vlrt {

namespace {

struct DetectArgs {
  std::string image;
  QueryArgs q;
  std::string json_out;
  std::string draw_out;
  std::string masks;  // SAM model folder
  bool use_auto = false;
  std::string tagger;  // --auto's tagger folder; default: the shipped demo tagger
  std::optional<float> tag_threshold;
  int repeat = 1;
  PipelineArgs p;
};

void detect(const DetectArgs& a) {
  QueryArgs q = a.q;
  std::string tagger;
  if (a.use_auto) {
    if (!q.prompt.empty() || !q.classes.empty())
      fail("--auto makes the prompt from the tagger's tags; give --auto or --prompt/--classes, not both");
    tagger = find_tagger(a.tagger);
  } else if (!a.tagger.empty() || a.tag_threshold) {
    fail(a.tagger.empty() ? "--tag-threshold" : "--tagger", " is for --auto; add --auto or leave it out");
  }
  if (a.tag_threshold && !(*a.tag_threshold >= 0 && *a.tag_threshold <= 1))
    fail("--tag-threshold ", *a.tag_threshold, " is not in 0..1");
  vision::Image img = vision::load_image(a.image);
  if (a.use_auto) {
    AutoPrompt tags = auto_prompt(tagger, img, a.image, session_options(a.p), a.tag_threshold);
    std::printf("tags (%s):", tagger.c_str());
    for (size_t i = 0; i < tags.tags.size(); i++) std::printf(" %s %.2f%s", tags.tags[i].c_str(), tags.scores[i],
                                                              i + 1 < tags.tags.size() ? "," : "\n");
    q.prompt = tags.prompt;
  }
  auto pipeline = make_pipeline(a.p);
  auto [query, classes] = make_query(*pipeline, q);
  auto segmenter = make_segmenter(a.masks, a.p);
  // The whole detection, timed; again for each --repeat (the first run also warms the session's
  // memory: its pages are touched for the first time).
  Record rec;
  std::vector<vision::Mask> masks;
  std::vector<double> runs_ms;
  for (int run = 0; run < a.repeat; run++) {
    auto t0 = std::chrono::steady_clock::now();
    auto request = pipeline->request(query, img);
    pipeline->run({request.get()});
    pipeline->postprocess(*request);
    rec = pipeline->record(*request);
    if (segmenter) masks = segment::segment_detections(*segmenter, img, rec.detections);
    runs_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (a.repeat > 1) std::printf("run %d of %d: %.0f ms\n", run + 1, a.repeat, runs_ms.back());
  }
  const double ms = runs_ms.front();

  const auto& dets = rec.detections;
  std::printf("%s: %dx%d (model input %dx%d), prompt \"%s\", %zu detections in %.0f ms\n", a.image.c_str(), img.width,
              img.height, rec.input_width, rec.input_height, query->text.c_str(), dets.size(), ms);
  if (!dets.empty()) {
    size_t lw = 5;
    for (auto& d : dets) lw = std::max(lw, d.label.size());
    std::printf("  %-*s  %5s  %7s %7s %7s %7s%s\n", int(lw), "label", "score", "x1", "y1", "x2", "y2",
                masks.empty() ? "" : "  mask area");
    for (size_t i = 0; i < dets.size(); i++) {
      const auto& d = dets[i];
      std::printf("  %-*s  %5.2f  %7.1f %7.1f %7.1f %7.1f", int(lw), d.label.c_str(), d.score, d.x1, d.y1, d.x2, d.y2);
      if (!masks.empty()) std::printf("  %9lld", static_cast<long long>(vision::mask_area(masks[i])));
      std::printf("\n");
    }
  }
  if (!a.json_out.empty()) {
    nlohmann::json j;
    j["image"] = a.image;
    j["width"] = img.width;
    j["height"] = img.height;
    j["prompt"] = query->text;
    j["latency_ms"] = ms;
    if (a.repeat > 1) j["repeat_latency_ms"] = runs_ms;
    if (!masks.empty()) j["rle"] = segment::kRleFormat;
    j["detections"] = nlohmann::json::array();
    for (size_t i = 0; i < dets.size(); i++) {
      const auto& d = dets[i];
      j["detections"].push_back({{"label", d.label}, {"score", d.score}, {"box", {d.x1, d.y1, d.x2, d.y2}}});
      if (!q.classes.empty() && d.category >= 0)
        j["detections"].back()["class_id"] = classes.class_id(size_t(d.category));
      if (!masks.empty()) {
        j["detections"].back()["area"] = vision::mask_area(masks[i]);
        j["detections"].back()["segmentation"] = segment::rle_json(masks[i]);
      }
    }
    write_file_atomically(a.json_out, j.dump(2) + "\n");
    std::printf("wrote %s\n", a.json_out.c_str());
  }
  if (!a.draw_out.empty()) {
    std::vector<std::string> labels;
    for (auto& d : dets) labels.push_back(d.label);
    const vision::Image& under = masks.empty() ? img : vision::draw_masks(img, masks, labels);
    write_file_atomically(a.draw_out, vision::encode_png(vision::draw_detections(under, dets)));
    std::printf("wrote %s\n", a.draw_out.c_str());
  }
}

}  // namespace

void add_detect_command(CLI::App& app) {
  static DetectArgs a;
  auto* cmd = app.add_subcommand("detect", "Find the objects a text prompt names in one image (GroundingDINO-style)");
  cmd->add_option("image", a.image,
                  "PNG, JPEG, BMP, GIF (first frame), WebP or TIFF image, told by its content")
      ->required();
  add_query_options(cmd, a.q);
  cmd->add_option("--json", a.json_out,
                  "write the detections as JSON to this file (with --masks: each with its mask as COCO "
                  "uncompressed RLE and its area)");
  cmd->add_option("--draw", a.draw_out,
                  "write the image with boxes, labels (and masks) drawn as PNG to this file");
  cmd->add_flag("--auto", a.use_auto,
               "no prompt: tag the image first (--tagger) and detect the tags, joined with ' . '; the tags are "
               "printed. Masks only with --masks, as without --auto");
  cmd->add_option("--tagger", a.tagger,
                  "--auto's tagger: a folder with model.onnx and tags.json (RAM contract; default: the shipped "
                  "demo tagger, models/demo-tagger)");
  cmd->add_option("--tag-threshold", a.tag_threshold,
                  "--auto: one threshold for every tag instead of the tag list's");
  add_masks_option(cmd, a.masks);
  cmd->add_option("--repeat", a.repeat,
                  "run the whole detection this many times on the image and print each run's time (the "
                  "first also touches the session's memory for the first time; the later ones are what a "
                  "server sees); the output and latency_ms are the first run's, --json adds "
                  "repeat_latency_ms with every run")
      ->check(CLI::Range(1, 1000));
  add_pipeline_options(cmd, a.p);
  cmd->callback([] { detect(a); });
}

}  // namespace vlrt

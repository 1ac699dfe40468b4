// vlrt tag IMAGE [IMAGE...] --model DIR: the tags of each image with their scores, from a
// RAM-contract tagger and the tag list beside it; all images in one batch.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/auto_prompt.h"
#include "apps/commands.h"
#include "integrity/load_model.h"
#include "io/files.h"
#include "pipelines/tagging/tagger.h"

namespace vlrt {

namespace {

struct TagArgs {
  std::vector<std::string> images;
  std::string model;
  std::string tags;
  std::string json_out;
  std::string lang;
  std::optional<float> threshold;
  int threads = 0;
  DeviceArgs device_args;
};

void run_tag(const TagArgs& a) {
  if (a.threshold && !(*a.threshold >= 0 && *a.threshold <= 1))
    fail("--threshold ", *a.threshold, " is not in 0..1");
  std::vector<vision::Image> images;
  for (auto& path : a.images) images.push_back(vision::load_image(path));
  SessionOptions options;
  options.threads = a.threads;
  options.plan = plan_options(a.device_args);
  tagging::Tagger tagger(load_model(tagger_model_file(a.model)), options, {a.threshold, a.tags});

  std::vector<const vision::Image*> batch;
  for (auto& img : images) batch.push_back(&img);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<tagging::ImageTags> results = tagger.tag(batch);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu image(s) in one batch: %.0f ms, %.0f ms per image; %zu tags in the list\n", images.size(),
              ms, ms / double(images.size()), tagger.tags().size());

  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < images.size(); i++) {
    std::printf("%s: %zu tags\n", a.images[i].c_str(), results[i].tags.size());
    nlohmann::json tags = nlohmann::json::array();
    for (const tagging::ScoredTag& t : results[i].tags) {
      const std::string& name = tagger.tags()[size_t(t.index)].name_in(a.lang);
      std::printf("  %.4f  %s\n", t.score, name.c_str());
      tags.push_back({{"name", name}, {"index", t.index}, {"score", t.score}});
    }
    out.push_back(
        {{"image", a.images[i]}, {"width", images[i].width}, {"height", images[i].height}, {"tags", tags}});
  }
  if (!a.json_out.empty()) {
    write_file_atomically(
        a.json_out,
        nlohmann::json{{"ms_per_image", ms / double(images.size())}, {"images", out}}.dump() + "\n");
    std::printf("wrote %s\n", a.json_out.c_str());
  }
}

}  // namespace

void add_tag_command(CLI::App& app) {
  static TagArgs a;
  auto* cmd = app.add_subcommand(
      "tag", "Tag images with a RAM / RAM++ tagger: every tag above its threshold, with its score");
  cmd->add_option("images", a.images, "PNG, JPEG, BMP, GIF, WebP or TIFF images, run as one batch")
      ->required();
  cmd->add_option("-m,--model", a.model,
                  "the tagger: a folder with model.onnx and tags.json (tools/export_ram_plus.py writes one), "
                  "or the .onnx")
      ->required();
  cmd->add_option("--tags", a.tags,
                  "the tag list (tags.json or one name per line .txt); default: beside the model");
  cmd->add_option("--json", a.json_out, "write each image's tags and scores as JSON to this file");
  cmd->add_option("--threshold", a.threshold,
                  "one threshold for every tag instead of the list's per-tag ones");
  cmd->add_option("--lang", a.lang,
                  "print the tags' names in this language of the list (\"zh\") where it has them");
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  add_device_options(cmd, a.device_args);
  cmd->callback([] { run_tag(a); });
}

}  // namespace vlrt

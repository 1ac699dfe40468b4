// vlrt segment IMAGE --model DIR --box x1,y1,x2,y2 [--point x,y[,label] ...]: one SAM mask per
// prompt, with its predicted IoU and area; JSON with COCO RLE masks, a PNG with the masks drawn.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "io/files.h"
#include "io/npy.h"
#include "pipelines/segment/segmenter.h"
#include "vision/draw.h"

namespace vlrt {

namespace {

struct SegmentArgs {
  std::string image;
  std::string model;
  std::vector<std::string> boxes, points;
  std::string json_out, draw_out, logits_dir;
  int threads = 0;
  DeviceArgs device_args;
};

std::vector<segment::Prompt> make_prompts(const SegmentArgs& a) {
  std::vector<segment::Box> boxes;
  std::vector<segment::Point> points;
  for (auto& b : a.boxes) boxes.push_back(segment::parse_box(b));
  for (auto& p : a.points) points.push_back(segment::parse_point(p));
  return segment::make_prompts(boxes, points);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void write_json(const SegmentArgs& a, const vision::Image& img, const std::vector<segment::Segment>& segments,
                double encoder_ms, double decoder_ms) {
  nlohmann::json j = {{"image", a.image},
                      {"width", img.width},
                      {"height", img.height},
                      {"encoder_ms", encoder_ms},
                      {"decoder_ms", decoder_ms},
                      {"rle", segment::kRleFormat},
                      {"masks", segment::masks_json(segments)}};
  write_file_atomically(a.json_out, j.dump() + "\n");
  std::printf("wrote %s\n", a.json_out.c_str());
}

void draw(const SegmentArgs& a, const vision::Image& img, const std::vector<segment::Segment>& segments) {
  std::vector<vision::Mask> masks;
  std::vector<std::string> labels;
  std::vector<vision::Detection> boxes;
  for (size_t i = 0; i < segments.size(); i++) {
    const segment::Segment& s = segments[i];
    masks.push_back(s.mask);
    labels.push_back(cat("prompt ", i + 1));
    vision::MaskBox mb = vision::mask_box(s.mask);
    vision::Detection d{labels.back(), int(i), s.iou, float(mb.x1), float(mb.y1), float(mb.x2), float(mb.y2)};
    if (s.prompt.box)
      d.x1 = s.prompt.box->x1, d.y1 = s.prompt.box->y1, d.x2 = s.prompt.box->x2, d.y2 = s.prompt.box->y2;
    boxes.push_back(d);
  }
  write_file_atomically(
      a.draw_out, vision::encode_png(vision::draw_detections(vision::draw_masks(img, masks, labels), boxes)));
  std::printf("wrote %s\n", a.draw_out.c_str());
}

void run_segment(const SegmentArgs& a) {
  std::vector<segment::Prompt> prompts = make_prompts(a);
  vision::Image img = vision::load_image(a.image);
  for (auto& p : prompts) segment::check_prompt(p, img.width, img.height);
  SessionOptions options;
  options.threads = a.threads;
  options.plan = plan_options(a.device_args);
  segment::Segmenter segmenter(a.model, options);

  auto t0 = std::chrono::steady_clock::now();
  segment::ImageEmbedding embedding = segmenter.embed(img);
  double encoder_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::vector<segment::Segment> segments = segmenter.segment(embedding, prompts);
  double decoder_ms = ms_since(t0);

  std::printf("%s: %dx%d (encoder input %dx%d padded to %d), %zu prompts; encoder %.0f ms, decoder %.0f ms\n",
              a.image.c_str(), img.width, img.height, embedding.resized_width, embedding.resized_height,
              segmenter.config().image_size, prompts.size(), encoder_ms, decoder_ms);
  std::printf("  %2s  %-32s  %4s  %6s  %9s\n", "#", "prompt", "mask", "iou", "area");
  for (size_t i = 0; i < segments.size(); i++) {
    const segment::Segment& s = segments[i];
    std::printf("  %2zu  %-32s  %4d  %6.4f  %9lld\n", i + 1, s.prompt.describe().c_str(), s.mask_index, s.iou,
                static_cast<long long>(vision::mask_area(s.mask)));
  }
  if (!a.logits_dir.empty()) {
    for (size_t i = 0; i < segments.size(); i++) {
      Tensor t(DType::f32, {img.height, img.width});
      std::copy(segments[i].logits.begin(), segments[i].logits.end(), t.data<float>());
      write_npy(cat(a.logits_dir, "/mask_logits_", i + 1, ".npy"), t);
    }
    std::printf("wrote %zu mask logits to %s\n", segments.size(), a.logits_dir.c_str());
  }
  if (!a.json_out.empty()) write_json(a, img, segments, encoder_ms, decoder_ms);
  if (!a.draw_out.empty()) draw(a, img, segments);
}

}  // namespace

void add_segment_command(CLI::App& app) {
  static SegmentArgs a;
  auto* cmd =
      app.add_subcommand("segment", "Segment the objects that boxes or points prompt in one image (SAM)");
  cmd->add_option("image", a.image,
                  "PNG, JPEG, BMP, GIF (first frame), WebP or TIFF image, told by its content")
      ->required();
  cmd->add_option(
         "-m,--model", a.model,
         "SAM model folder: encoder.onnx, decoder.onnx and sam.json (tools/export_sam.py writes one)")
      ->required();
  cmd->add_option("--box", a.boxes, "x1,y1,x2,y2 in image pixels: one mask each (repeatable)");
  cmd->add_option("--point", a.points,
                  "x,y[,label] (label 1 foreground, the default, or 0 background): added to the one --box's "
                  "prompt, or a prompt of their own without --box (repeatable)");
  cmd->add_option("--json", a.json_out,
                  "write the masks (COCO uncompressed RLE), IoU predictions and areas as JSON");
  cmd->add_option("--draw", a.draw_out,
                  "write the image with the masks and prompts drawn as PNG to this file");
  cmd->add_option("--logits", a.logits_dir, "write each chosen mask's logits as DIR/mask_logits_<n>.npy");
  cmd->add_option("-t,--threads", a.threads, "worker threads (default: all cores)");
  add_device_options(cmd, a.device_args);
  cmd->callback([] { run_segment(a); });
}

}  // namespace vlrt

#include "pipelines/segment/segmenter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "integrity/load_model.h"
#include "pipelines/contract.h"
#include "io/files.h"

namespace vlrt::segment {

namespace fs = std::filesystem;

SamConfig read_sam_config(const std::string& dir) {
  SamConfig c;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("SAM model folder '", dir,
         "' is not a directory; pass the folder holding encoder.onnx, decoder.onnx and sam.json");
  fs::path path = fs::path(dir) / "sam.json";
  if (!fs::exists(path, ec)) return c;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path.string()));
    if (!j.is_object()) fail("it is not a JSON object");
    if (j.contains("encoder")) c.encoder = j.at("encoder").get<std::string>();
    if (j.contains("decoder")) c.decoder = j.at("decoder").get<std::string>();
    if (j.contains("image_size")) c.image_size = j.at("image_size").get<int>();
    if (j.contains("mask_threshold")) c.mask_threshold = j.at("mask_threshold").get<float>();
    for (const char* key : {"pixel_mean", "pixel_std"}) {
      if (!j.contains(key)) continue;
      auto v = j.at(key).get<std::vector<float>>();
      if (v.size() != 3) fail("'", key, "' has ", v.size(), " values, expected 3 (R, G, B)");
      std::copy(v.begin(), v.end(), std::string(key) == "pixel_mean" ? c.pixel_mean : c.pixel_std);
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path.string(), ": ", e.what());
  } catch (const Error& e) {
    fail(path.string(), ": ", e.what());
  }
  if (c.image_size < 16 || c.image_size > 8192)
    fail(path.string(), ": image_size ", c.image_size, " is not in 16..8192");
  for (float s : c.pixel_std)
    if (!(s > 0)) fail(path.string(), ": pixel_std must be positive");
  return c;
}

std::pair<int, int> resized_size(int width, int height, int image_size) {
  double scale = double(image_size) / double(std::max(width, height));
  return {int(double(width) * scale + 0.5), int(double(height) * scale + 0.5)};
}

Tensor sam_pixels(const vision::Image& image, const SamConfig& c) {
  auto [w, h] = resized_size(image.width, image.height, c.image_size);
  vision::Image resized =
      image.width == w && image.height == h ? image : vision::resize_bilinear(image, w, h);
  int64_t s = c.image_size;
  Tensor out(DType::f32, {1, 3, s, s});
  float* px = out.data<float>();
  std::fill(px, px + 3 * s * s, 0.f);
  for (int ch = 0; ch < 3; ch++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++)
        px[(ch * s + y) * s + x] =
            (float(resized.rgb[(size_t(y) * w + x) * 3 + ch]) - c.pixel_mean[ch]) / c.pixel_std[ch];
  return out;
}

void check_decoder_contract(const Model& m) {
  std::vector<std::string> problems;
  check_values(m.graph.inputs,
               {{"image_embeddings", 4},
                {"point_coords", 3},
                {"point_labels", 2},
                {"mask_input", 4},
                {"has_mask_input", 1},
                {"orig_im_size", 1}},
               "input", problems);
  check_values(m.graph.outputs, {{"masks", 4}, {"iou_predictions", 2}}, "output", problems);
  if (!problems.empty())
    fail_contract(
        m, "SAM decoder", problems,
        "inputs image_embeddings float32[1,C,E,E], point_coords float32[B,N,2], point_labels "
        "float32[B,N], mask_input float32[1,1,4E,4E], has_mask_input float32[1], orig_im_size "
        "float32[2]; outputs masks float32[B,M,H,W], iou_predictions float32[B,M] (segment-anything's "
        "SamOnnxModel export)");
}

void check_encoder_contract(const Model& m, int image_size) {
  std::vector<std::string> problems;
  if (m.graph.inputs.size() != 1) {
    problems.push_back(cat("has ", m.graph.inputs.size(), " inputs, expected one"));
  } else {
    const ValueDecl& in = m.graph.inputs[0];
    if (in.dtype != DType::f32)
      problems.push_back(cat("input '", in.name, "' is ", dtype_name(in.dtype), ", expected float32"));
    if (in.has_shape) {
      bool ok = in.dims.size() == 4;
      for (size_t i = 0; ok && i < 4; i++) {
        int64_t want = i == 0 ? 1 : i == 1 ? 3 : image_size;
        ok = in.dims[i].value < 0 || in.dims[i].value == want;
      }
      if (!ok)
        problems.push_back(cat("input '", in.name, "' is ", in.describe(), ", expected [1,3,", image_size,
                               ",", image_size, "]"));
    }
  }
  if (m.graph.outputs.size() != 1 && !find_decl(m.graph.outputs, "image_embeddings"))
    problems.push_back("missing output 'image_embeddings'");
  if (!problems.empty())
    fail_contract(m, "SAM encoder", problems,
                  cat("input pixels float32[1,3,", image_size, ",", image_size,
                      "] (image_size of sam.json) and output image_embeddings float32[1,C,E,E]")
                      .c_str());
}

int select_mask(const std::vector<float>& iou, int64_t decoder_points) {
  if (iou.size() <= 1) return 0;
  if (decoder_points > 2) return 0;
  return int(std::max_element(iou.begin() + 1, iou.end()) - iou.begin());
}

namespace {

Model load_beside(const std::string& dir, const std::string& name, const char* what) {
  fs::path path = fs::path(dir) / name;
  std::error_code ec;
  if (!fs::exists(path, ec))
    fail("SAM model folder '", dir, "' has no ", what, " '", name,
         "'; it needs encoder.onnx and decoder.onnx (",
         "or the files its sam.json names), as tools/export_sam.py writes them");
  return load_model(path.string());
}

}  // namespace

Segmenter::Segmenter(const std::string& dir, SessionOptions options)
    : Segmenter(load_beside(dir, read_sam_config(dir).encoder, "encoder"), dir, std::move(options)) {}

Segmenter::Segmenter(Model encoder, const std::string& dir, SessionOptions options)
    : config_(read_sam_config(dir)) {
  check_encoder_contract(encoder, config_.image_size);
  Model decoder = load_beside(dir, config_.decoder, "decoder");
  check_decoder_contract(decoder);
  encoder_input_ = encoder.graph.inputs[0].name;
  encoder_output_ = find_decl(encoder.graph.outputs, "image_embeddings") ? "image_embeddings"
                                                                         : encoder.graph.outputs[0].name;
  const ValueDecl* mask_input = find_decl(decoder.graph.inputs, "mask_input");
  if (mask_input->has_shape && mask_input->dims[2].value > 0) mask_input_size_ = mask_input->dims[2].value;
  const ValueDecl* coords = find_decl(decoder.graph.inputs, "point_coords");
  batch_prompts_ = !coords->has_shape || coords->dims[0].value < 0;
  encoder_ = std::make_unique<Session>(std::move(encoder), options);
  decoder_ = std::make_unique<Session>(std::move(decoder), std::move(options));
}

ImageEmbedding Segmenter::embed(const vision::Image& image) {
  ImageEmbedding e;
  e.width = image.width;
  e.height = image.height;
  std::tie(e.resized_width, e.resized_height) = resized_size(image.width, image.height, config_.image_size);
  TensorMap out = encoder_->run({{encoder_input_, sam_pixels(image, config_)}});
  e.embeddings = std::move(out.at(encoder_output_));
  VLRT_CHECK(e.embeddings.rank() == 4 && e.embeddings.dim(0) == 1, encoder_->model().path, ": output '",
             encoder_output_, "' is ", e.embeddings.describe(), ", expected [1,C,E,E]");
  return e;
}

std::vector<Segment> Segmenter::segment(const ImageEmbedding& e, const std::vector<Prompt>& prompts) {
  for (auto& p : prompts) check_prompt(p, e.width, e.height);
  // Groups of prompts with the same number of decoder points, in their order.
  std::vector<Segment> out(prompts.size());
  std::map<size_t, std::vector<size_t>> by_points;
  for (size_t i = 0; i < prompts.size(); i++)
    by_points[prompts[i].points.size() + (prompts[i].box ? 2 : 1)].push_back(i);
  for (auto& [n, indices] : by_points) {
    size_t step = batch_prompts_ ? indices.size() : 1;
    for (size_t begin = 0; begin < indices.size(); begin += step) {
      std::vector<Prompt> group;
      for (size_t k = begin; k < begin + step; k++) group.push_back(prompts[indices[k]]);
      auto segments = run_decoder(e, group);
      for (size_t k = 0; k < segments.size(); k++) out[indices[begin + k]] = std::move(segments[k]);
    }
  }
  return out;
}

std::vector<Segment> Segmenter::run_decoder(const ImageEmbedding& e, const std::vector<Prompt>& prompts) {
  int64_t b = int64_t(prompts.size());
  std::vector<DecoderPoints> points;
  for (auto& p : prompts)
    points.push_back(decoder_points(p, e.width, e.height, e.resized_width, e.resized_height));
  int64_t n = int64_t(points[0].labels.size());
  Tensor coords(DType::f32, {b, n, 2}), labels(DType::f32, {b, n});
  for (int64_t i = 0; i < b; i++) {
    std::memcpy(coords.data<float>() + i * n * 2, points[size_t(i)].coords.data(),
                size_t(n) * 2 * sizeof(float));
    std::memcpy(labels.data<float>() + i * n, points[size_t(i)].labels.data(), size_t(n) * sizeof(float));
  }
  Tensor mask_input(DType::f32, {1, 1, mask_input_size_, mask_input_size_});
  std::memset(mask_input.raw(), 0, mask_input.nbytes());
  Tensor has_mask(DType::f32, {1});
  has_mask.data<float>()[0] = 0;
  Tensor size(DType::f32, {2});
  size.data<float>()[0] = float(e.height);
  size.data<float>()[1] = float(e.width);
  TensorMap out = decoder_->run({{"image_embeddings", e.embeddings},
                                 {"point_coords", std::move(coords)},
                                 {"point_labels", std::move(labels)},
                                 {"mask_input", std::move(mask_input)},
                                 {"has_mask_input", std::move(has_mask)},
                                 {"orig_im_size", std::move(size)}});
  const Tensor& masks = out.at("masks");
  const Tensor& iou = out.at("iou_predictions");
  VLRT_CHECK(masks.rank() == 4 && masks.dim(0) == b && masks.dim(2) == e.height && masks.dim(3) == e.width &&
                 iou.rank() == 2 && iou.dim(0) == b && iou.dim(1) == masks.dim(1),
             decoder_->model().path, ": outputs masks ", masks.describe(), " and iou_predictions ",
             iou.describe(), "; expected [", b, ",M,", e.height, ",", e.width, "] and [", b, ",M]");
  int64_t m = masks.dim(1), pixels = int64_t(e.width) * e.height;
  std::vector<Segment> segments(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; i++) {
    Segment& s = segments[size_t(i)];
    s.prompt = prompts[size_t(i)];
    s.iou_predictions.assign(iou.data<float>() + i * m, iou.data<float>() + (i + 1) * m);
    s.mask_index = select_mask(s.iou_predictions, n);
    s.iou = s.iou_predictions[size_t(s.mask_index)];
    const float* logits = masks.data<float>() + (i * m + s.mask_index) * pixels;
    s.logits.assign(logits, logits + pixels);
    s.mask = {e.width, e.height, std::vector<uint8_t>(size_t(pixels))};
    for (int64_t p = 0; p < pixels; p++)
      s.mask.pixels[size_t(p)] = logits[p] > config_.mask_threshold ? 1 : 0;
  }
  return segments;
}

namespace {

nlohmann::json prompt_json(const Prompt& p) {
  nlohmann::json j = nlohmann::json::object();
  if (p.box) j["box"] = {p.box->x1, p.box->y1, p.box->x2, p.box->y2};
  if (!p.points.empty()) {
    j["points"] = nlohmann::json::array();
    for (auto& pt : p.points) j["points"].push_back({pt.x, pt.y, pt.label});
  }
  return j;
}

}  // namespace

nlohmann::json rle_json(const vision::Mask& mask) {
  return {{"size", {mask.height, mask.width}}, {"counts", vision::rle_counts(mask)}};
}

nlohmann::json masks_json(const std::vector<Segment>& segments) {
  nlohmann::json out = nlohmann::json::array();
  for (auto& s : segments) {
    vision::MaskBox b = vision::mask_box(s.mask);
    out.push_back({{"prompt", prompt_json(s.prompt)},
                   {"mask_index", s.mask_index},
                   {"iou_prediction", s.iou},
                   {"iou_predictions", s.iou_predictions},
                   {"area", vision::mask_area(s.mask)},
                   {"bbox", {b.x1, b.y1, b.x2 - b.x1, b.y2 - b.y1}},
                   {"segmentation", rle_json(s.mask)}});
  }
  return out;
}

namespace {

bool has_area(const vision::Detection& d) { return d.x2 > d.x1 && d.y2 > d.y1; }

std::vector<vision::Mask> empty_masks(size_t count, int width, int height) {
  return std::vector<vision::Mask>(
      count, vision::Mask{width, height, std::vector<uint8_t>(size_t(width) * size_t(height))});
}

}  // namespace

std::vector<vision::Mask> segment_detections(Segmenter& segmenter, const vision::Image& image,
                                             const std::vector<vision::Detection>& detections) {
  if (std::any_of(detections.begin(), detections.end(), has_area))
    return segment_detections(segmenter, segmenter.embed(image), detections);
  return empty_masks(detections.size(), image.width, image.height);
}

std::vector<vision::Mask> segment_detections(Segmenter& segmenter, const ImageEmbedding& embedding,
                                             const std::vector<vision::Detection>& detections) {
  std::vector<vision::Mask> masks = empty_masks(detections.size(), embedding.width, embedding.height);
  std::vector<Prompt> prompts;
  std::vector<size_t> prompted;
  for (size_t i = 0; i < detections.size(); i++) {
    const vision::Detection& d = detections[i];
    if (!has_area(d)) continue;
    prompts.push_back({Box{d.x1, d.y1, d.x2, d.y2}, {}});
    prompted.push_back(i);
  }
  if (prompts.empty()) return masks;
  std::vector<Segment> segments = segmenter.segment(embedding, prompts);
  for (size_t k = 0; k < prompted.size(); k++) masks[prompted[k]] = std::move(segments[k].mask);
  return masks;
}

}  // namespace vlrt::segment

#include "pipelines/grounding/detector.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/files.h"

namespace vlrt::grounding {

namespace fs = std::filesystem;

void check_grounding_contract(const Model& model) {
  struct Want {
    const char* name;
    DType dtype;
    size_t rank;
  };
  const Want inputs[] = {{"img", DType::f32, 4},           {"input_ids", DType::i64, 2},
                         {"attention_mask", DType::boolean, 2}, {"position_ids", DType::i64, 2},
                         {"token_type_ids", DType::i64, 2}, {"text_token_mask", DType::boolean, 3}};
  const Want outputs[] = {{"logits", DType::f32, 3}, {"boxes", DType::f32, 3}};
  std::vector<std::string> problems;
  auto check = [&](const std::vector<ValueDecl>& have, const Want& w, const char* kind) {
    for (auto& v : have) {
      if (v.name != w.name) continue;
      if (v.dtype != w.dtype)
        problems.push_back(cat(kind, " '", w.name, "' is ", dtype_name(v.dtype), ", expected ", dtype_name(w.dtype)));
      if (v.has_shape && v.dims.size() != w.rank)
        problems.push_back(cat(kind, " '", w.name, "' has rank ", v.dims.size(), " (", v.describe(), "), expected ", w.rank));
      return;
    }
    problems.push_back(cat("missing ", kind, " '", w.name, "' (", dtype_name(w.dtype), ", rank ", w.rank, ")"));
  };
  for (auto& w : inputs) check(model.graph.inputs, w, "input");
  for (auto& w : outputs) check(model.graph.outputs, w, "output");
  for (auto& v : model.graph.inputs) {
    bool known = false;
    for (auto& w : inputs) known = known || v.name == w.name;
    if (!known) problems.push_back(cat("unexpected input '", v.name, "' (", v.describe(), ")"));
  }
  for (auto& v : model.graph.outputs) {
    if (v.name == "boxes" && v.has_shape && v.dims.size() == 3 && v.dims[2].value >= 0 && v.dims[2].value != 4)
      problems.push_back(cat("output 'boxes' is ", v.describe(), ", its last axis must be 4 (cx,cy,w,h)"));
  }
  if (problems.empty()) return;
  std::string msg = cat(model.path, " does not follow the GroundingDINO model contract:");
  for (auto& p : problems) msg += "\n  - " + p;
  msg += "\n  expected inputs img float32[B,3,H,W], input_ids int64[B,L], attention_mask bool[B,L], "
         "position_ids int64[B,L], token_type_ids int64[B,L], text_token_mask bool[B,L,L]; outputs logits "
         "float32[B,900,256], boxes float32[B,900,4]";
  fail(msg);
}

std::vector<Detection> postprocess(const float* logits, const float* boxes, int64_t queries,
                                   int64_t token_slots, const EncodedCaption& caption, int image_width,
                                   int image_height, const DetectOptions& o, const Ontology* classes) {
  std::vector<Detection> out;
  std::vector<float> prob(static_cast<size_t>(token_slots));
  for (int64_t q = 0; q < queries; q++) {
    const float* l = logits + q * token_slots;
    float best = 0;
    for (int64_t t = 0; t < token_slots; t++) {
      prob[t] = 1.f / (1.f + std::exp(-l[t]));
      best = std::max(best, prob[t]);
    }
    if (!(best > o.box_threshold)) continue;
    Detection d;
    d.score = best;
    // Whole phrases, not single tokens: the phrase whose best token passes the text
    // threshold with the highest score names the box.
    float best_phrase = o.text_threshold;
    for (size_t p = 0; p < caption.phrases.size(); p++) {
      const Phrase& ph = caption.phrases[p];
      for (int64_t t = ph.begin; t < ph.end && t < token_slots; t++) {
        if (prob[t] > best_phrase) {
          best_phrase = prob[t];
          size_t phrase = caption.first_phrase + p;
          d.category = classes ? classes->phrase_class[phrase] : int(phrase);
          d.label = classes ? classes->classes[size_t(d.category)].name : ph.text;
        }
      }
    }
    const float* b = boxes + q * 4;
    float cx = b[0] * float(image_width), cy = b[1] * float(image_height);
    float w = b[2] * float(image_width), h = b[3] * float(image_height);
    auto clampf = [](float v, float hi) { return std::min(std::max(v, 0.f), hi); };
    d.x1 = clampf(cx - w / 2, float(image_width));
    d.y1 = clampf(cy - h / 2, float(image_height));
    d.x2 = clampf(cx + w / 2, float(image_width));
    d.y2 = clampf(cy + h / 2, float(image_height));
    out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](const Detection& a, const Detection& b) { return a.score > b.score; });
  if (o.nms_iou > 0) out = vision::suppress_overlaps(out, o.nms_iou, o.nms_agnostic);
  return out;
}

std::vector<Detection> merge_passes(std::vector<std::vector<Detection>> per_pass, const DetectOptions& o) {
  std::vector<Detection> out;
  for (auto& pass : per_pass) out.insert(out.end(), pass.begin(), pass.end());
  std::stable_sort(out.begin(), out.end(), [](const Detection& a, const Detection& b) { return a.score > b.score; });
  if (o.nms_iou > 0) out = vision::suppress_overlaps(out, o.nms_iou, o.nms_agnostic);
  return out;
}

namespace {

float metadata_float(const Model& m, const std::string& key, float fallback) {
  auto it = m.metadata.find(key);
  if (it == m.metadata.end()) return fallback;
  try {
    return std::stof(it->second);
  } catch (const std::exception&) {
    fail(m.path, ": metadata ", key, "='", it->second, "' is not a number");
  }
}

}  // namespace

Detector::Detector(Model model, const std::string& vocab_path, SessionOptions session_options)
    : tokenizer_(text::BertTokenizer::load(vocab_path)) {
  check_grounding_contract(model);
  options_.resize.short_side = int(metadata_float(model, "vlrt.short_side", float(options_.resize.short_side)));
  options_.resize.max_side = int(metadata_float(model, "vlrt.max_side", float(options_.resize.max_side)));
  options_.box_threshold = metadata_float(model, "vlrt.box_threshold", options_.box_threshold);
  options_.text_threshold = metadata_float(model, "vlrt.text_threshold", options_.text_threshold);
  options_.nms_iou = metadata_float(model, "vlrt.nms", options_.nms_iou);
  options_.nms_agnostic = metadata_float(model, "vlrt.nms_agnostic", 0) != 0;
  // The token axis of the logits bounds a caption's length.
  for (auto& v : model.graph.outputs)
    if (v.name == "logits" && v.has_shape && v.dims.size() == 3 && v.dims[2].value > 0)
      options_.max_text_length = v.dims[2].value;
  // Fixed-size exports: every image is resized to the declared H and W.
  for (auto& v : model.graph.inputs)
    if (v.name == "img" && v.has_shape && v.dims.size() == 4 && v.dims[2].value > 0 && v.dims[3].value > 0) {
      options_.resize.fixed_height = int(v.dims[2].value);
      options_.resize.fixed_width = int(v.dims[3].value);
    }
  session_ = std::make_unique<Session>(std::move(model), std::move(session_options));
}

EncodedCaption Detector::encode(const std::string& prompt) const {
  return encode_caption(tokenizer_, prompt, options_.max_text_length);
}

std::vector<EncodedCaption> Detector::encode_passes(const std::string& prompt) const {
  return split_caption(tokenizer_, prompt, options_.max_text_length, options_.max_phrases_per_pass);
}

std::map<std::string, std::pair<DType, Shape>> grounding_signature(int64_t n, int width, int height,
                                                                   int64_t text_length) {
  return {{"img", {DType::f32, {n, 3, height, width}}},
          {"input_ids", {DType::i64, {n, text_length}}},
          {"attention_mask", {DType::boolean, {n, text_length}}},
          {"position_ids", {DType::i64, {n, text_length}}},
          {"token_type_ids", {DType::i64, {n, text_length}}},
          {"text_token_mask", {DType::boolean, {n, text_length, text_length}}}};
}

int64_t Detector::max_batch(int width, int height, const EncodedCaption& caption) {
  auto sig = grounding_signature(1, width, height, int64_t(caption.input_ids.size()));
  BatchSizing s = session_->size_batches(sig, 64);
  return std::max<int64_t>(1, s.max_batch);
}

namespace {

// The caption's text tensors repeated for a batch of `n` images.
Tensor repeat_batch(const Tensor& t, int64_t n) {
  Shape shape = t.shape();
  shape[0] = n;
  Tensor out(t.dtype(), shape);
  for (int64_t i = 0; i < n; i++)
    std::memcpy(static_cast<char*>(out.raw()) + size_t(i) * t.nbytes(), t.raw(), t.nbytes());
  return out;
}

}  // namespace

TensorMap grounding_inputs(Tensor img, const TextInputs& text) {
  int64_t n = img.dim(0);
  return {{"img", std::move(img)},
          {"input_ids", repeat_batch(text.input_ids, n)},
          {"attention_mask", repeat_batch(text.attention_mask, n)},
          {"position_ids", repeat_batch(text.position_ids, n)},
          {"token_type_ids", repeat_batch(text.token_type_ids, n)},
          {"text_token_mask", repeat_batch(text.text_token_mask, n)}};
}

std::pair<Tensor, Tensor> Detector::run(Tensor pixels, const EncodedCaption& caption) {
  int64_t n = pixels.dim(0);
  TensorMap out = session_->run(grounding_inputs(std::move(pixels), make_text_inputs(tokenizer_, {caption})));
  Tensor& logits = out.at("logits");
  Tensor& boxes = out.at("boxes");
  VLRT_CHECK(logits.rank() == 3 && logits.dim(0) == n && boxes.rank() == 3 && boxes.dim(0) == n &&
                 boxes.dim(2) == 4 && boxes.dim(1) == logits.dim(1),
             "model outputs logits ", logits.describe(), " and boxes ", boxes.describe(),
             "; expected [B,Q,T] and [B,Q,4]");
  return {std::move(logits), std::move(boxes)};
}

std::vector<std::vector<Detection>> Detector::detect(const std::vector<const vision::Image*>& images,
                                                     const EncodedCaption& caption) {
  std::vector<std::vector<Detection>> results(images.size());
  size_t i = 0;
  while (i < images.size()) {
    auto [w, h] = input_size(*images[i]);
    size_t j = i + 1;
    while (j < images.size() && input_size(*images[j]) == std::make_pair(w, h)) j++;
    std::vector<vision::Image> resized;
    resized.reserve(j - i);
    for (size_t k = i; k < j; k++)
      resized.push_back(images[k]->width == w && images[k]->height == h ? *images[k]
                                                                        : vision::resize_bilinear(*images[k], w, h));
    std::vector<const vision::Image*> ptrs;
    for (auto& r : resized) ptrs.push_back(&r);
    int64_t n = int64_t(j - i);
    auto [logits, boxes] = run(vision::normalize_images(ptrs), caption);
    int64_t q = logits.dim(1), t = logits.dim(2);
    for (int64_t b = 0; b < n; b++)
      results[i + b] = postprocess(logits.data<float>() + b * q * t, boxes.data<float>() + b * q * 4, q, t, caption,
                                   images[i + b]->width, images[i + b]->height, options_);
    i = j;
  }
  return results;
}

std::string default_model_path() { return find_shipped_file("models/demo/model.onnx"); }

std::string default_vocab_path(const Model& model) {
  auto it = model.metadata.find("vlrt.vocab");
  std::string name = it == model.metadata.end() ? "vocab.txt" : it->second;
  fs::path p = fs::path(model.path).parent_path() / name;
  std::error_code ec;
  return fs::exists(p, ec) ? p.string() : "";
}

}  // namespace vlrt::grounding

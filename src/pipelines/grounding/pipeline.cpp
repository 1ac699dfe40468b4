// GroundingDINO as a pipeline: a prompt and an image in, labelled boxes out; served at
// /v1/detect, labelled with by `vlrt label`, run by `vlrt detect`.
#include "pipelines/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "pipelines/grounding/detector.h"
#include "pipelines/grounding/request.h"
#include "text/unicode.h"

namespace vlrt {

namespace grounding {

namespace {

struct GroundingQuery : Query {
  std::vector<EncodedCaption> passes;  // one, unless the prompt is longer than the model's text length
  std::optional<Ontology> classes;  // none: each phrase is its own label
};

struct GroundingRequest : Request {
  DetectRequest fields;  // as parsed; the image's bytes are let go once decoded
  std::shared_ptr<const GroundingQuery> query;
  DetectOptions options;      // the pipeline's, with the request's thresholds
  int width = 0, height = 0;  // the original image
  int input_width = 0, input_height = 0;
  Tensor pixels;         // float32 [1,3,h,w], normalized
  std::vector<std::pair<Tensor, Tensor>> outputs;  // per pass: the whole batch's logits and boxes (shared)
  int64_t row = 0;
  std::vector<Detection> detections;
};

GroundingRequest& as_grounding(Request& r) { return static_cast<GroundingRequest&>(r); }
const GroundingRequest& as_grounding(const Request& r) { return static_cast<const GroundingRequest&>(r); }

class GroundingPipeline : public Pipeline {
 public:
  explicit GroundingPipeline(std::unique_ptr<Detector> detector) : detector_(std::move(detector)) {}

  std::string name() const override { return "grounding"; }
  Session& session() override { return detector_->session(); }
  std::string endpoint() const override { return "/v1/detect"; }

  std::unique_ptr<Request> parse(const RequestBody& body) const override {
    auto r = std::make_unique<GroundingRequest>();
    r->fields = parse_detect_request(body);
    return r;
  }

  void preprocess(Request& base, const RequestLimits& limits) const override {
    GroundingRequest& r = as_grounding(base);
    const std::string& prompt = r.fields.prompt;
    size_t bad = text::invalid_utf8_at(prompt);
    if (bad != std::string::npos) refuse(400, "'prompt' is not valid UTF-8 (byte ", bad, ")");
    if (prompt.find_first_not_of(" \t\r\n") == std::string::npos)
      refuse(400, "'prompt' is empty; give phrases separated by ' . ', e.g. \"person . bicycle .\"");
    if (prompt.size() > limits.max_prompt_bytes)
      refuse(400, "'prompt' is ", prompt.size(), " bytes; the limit is ", limits.max_prompt_bytes,
             " (a GroundingDINO caption holds at most ", detector_->options().max_text_length, " tokens)");
    std::shared_ptr<const GroundingQuery> q;
    try {
      q = make_query(prompt);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      refuse(400, "'prompt': ", e.what());
    }
    vision::Image img;
    try {
      img = vision::decode_image(r.fields.image, "image", limits.max_image_pixels);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      refuse(400, e.what());
    }
    std::string().swap(r.fields.image);
    r.options = detector_->options();
    if (r.fields.box_threshold) r.options.box_threshold = *r.fields.box_threshold;
    if (r.fields.text_threshold) r.options.text_threshold = *r.fields.text_threshold;
    prepare(r, std::move(q), img);
  }

  Signature signature(const Request& base, int64_t n) const override {
    const GroundingRequest& r = as_grounding(base);
    size_t longest = 0;
    for (auto& pass : r.query->passes) longest = std::max(longest, pass.input_ids.size());
    return grounding_signature(n, r.input_width, r.input_height, int64_t(longest));
  }

  void run(const std::vector<Request*>& batch) override {
    GroundingRequest& first = as_grounding(*batch[0]);
    int64_t n = int64_t(batch.size());
    Tensor img(DType::f32, {n, 3, first.input_height, first.input_width});
    for (int64_t i = 0; i < n; i++) {
      GroundingRequest& r = as_grounding(*batch[size_t(i)]);
      std::memcpy(static_cast<char*>(img.raw()) + size_t(i) * r.pixels.nbytes(), r.pixels.raw(),
                  r.pixels.nbytes());
      r.pixels = Tensor();
    }
    std::vector<std::pair<Tensor, Tensor>> outputs;
    for (auto& pass : first.query->passes) outputs.push_back(detector_->run(img, pass));
    for (int64_t i = 0; i < n; i++) {
      GroundingRequest& r = as_grounding(*batch[size_t(i)]);
      r.outputs = outputs;
      r.row = i;
    }
  }

  void postprocess(Request& base) const override {
    GroundingRequest& r = as_grounding(base);
    DetectOptions per_pass = r.options;
    per_pass.nms_iou = 0;  // after merging
    std::vector<std::vector<Detection>> found;
    for (size_t p = 0; p < r.outputs.size(); p++) {
      const auto& [logits, boxes] = r.outputs[p];
      int64_t q = logits.dim(1), t = logits.dim(2);
      found.push_back(grounding::postprocess(logits.data<float>() + r.row * q * t,
                                             boxes.data<float>() + r.row * q * 4, q, t, r.query->passes[p],
                                             r.width, r.height, per_pass,
                                             r.query->classes ? &*r.query->classes : nullptr));
    }
    r.detections = merge_passes(std::move(found), r.options);
    r.outputs.clear();
  }

  nlohmann::json response(const Request& base) const override {
    using nlohmann::json;
    const GroundingRequest& r = as_grounding(base);
    auto round_to = [](double v, double scale) { return std::round(v * scale) / scale; };  // shorter JSON
    json dets = json::array();
    for (auto& d : r.detections)
      dets.push_back(
          {{"label", d.label},
           {"score", round_to(d.score, 1e5)},
           {"box", {round_to(d.x1, 100), round_to(d.y1, 100), round_to(d.x2, 100), round_to(d.y2, 100)}}});
    json body = {{"detections", dets},
                 {"prompt", r.query->text},
                 {"image", {{"width", r.width}, {"height", r.height}}},
                 {"model_input", {{"width", r.input_width}, {"height", r.input_height}}}};
    if (!r.query->warning.empty()) body["warning"] = r.query->warning;
    if (r.query->passes.size() > 1) body["passes"] = r.query->passes.size();
    return body;
  }

  std::unique_ptr<Request> warm_up_request() const override {
    // A mid-gray 640x480 image and a one-word prompt.
    auto r = std::make_unique<GroundingRequest>();
    r->options = detector_->options();
    prepare(*r, make_query("object ."), vision::Image{640, 480, std::vector<uint8_t>(640 * 480 * 3, 128)});
    return r;
  }

  std::shared_ptr<const Query> query(const std::string& prompt) const override { return make_query(prompt); }

  std::shared_ptr<const Query> query(const Ontology& classes) const override {
    auto q = make_query(classes.prompt());
    size_t phrases = q->categories.size();
    if (phrases != classes.phrases.size())
      fail("the prompt \"", classes.prompt(), "\" made of the classes' phrases tokenizes to ", phrases,
           " phrases, not ", classes.phrases.size(), "; a phrase with no words cannot be a class");
    q->classes = classes;
    q->categories = classes.class_names();
    return q;
  }

  std::unique_ptr<Request> request(const std::shared_ptr<const Query>& query,
                                   const vision::Image& image) const override {
    auto q = std::dynamic_pointer_cast<const GroundingQuery>(query);
    VLRT_CHECK(q, "the grounding pipeline was given a query of another pipeline");
    auto r = std::make_unique<GroundingRequest>();
    r->options = detector_->options();
    prepare(*r, std::move(q), image);
    return r;
  }

  Record record(const Request& base) const override {
    const GroundingRequest& r = as_grounding(base);
    return {r.width, r.height, r.input_width, r.input_height, r.detections};
  }

  nlohmann::json settings(const Query& q) const override {
    const DetectOptions& o = detector_->options();
    nlohmann::json s = {{"prompt", q.text},
            {"box_threshold", o.box_threshold},
            {"text_threshold", o.text_threshold},
            {"nms", o.nms_iou},
            {"nms_agnostic", o.nms_agnostic},
            {"short_side", o.resize.short_side},
            {"max_side", o.resize.max_side}};
    if (o.max_phrases_per_pass > 0) s["max_phrases_per_pass"] = o.max_phrases_per_pass;
    return s;
  }

 private:
  std::shared_ptr<GroundingQuery> make_query(const std::string& prompt) const {
    auto q = std::make_shared<GroundingQuery>();
    q->passes = detector_->encode_passes(prompt);
    q->text = normalize_caption(prompt);
    for (auto& pass : q->passes)
      for (auto& p : pass.phrases) q->categories.push_back(p.text);
    return q;
  }

  // Resizes and normalizes the image for the model and sets the batch key.
  void prepare(GroundingRequest& r, std::shared_ptr<const GroundingQuery> q, const vision::Image& img) const {
    auto [w, h] = vision::target_size(img.width, img.height, r.options.resize);
    r.width = img.width;
    r.height = img.height;
    r.input_width = w;
    r.input_height = h;
    if (img.width != w || img.height != h) {
      vision::Image resized = vision::resize_bilinear(img, w, h);
      r.pixels = vision::normalize_images({&resized});
    } else {
      r.pixels = vision::normalize_images({&img});
    }
    r.batch_key = cat(w, "x", h, "|", q->text);
    r.query = std::move(q);
  }

  std::unique_ptr<Detector> detector_;
};

// Settings over the model's metadata (Detector reads it), by its key without "vlrt.";
// width and height fix the input size.
void apply_settings(DetectOptions& o, const std::map<std::string, double>& settings) {
  for (auto& [key, v] : settings) {
    if (key == "box_threshold")
      o.box_threshold = float(v);
    else if (key == "text_threshold")
      o.text_threshold = float(v);
    else if (key == "nms")
      o.nms_iou = float(v);
    else if (key == "nms_agnostic")
      o.nms_agnostic = v != 0;
    else if (key == "short_side")
      o.resize.short_side = int(v);
    else if (key == "max_side")
      o.resize.max_side = int(v);
    else if (key == "text_cache")
      continue;  // read when the session is made
    else if (key == "max_phrases_per_pass")
      o.max_phrases_per_pass = size_t(v);
    else if (key == "width")
      o.resize.fixed_width = int(v);
    else if (key == "height")
      o.resize.fixed_height = int(v);
    else
      fail("the grounding pipeline has no setting '", key,
           "'; it has box_threshold, text_threshold, nms, nms_agnostic, short_side, max_side, width, height, "
           "max_phrases_per_pass, text_cache");
  }
  // Class-agnostic suppression asked for with no IoU of its own: the usual 0.5.
  if (o.nms_agnostic && o.nms_iou <= 0) o.nms_iou = 0.5f;
}

std::unique_ptr<Pipeline> make_grounding(Model model, const PipelineConfig& config) {
  std::string vocab = config.vocab.empty() ? default_vocab_path(model) : config.vocab;
  if (vocab.empty()) fail("no vocab given and none beside ", model.path, "; pass --vocab vocab.txt");
  // The text branch (the values that depend on the prompt alone) runs once per prompt; with
  // text_cache=0 it runs every time, still timed.
  SessionOptions session = config.session;
  session.cached_inputs = {"input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"};
  auto text_cache = config.settings.find("text_cache");
  if (text_cache != config.settings.end() && text_cache->second == 0) session.branch_cache_entries = 0;
  auto detector = std::make_unique<Detector>(std::move(model), vocab, std::move(session));
  apply_settings(detector->options(), config.settings);
  return std::make_unique<GroundingPipeline>(std::move(detector));
}

}  // namespace

}  // namespace grounding

PipelineInfo grounding_pipeline() {
  return {"grounding", "open-vocabulary detection with a GroundingDINO-contract model",
          grounding::make_grounding, [] {
            std::string path = grounding::default_model_path();
            if (path.empty())
              fail(
                  "no model given and the demo model (models/demo/model.onnx) was not found; pass --model "
                  "MODEL.onnx");
            return path;
          }};
}

}  // namespace vlrt

// SAM as a pipeline: an image and box or point prompts in, one mask per prompt out; served at
// /v1/segment. The model is the folder's encoder; the decoder and sam.json are found beside it.
#include "pipelines/pipeline.h"

#include <filesystem>

#include "pipelines/segment/segmenter.h"

namespace vlrt {

namespace segment {

namespace {

struct SegmentQuery : Query {
  std::vector<Prompt> prompts;
};

struct SegmentRequest : Request {
  std::string image_bytes;  // as parsed; let go once decoded
  std::vector<Prompt> prompts;
  vision::Image image;
  std::vector<Segment> segments;
};

SegmentRequest& as_segment(Request& r) { return static_cast<SegmentRequest&>(r); }
const SegmentRequest& as_segment(const Request& r) { return static_cast<const SegmentRequest&>(r); }

// An item of a JSON body's "boxes" or "points": an array of numbers.
std::vector<float> numbers_of(const nlohmann::json& v, const std::string& field) {
  if (!v.is_array()) refuse(400, "'", field, "' holds JSON ", v.type_name(), "; expected arrays of numbers");
  std::vector<float> out;
  for (auto& x : v) {
    if (!x.is_number()) refuse(400, "'", field, "' holds JSON ", x.type_name(), "; expected numbers");
    out.push_back(x.get<float>());
  }
  return out;
}

// "x1,y1,x2,y2; x1,y1,x2,y2": one box prompt each.
std::vector<Prompt> parse_box_list(const std::string& text) {
  std::vector<Prompt> prompts;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(';', begin);
    std::string item = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) prompts.push_back({parse_box(item), {}});
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (prompts.empty()) fail("the prompt '", text, "' has no box; give boxes as \"x1,y1,x2,y2; x1,y1,x2,y2\"");
  return prompts;
}

class SegmentPipeline : public Pipeline {
 public:
  explicit SegmentPipeline(std::unique_ptr<Segmenter> segmenter) : segmenter_(std::move(segmenter)) {}

  std::string name() const override { return "segment"; }
  Session& session() override { return segmenter_->encoder(); }
  std::string endpoint() const override { return "/v1/segment"; }

  std::unique_ptr<Request> parse(const RequestBody& body) const override {
    if (body.multipart)
      refuse(415,
             "send application/json: {\"image\": base64, \"boxes\": [[x1,y1,x2,y2]], \"points\": "
             "[[x,y,label]]}");
    nlohmann::json j = parse_json_object(body.body);
    auto r = std::make_unique<SegmentRequest>();
    std::vector<Box> boxes;
    std::vector<Point> points;
    try {
      for (auto& [key, v] : j.items()) {
        if (key == "image") {
          if (!v.is_string()) refuse(400, "'image' is JSON ", v.type_name(), "; expected a base64 string");
          r->image_bytes = decode_base64_field("image", v.get<std::string>());
        } else if (key == "boxes" || key == "points") {
          if (!v.is_array())
            refuse(400, "'", key, "' is JSON ", v.type_name(), "; expected an array of arrays");
          for (auto& item : v) {
            std::vector<float> numbers = numbers_of(item, key);
            if (key == "boxes")
              boxes.push_back(make_box(numbers, item.dump()));
            else
              points.push_back(make_point(numbers, item.dump()));
          }
        } else {
          refuse(400, "unknown field '", key.substr(0, 64), "'; expected image, boxes, points");
        }
      }
      if (!j.contains("image")) refuse(400, "missing field 'image' (the image file, base64-encoded)");
      r->prompts = make_prompts(boxes, points);
    } catch (const RequestError&) {
      throw;
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      refuse(400, e.what());
    }
    return r;
  }

  void preprocess(Request& base, const RequestLimits& limits) const override {
    SegmentRequest& r = as_segment(base);
    try {
      r.image = vision::decode_image(r.image_bytes, "image", limits.max_image_pixels);
      for (auto& p : r.prompts) check_prompt(p, r.image.width, r.image.height);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      refuse(400, e.what());
    }
    std::string().swap(r.image_bytes);
    r.batch_key = cat("image@", static_cast<const void*>(&r));  // one image per encoder run
  }

  Signature signature(const Request&, int64_t n) const override {
    const Model& m = segmenter_->encoder().model();
    int64_t s = segmenter_->config().image_size;
    return {{m.graph.inputs[0].name, {DType::f32, {n, 3, s, s}}}};
  }

  void run(const std::vector<Request*>& batch) override {
    for (Request* base : batch) {
      SegmentRequest& r = as_segment(*base);
      r.segments = segmenter_->segment(segmenter_->embed(r.image), r.prompts);
    }
  }

  void postprocess(Request&) const override {}

  nlohmann::json response(const Request& base) const override {
    const SegmentRequest& r = as_segment(base);
    return {{"image", {{"width", r.image.width}, {"height", r.image.height}}},
            {"rle", kRleFormat},
            {"masks", masks_json(r.segments)}};
  }

  std::unique_ptr<Request> warm_up_request() const override {
    auto r = std::make_unique<SegmentRequest>();
    r->image = vision::Image{640, 480, std::vector<uint8_t>(640 * 480 * 3, 128)};
    r->prompts.push_back({Box{100, 100, 300, 300}, {}});
    r->batch_key = "warm-up";
    return r;
  }

  std::shared_ptr<const Query> query(const std::string& prompt) const override {
    auto q = std::make_shared<SegmentQuery>();
    q->prompts = parse_box_list(prompt);
    q->text = prompt;
    for (size_t i = 0; i < q->prompts.size(); i++) q->categories.push_back(cat("mask ", i + 1));
    return q;
  }

  std::shared_ptr<const Query> query(const Ontology&) const override {
    fail("the segment pipeline is prompted with boxes (\"x1,y1,x2,y2; ...\"), not with classes");
  }

  std::unique_ptr<Request> request(const std::shared_ptr<const Query>& query,
                                   const vision::Image& image) const override {
    auto q = std::dynamic_pointer_cast<const SegmentQuery>(query);
    VLRT_CHECK(q, "the segment pipeline was given a query of another pipeline");
    auto r = std::make_unique<SegmentRequest>();
    r->image = image;
    r->prompts = q->prompts;
    for (auto& p : r->prompts) check_prompt(p, image.width, image.height);
    r->batch_key = cat("image@", static_cast<const void*>(r.get()));
    return r;
  }

  Record record(const Request& base) const override {
    const SegmentRequest& r = as_segment(base);
    auto [w, h] = resized_size(r.image.width, r.image.height, segmenter_->config().image_size);
    Record rec{r.image.width, r.image.height, w, h, {}};
    for (size_t i = 0; i < r.segments.size(); i++) {
      vision::MaskBox b = vision::mask_box(r.segments[i].mask);
      rec.detections.push_back({cat("mask ", i + 1), int(i), r.segments[i].iou, float(b.x1), float(b.y1),
                                float(b.x2), float(b.y2)});
    }
    return rec;
  }

  nlohmann::json settings(const Query& q) const override {
    return {{"prompt", q.text},
            {"image_size", segmenter_->config().image_size},
            {"mask_threshold", segmenter_->config().mask_threshold}};
  }

 private:
  std::unique_ptr<Segmenter> segmenter_;
};

std::unique_ptr<Pipeline> make_segment(Model encoder, const PipelineConfig& config) {
  if (!config.settings.empty())
    fail("the segment pipeline has no setting '", config.settings.begin()->first,
         "'; its settings are sam.json's, beside the model");
  std::string dir = std::filesystem::path(encoder.path).parent_path().string();
  return std::make_unique<SegmentPipeline>(
      std::make_unique<Segmenter>(std::move(encoder), dir.empty() ? "." : dir, config.session));
}

}  // namespace

}  // namespace segment

PipelineInfo segment_pipeline() {
  return {"segment", "one mask per box or point prompt with a SAM-contract encoder and decoder (a folder)",
          segment::make_segment, nullptr};
}

}  // namespace vlrt

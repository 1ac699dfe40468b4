// The tagger as a pipeline: an image in, the tags above their thresholds with their scores
// out; served at /v1/tag. Every request shares one batch key (the input is always SxS), so
// queued images run together.
#include "pipelines/pipeline.h"

#include "pipelines/tagging/tagger.h"

namespace vlrt {

namespace tagging {

namespace {

struct TagRequest : Request {
  std::string image_bytes;  // as parsed; let go once decoded
  std::string lang;         // "" : the tag list's names
  vision::Image image;
  ImageTags result;
};

TagRequest& as_tag(Request& r) { return static_cast<TagRequest&>(r); }
const TagRequest& as_tag(const Request& r) { return static_cast<const TagRequest&>(r); }

class TagPipeline : public Pipeline {
 public:
  explicit TagPipeline(std::unique_ptr<Tagger> tagger) : tagger_(std::move(tagger)) {}

  std::string name() const override { return "tag"; }
  Session& session() override { return tagger_->session(); }
  std::string endpoint() const override { return "/v1/tag"; }

  std::unique_ptr<Request> parse(const RequestBody& body) const override {
    if (body.multipart)
      refuse(415, "send application/json: {\"image\": base64, \"lang\": \"zh\" (optional)}");
    nlohmann::json j = parse_json_object(body.body);
    auto r = std::make_unique<TagRequest>();
    for (auto& [key, v] : j.items()) {
      if (key == "image") {
        if (!v.is_string()) refuse(400, "'image' is JSON ", v.type_name(), "; expected a base64 string");
        r->image_bytes = decode_base64_field("image", v.get<std::string>());
      } else if (key == "lang") {
        if (!v.is_string()) refuse(400, "'lang' is JSON ", v.type_name(), "; expected a language code");
        r->lang = v.get<std::string>();
      } else {
        refuse(400, "unknown field '", key.substr(0, 64), "'; expected image, lang");
      }
    }
    if (!j.contains("image")) refuse(400, "missing field 'image' (the image file, base64-encoded)");
    return r;
  }

  void preprocess(Request& base, const RequestLimits& limits) const override {
    TagRequest& r = as_tag(base);
    try {
      r.image = vision::decode_image(r.image_bytes, "image", limits.max_image_pixels);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      refuse(400, e.what());
    }
    std::string().swap(r.image_bytes);
    r.batch_key = "tag";
  }

  Signature signature(const Request&, int64_t n) const override {
    int64_t s = tagger_->image_size();
    return {{tagger_->input_name(), {DType::f32, {n, 3, s, s}}}};
  }

  void run(const std::vector<Request*>& batch) override {
    std::vector<const vision::Image*> images;
    for (Request* r : batch) images.push_back(&as_tag(*r).image);
    std::vector<ImageTags> results = tagger_->tag(images);
    for (size_t i = 0; i < batch.size(); i++) {
      TagRequest& r = as_tag(*batch[i]);
      r.result = std::move(results[i]);
      r.image.rgb = {};
    }
  }

  void postprocess(Request&) const override {}

  nlohmann::json response(const Request& base) const override {
    const TagRequest& r = as_tag(base);
    nlohmann::json tags = nlohmann::json::array();
    for (const ScoredTag& t : r.result.tags)
      tags.push_back({{"name", tagger_->tags()[size_t(t.index)].name_in(r.lang)},
                      {"index", t.index},
                      {"score", t.score}});
    return {{"image", {{"width", r.image.width}, {"height", r.image.height}}}, {"tags", tags}};
  }

  std::unique_ptr<Request> warm_up_request() const override {
    auto r = std::make_unique<TagRequest>();
    r->image =
        vision::Image{tagger_->image_size(), tagger_->image_size(),
                      std::vector<uint8_t>(size_t(tagger_->image_size()) * tagger_->image_size() * 3, 128)};
    r->batch_key = "tag";
    return r;
  }

  std::shared_ptr<const Query> query(const std::string& prompt) const override {
    if (!prompt.empty()) fail("the tag pipeline takes no prompt: it scores every tag of its list");
    auto q = std::make_shared<Query>();
    for (auto& t : tagger_->tags()) q->categories.push_back(t.name);
    return q;
  }

  std::shared_ptr<const Query> query(const Ontology&) const override {
    fail("the tag pipeline takes no classes: its tags are the model's tag list");
  }

  std::unique_ptr<Request> request(const std::shared_ptr<const Query>&,
                                   const vision::Image& image) const override {
    auto r = std::make_unique<TagRequest>();
    r->image = image;
    r->batch_key = "tag";
    return r;
  }

  // A tag is an image-level label: its box is the whole image.
  Record record(const Request& base) const override {
    const TagRequest& r = as_tag(base);
    Record rec{r.image.width, r.image.height, tagger_->image_size(), tagger_->image_size(), {}};
    for (const ScoredTag& t : r.result.tags)
      rec.detections.push_back({tagger_->tags()[size_t(t.index)].name, t.index, t.score, 0.f, 0.f,
                                float(r.image.width), float(r.image.height)});
    return rec;
  }

  nlohmann::json settings(const Query&) const override {
    return {{"tags", tagger_->tags().size()}, {"image_size", tagger_->image_size()}};
  }

 private:
  std::unique_ptr<Tagger> tagger_;
};

std::unique_ptr<Pipeline> make_tag(Model model, const PipelineConfig& config) {
  TaggerOptions options;
  for (auto& [key, value] : config.settings) {
    if (key != "threshold") fail("the tag pipeline has no setting '", key, "'; it has threshold");
    options.threshold = float(value);
  }
  return std::make_unique<TagPipeline>(std::make_unique<Tagger>(std::move(model), config.session, options));
}

}  // namespace

}  // namespace tagging

PipelineInfo tag_pipeline() {
  return {"tag",
          "the tags of an image above their thresholds with a RAM-contract tagger (tags.json beside it)",
          tagging::make_tag, nullptr};
}

}  // namespace vlrt

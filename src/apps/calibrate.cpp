#include "apps/calibrate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <unordered_set>

#include "exec/session.h"
#include "io/files.h"
#include "pipelines/grounding/detector.h"
#include "vision/image.h"

namespace vlrt {

namespace {

namespace fs = std::filesystem;

// Fusion off: every value keeps the name the rewrite looks for.
SessionOptions calibration_session(int threads) {
  SessionOptions o;
  o.threads = threads;
  o.fusion = FusionOptions::none();
  o.fuse_qdq = false;
  return o;
}

// Widens the ranges of the wanted values with what a run makes.
class RangeCollector {
 public:
  explicit RangeCollector(const std::vector<std::string>& values) : wanted_(values.begin(), values.end()) {}

  void observe(const std::string& name, const Tensor& t) {
    if (!wanted_.count(name) || t.dtype() != DType::f32) return;
    auto [it, fresh] = ranges_.try_emplace(name);
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); i++) {
      if (!std::isfinite(p[i])) continue;
      if (fresh) {
        it->second = {p[i], p[i]};
        fresh = false;
      } else {
        it->second.widen(p[i]);
      }
    }
  }
  void watch(Session& s) {
    s.executor().set_value_observer([this](const Node&, const std::string& v, const Tensor& t) { observe(v, t); });
  }
  ActivationRanges take() { return std::move(ranges_); }

 private:
  std::unordered_set<std::string> wanted_;
  ActivationRanges ranges_;
};

bool is_grounding_model(const Model& m) {
  auto has = [&](const char* name) {
    return std::any_of(m.graph.inputs.begin(), m.graph.inputs.end(), [&](auto& v) { return v.name == name; });
  };
  return has("img") && has("input_ids");
}

void progress(size_t done, size_t total) {
  if (done == total || done % 10 == 0) std::cerr << "calibrating: " << done << "/" << total << " images\n";
}

// The prompt of one calibration image: IMAGE.txt beside it (IMAGE without its extension), else --prompt.
std::string prompt_of(const std::string& image, const CalibrationArgs& a) {
  fs::path sidecar = fs::path(image).replace_extension(".txt");
  if (fs::is_regular_file(sidecar)) return read_file(sidecar.string());
  if (a.prompt.empty())
    fail("calibrating a GroundingDINO-contract model needs a prompt per image: give --prompt \"cat . dog .\" or ",
         "put the prompt in ", sidecar.string(), " beside ", image);
  return a.prompt;
}

ActivationRanges calibrate_grounding(const Model& model, const std::vector<std::string>& images,
                                     RangeCollector& ranges, const CalibrationArgs& a) {
  std::string vocab = a.vocab.empty() ? grounding::default_vocab_path(model) : a.vocab;
  if (vocab.empty())
    fail("no vocab.txt beside ", model.path, ": give the GroundingDINO model's vocabulary with --vocab");
  grounding::Detector detector(model, vocab, calibration_session(a.threads));
  ranges.watch(detector.session());
  for (size_t i = 0; i < images.size(); i++) {
    vision::Image img = vision::load_image(images[i]);
    auto [w, h] = detector.input_size(img);
    vision::Image resized = vision::resize_bilinear(img, w, h);
    Tensor pixels = vision::normalize_images({&resized});
    ranges.observe("img", pixels);
    detector.run(std::move(pixels), detector.encode(prompt_of(images[i], a)));
    progress(i + 1, images.size());
  }
  return ranges.take();
}

ActivationRanges calibrate_image_model(const Model& model, const std::vector<std::string>& images,
                                       RangeCollector& ranges, const CalibrationArgs& a) {
  const auto& inputs = model.graph.inputs;
  const ValueDecl* image = inputs.size() == 1 ? &inputs[0] : nullptr;
  if (!image || image->dtype != DType::f32 || !image->has_shape || image->dims.size() != 4 ||
      image->dims[1].value != 3) {
    std::string described;
    for (auto& v : inputs) described += cat(described.empty() ? "" : ", ", v.name, ": ", v.describe());
    fail("calibration feeds images: the model must take one float32 image input [N,3,H,W] or follow the ",
         "GroundingDINO contract; ", model.path, " takes ", described);
  }
  auto side = [](const Dim& d) { return d.value > 0 ? int(d.value) : 224; };
  int h = side(image->dims[2]), w = side(image->dims[3]);
  Session session(model, calibration_session(a.threads));
  ranges.watch(session);
  for (size_t i = 0; i < images.size(); i++) {
    vision::Image resized = vision::resize_bilinear(vision::load_image(images[i]), w, h);
    Tensor pixels = vision::normalize_images({&resized});
    ranges.observe(image->name, pixels);
    session.run({{image->name, std::move(pixels)}});
    progress(i + 1, images.size());
  }
  return ranges.take();
}

}  // namespace

std::vector<std::string> calibration_images(const CalibrationArgs& a) {
  std::error_code ec;
  if (!fs::is_directory(a.dir, ec))
    fail("--calibrate '", a.dir, "' is not a folder: give a folder of calibration images");
  std::vector<std::string> images;
  fs::directory_iterator it(a.dir, ec), end;
  if (ec) fail("--calibrate '", a.dir, "': cannot read the folder (", ec.message(), ")");
  for (; it != end; it.increment(ec)) {
    if (ec) fail("--calibrate '", a.dir, "': cannot read the folder (", ec.message(), ")");
    if (it->is_regular_file(ec) && vision::looks_like_image(it->path().string())) images.push_back(it->path().string());
  }
  if (images.empty())
    fail("--calibrate '", a.dir, "' holds no images (PNG, JPEG, BMP, GIF, WebP or TIFF): calibration runs the ",
         "model on images like the ones it will see");
  std::sort(images.begin(), images.end());
  if (a.images > 0 && size_t(a.images) < images.size()) images.resize(size_t(a.images));
  return images;
}

ActivationRanges calibrate(const Model& model, const std::vector<std::string>& values, const CalibrationArgs& a) {
  std::vector<std::string> images = calibration_images(a);
  RangeCollector ranges(values);
  ActivationRanges seen = is_grounding_model(model) ? calibrate_grounding(model, images, ranges, a)
                                                    : calibrate_image_model(model, images, ranges, a);
  for (const std::string& v : values)
    if (!seen.count(v))
      fail("calibration saw no float32 values of '", v, "' (computed only in a branch the images never took?): ",
           "leave its node out with --exclude");
  return seen;
}

}  // namespace vlrt

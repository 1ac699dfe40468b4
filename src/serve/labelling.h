// What the labelling-tool adapters (Label Studio's ML backend protocol in label_studio.h,
// X-AnyLabeling's remote-server protocol in xanylabeling.h) take from the server: the served
// model, its default settings, and one detection through the pipeline and the batcher.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "pipelines/pipeline.h"

namespace vlrt::serve {

struct LabellingOptions {
  bool enabled = true;  // the routes /health, /, /setup, /predict, /v1/models, /v1/predict
  std::string prompt;   // "": Label Studio's label values, X-AnyLabeling's text_prompt
  std::string ls_root;  // "": tasks may not name files; else their folder (Label Studio's media folder)
  std::string ls_url;   // "": no downloads; else Label Studio's address, for http(s) and /data/ URLs
  std::string ls_api_key;
};

// A detection request in the pipeline's form fields (grounding: image, prompt, thresholds).
struct DetectFields {
  std::string image;  // the encoded image file
  std::string prompt;
  std::optional<double> box_threshold, text_threshold;
};

// Runs one detection; throws RequestError (4xx: the request's fault, 503/504: overload).
using DetectFn = std::function<Record(const DetectFields&)>;

struct LabellingModel {
  std::string name;                                    // the model's name, also its version
  nlohmann::json defaults = nlohmann::json::object();  // box_threshold, text_threshold, ...
  DetectFn detect;
};

}  // namespace vlrt::serve

// Label Studio's ML backend protocol over the served pipeline:
//   GET /health (and GET /): {"status": "UP", "model_class", "model_version"}.
//   POST /setup {"project", "schema": the label config XML, "hostname", "access_token", ...}:
//     keeps the project's first <RectangleLabels> (its name is the results' from_name, its toName
//     their to_name, the <Image> of that name says which task field holds the image) and its label
//     values; answers {"model_version"}.
//   POST /predict {"tasks": [...], "project", "label_config" (optional), "params"}: one prediction
//     per task, {"result": [rectanglelabels regions, x/y/width/height in percent of the image,
//     rotation 0], "score" (their mean), "model_version"}; a task whose image cannot be had gets
//     an empty result and "error" saying why, the others their regions.
// The prompt is LabellingOptions::prompt, else the label values ("Person . Car ."); a detected
// phrase is reported as the label value it matches (case and spaces aside), and one that matches
// none is left out, since Label Studio accepts only the config's labels.
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/labelling.h"

namespace vlrt::serve {

struct LabelConfig {
  std::string from_name, to_name;  // the RectangleLabels' name and toName
  std::string image_key;           // the task data field of the Image it labels ("image" for value="$image")
  std::vector<std::string> labels;
};

// The config's first RectangleLabels; RequestError 400 naming what is missing.
LabelConfig parse_label_config(const std::string& xml);

class LabelStudioBackend {
 public:
  LabelStudioBackend(LabellingModel model, LabellingOptions options);

  nlohmann::json health() const;
  // RequestError 400 on a body or label config it cannot use.
  nlohmann::json setup(std::string_view body);
  nlohmann::json predict(std::string_view body);

 private:
  struct Project {
    LabelConfig config;
    std::string hostname, access_token;  // from /setup: where Label Studio serves /data/...
  };
  nlohmann::json predict_task(const nlohmann::json& task, const Project& project,
                              const std::string& prompt) const;
  // The bytes of a task's image: a data URI, a file under ls_root, or a download.
  std::string read_image(const std::string& ref, const Project& project) const;

  LabellingModel model_;
  LabellingOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Project> projects_;  // by project id (the part of "1.1732521600" before the dot)
  std::string last_project_;                 // used for requests that name no known project
};

}  // namespace vlrt::serve

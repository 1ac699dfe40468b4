// The /v1/detect wire format: multipart/form-data (fields image (a file), prompt,
// box_threshold, text_threshold) or application/json ({"image": base64, "prompt",
// "box_threshold", "text_threshold"}).
#pragma once

#include <optional>
#include <string>

#include "pipelines/pipeline.h"

namespace vlrt::grounding {

struct DetectRequest {
  std::string image;  // encoded PNG/JPEG/BMP bytes
  std::string prompt;
  std::optional<float> box_threshold, text_threshold;
};

// Checks presence and types only; the prompt's and the image's content are checked later.
// Refusals (RequestError) name the field and what was expected.
DetectRequest parse_detect_request(const RequestBody& body);

}  // namespace vlrt::grounding

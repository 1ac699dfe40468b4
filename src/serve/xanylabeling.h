// X-AnyLabeling's remote-server protocol over the served pipeline. GET /v1/models lists the
// served model with the widgets of a text-prompt model (prompt box, confidence); POST
// /v1/predict takes {"model", "image": a data URI or plain base64, "params": {"text_prompt",
// "conf_threshold" (the box threshold), "text_threshold"}} and answers {"success": true,
// "data": {"shapes": [...], "description": ""}}, each shape a rectangle of 4 points clockwise
// from the top left in image pixels, with its label and score. As the protocol has it, a
// request's own errors answer HTTP 200 with {"success": false, "error": {"code", "message"}}
// (MODEL_NOT_FOUND, INVALID_IMAGE, INVALID_PARAMS, INFERENCE_ERROR); overload stays 503/504.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "serve/labelling.h"

namespace vlrt::serve::xanylabeling {

nlohmann::json models(const LabellingModel& model);

// default_prompt: used when params has no text_prompt ("": then the request is refused).
nlohmann::json predict(std::string_view body, const LabellingModel& model, const std::string& default_prompt);

}  // namespace vlrt::serve::xanylabeling

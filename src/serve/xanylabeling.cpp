#include "serve/xanylabeling.h"

namespace vlrt::serve::xanylabeling {

using nlohmann::json;

namespace {

// A request the protocol answers with success false (HTTP 200).
struct ProtocolError {
  std::string code, message;
};

[[noreturn]] void reject(const std::string& code, const std::string& message) {
  throw ProtocolError{code, message};
}

json failure(const std::string& code, const std::string& message) {
  return {{"success", false}, {"error", {{"code", code}, {"message", message}}}};
}

double threshold_param(const json& params, const char* key) {
  const json& v = params.at(key);
  if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1))
    reject("INVALID_PARAMS",
           cat("params.", key, " is ", v.dump().substr(0, 40), "; expected a number between 0 and 1"));
  return v.get<double>();
}

DetectFields parse_predict(std::string_view body, const LabellingModel& model,
                           const std::string& default_prompt) {
  json j;
  try {
    j = parse_json_object(body);
  } catch (const RequestError& e) {
    reject("INVALID_REQUEST", e.what());
  }
  if (!j.contains("model") || !j["model"].is_string())
    reject("INVALID_REQUEST", "'model' is missing or not a string; GET /v1/models lists the served model");
  if (j["model"] != model.name)
    reject("MODEL_NOT_FOUND", cat("Model '", j["model"].get<std::string>().substr(0, 200),
                                  "' not loaded; this server serves '", model.name, "'"));
  if (!j.contains("image") || !j["image"].is_string())
    reject("INVALID_IMAGE",
           "'image' is missing or not a string; expected a data URI (data:image/png;base64,...) or base64");
  DetectFields f;
  try {
    f.image = decode_base64_field("image", j["image"].get<std::string>());
  } catch (const RequestError& e) {
    reject("INVALID_IMAGE", e.what());
  }
  json params = j.value("params", json::object());
  if (!params.is_object())
    reject("INVALID_PARAMS", cat("'params' is JSON ", params.type_name(), "; expected an object"));
  f.prompt = default_prompt;
  if (params.contains("text_prompt") && !params["text_prompt"].is_null()) {
    if (!params["text_prompt"].is_string()) reject("INVALID_PARAMS", "params.text_prompt is not a string");
    f.prompt = params["text_prompt"].get<std::string>();
  }
  if (f.prompt.find_first_not_of(" \t\r\n.") == std::string::npos)
    reject("INVALID_PARAMS",
           "no text prompt: type the objects to find (e.g. \"person . bicycle\"), or start the server with "
           "--ls-prompt");
  if (params.contains("conf_threshold")) f.box_threshold = threshold_param(params, "conf_threshold");
  if (params.contains("box_threshold")) f.box_threshold = threshold_param(params, "box_threshold");
  if (params.contains("text_threshold")) f.text_threshold = threshold_param(params, "text_threshold");
  return f;
}

json rectangle(const vision::Detection& d) {
  return {{"label", d.label.empty() ? "AUTOLABEL_OBJECT" : d.label},
          {"shape_type", "rectangle"},
          {"points", {{d.x1, d.y1}, {d.x2, d.y1}, {d.x2, d.y2}, {d.x1, d.y2}}},
          {"score", d.score},
          {"attributes", json::object()},
          {"description", nullptr},
          {"difficult", false},
          {"direction", 0},
          {"flags", nullptr},
          {"group_id", nullptr},
          {"kie_linking", json::array()}};
}

}  // namespace

json models(const LabellingModel& model) {
  json conf = model.defaults.value("box_threshold", json());
  json widgets = json::array({{{"name", "edit_text"}, {"value", nullptr}},
                              {{"name", "button_send"}, {"value", nullptr}},
                              {{"name", "input_conf"}, {"value", nullptr}},
                              {{"name", "edit_conf"}, {"value", conf}},
                              {{"name", "toggle_preserve_existing_annotations"}, {"value", false}}});
  return {{"success", true},
          {"data",
           {{model.name,
             {{"display_name", model.name + " (vlrt)"}, {"widgets", widgets}, {"params", model.defaults}}}}}};
}

json predict(std::string_view body, const LabellingModel& model, const std::string& default_prompt) {
  try {
    DetectFields fields = parse_predict(body, model, default_prompt);
    Record record;
    try {
      record = model.detect(fields);
    } catch (const RequestError& e) {
      if (e.status() == 503 || e.status() == 504) throw;
      std::string msg = e.what();
      if (e.status() >= 500) reject("INFERENCE_ERROR", msg);
      reject(msg.rfind("image", 0) == 0 ? "INVALID_IMAGE" : "INVALID_PARAMS", msg);
    }
    json shapes = json::array();
    for (auto& d : record.detections) shapes.push_back(rectangle(d));
    return {{"success", true}, {"data", {{"shapes", shapes}, {"description", ""}}}};
  } catch (const ProtocolError& e) {
    return failure(e.code, e.message);
  }
}

}  // namespace vlrt::serve::xanylabeling

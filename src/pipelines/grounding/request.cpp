#include "pipelines/grounding/request.h"

#include <cerrno>
#include <cstdlib>

namespace vlrt::grounding {

namespace {

float threshold(const std::string& field, double v) {
  if (!(v >= 0 && v <= 1)) refuse(400, "'", field, "' is ", v, "; expected a number between 0 and 1");
  return float(v);
}

float threshold_text(const std::string& field, const std::string& s) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size())
    refuse(400, "'", field, "' is '", s.substr(0, 40), "'; expected a number between 0 and 1");
  return threshold(field, v);
}

DetectRequest parse_multipart(const RequestBody& body) {
  DetectRequest r;
  for (auto& [name, content] : body.parts) {
    if (name == "image") {
      r.image = content;
    } else if (name == "prompt") {
      r.prompt = content;
    } else if (name == "box_threshold") {
      r.box_threshold = threshold_text(std::string(name), std::string(content));
    } else if (name == "text_threshold") {
      r.text_threshold = threshold_text(std::string(name), std::string(content));
    } else {
      refuse(400, "unknown form field '", name.substr(0, 64),
             "'; expected image (a file), prompt, box_threshold, text_threshold");
    }
  }
  if (!body.has_part("image")) refuse(400, "missing form field 'image' (the image file)");
  if (!body.has_part("prompt")) refuse(400, "missing form field 'prompt', e.g. \"person . bicycle .\"");
  return r;
}

DetectRequest parse_detect_json(std::string_view body) {
  nlohmann::json j = parse_json_object(body);
  DetectRequest r;
  for (auto& [key, v] : j.items()) {
    if (key == "image") {
      if (!v.is_string()) refuse(400, "'image' is JSON ", v.type_name(), "; expected a base64 string");
      r.image = decode_base64_field("image", v.get<std::string>());
    } else if (key == "prompt") {
      if (!v.is_string()) refuse(400, "'prompt' is JSON ", v.type_name(), "; expected a string");
      r.prompt = v.get<std::string>();
    } else if (key == "box_threshold" || key == "text_threshold") {
      if (!v.is_number())
        refuse(400, "'", key, "' is JSON ", v.type_name(), "; expected a number between 0 and 1");
      (key == "box_threshold" ? r.box_threshold : r.text_threshold) = threshold(key, v.get<double>());
    } else {
      refuse(400, "unknown field '", key.substr(0, 64),
             "'; expected image, prompt, box_threshold, text_threshold");
    }
  }
  if (!j.contains("image")) refuse(400, "missing field 'image' (the image file, base64-encoded)");
  if (!j.contains("prompt")) refuse(400, "missing field 'prompt', e.g. \"person . bicycle .\"");
  return r;
}

}  // namespace

DetectRequest parse_detect_request(const RequestBody& body) {
  if (body.multipart) return parse_multipart(body);
  std::string_view type = body.content_type;
  if (!type.empty() && !type.starts_with("application/json"))
    refuse(415, "Content-Type '", type.substr(0, 80),
           "' is not accepted; send multipart/form-data (image, prompt) or application/json");
  return parse_detect_json(body.body);
}

}  // namespace vlrt::grounding

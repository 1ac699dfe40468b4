// The parts of pipeline.h that read what a client sent (the request body), apart from the
// pipelines themselves: the fuzz harnesses link these alone.
#include <algorithm>

#include "io/base64.h"
#include "pipelines/pipeline.h"

namespace vlrt {

namespace {

constexpr int kMaxJsonDepth = 64;

}  // namespace

bool RequestBody::has_part(std::string_view name) const {
  return std::any_of(parts.begin(), parts.end(), [&](const auto& p) { return p.first == name; });
}

nlohmann::json parse_json_object(std::string_view body) {
  using nlohmann::json;
  if (body.empty()) refuse(400, "the body is empty; expected a JSON object");
  json::parser_callback_t limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) refuse(400, "JSON nested deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    json j = json::parse(body.begin(), body.end(), limit_depth);
    if (!j.is_object()) refuse(400, "the body is JSON ", j.type_name(), "; expected a JSON object");
    return j;
  } catch (const json::exception& e) {
    refuse(400, "the body is not valid JSON: ", e.what());
  }
}

std::string decode_base64_field(const std::string& field, const std::string& text) {
  try {
    return base64_decode(text);
  } catch (const OutOfMemory&) {
    throw;
  } catch (const Error& e) {
    refuse(400, "'", field, "' is ", e.what());
  }
}

}  // namespace vlrt

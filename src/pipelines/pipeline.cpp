#include "pipelines/pipeline.h"

#include <algorithm>

#include "io/base64.h"

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
  } catch (const Error& e) {
    refuse(400, "'", field, "' is ", e.what());
  }
}

int64_t Pipeline::max_batch(const Request& request) {
  BatchSizing s = session().size_batches(signature(request, 1), 64);
  return std::max<int64_t>(1, s.max_batch);
}

const PipelineInfo& find_pipeline(const std::string& name) {
  std::string names;
  for (auto& p : pipelines()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("no pipeline named '", name, "'; the pipelines are ", names);
}

}  // namespace vlrt

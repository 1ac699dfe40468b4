#include "serve/openai_chat_request.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "pipelines/pipeline.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

const json& field_of(const json& object, const char* key) {
  static const json absent;
  auto it = object.find(key);
  return it == object.end() ? absent : *it;
}

// A number field; 400 naming it unless it is a finite number.
double number_field(const json& v, const std::string& name) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) refuse(400, "'", name, "' must be a number, not ", v.dump());
  return v.get<double>();
}

int64_t integer_field(const json& v, const std::string& name) {
  if (!v.is_number_integer()) refuse(400, "'", name, "' must be an integer, not ", v.dump());
  return v.get<int64_t>();
}

// The bytes of a data URI ("data:image/png;base64,..."); 400 for anything else.
std::string data_uri_bytes(const std::string& url, const std::string& field) {
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0)
    refuse(400, "'", field, "' is an http(s) URL; this server fetches nothing: send the image as a data URI ",
           "(data:image/png;base64,...)");
  if (url.rfind("data:", 0) != 0)
    refuse(400, "'", field, "' is not a data URI; expected data:image/png;base64,... (or another image type)");
  size_t comma = url.find(',');
  if (comma == std::string::npos || url.substr(0, comma).find(";base64") == std::string::npos)
    refuse(400, "'", field, "' is a data URI without ';base64,'; expected data:image/png;base64,...");
  return decode_base64_field(field, url.substr(comma + 1));
}

void parse_content(const json& content, const std::string& field, int64_t max_image_pixels, text::ChatMessage& message,
                   std::vector<vision::Image>& images) {
  using Kind = text::ChatPart::Kind;
  if (content.is_string()) {
    message.content.push_back({Kind::kText, content.get<std::string>()});
    return;
  }
  if (!content.is_array())
    refuse(400, "'", field, "' must be a string or an array of parts ({\"type\":\"text\",\"text\":...} or ",
           "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:...\"}})");
  for (size_t i = 0; i < content.size(); i++) {
    const json& part = content[i];
    std::string where = cat(field, "[", i, "]");
    if (!part.is_object() || !field_of(part, "type").is_string())
      refuse(400, "'", where, "' must be an object with a \"type\" (\"text\" or \"image_url\")");
    std::string type = part["type"].get<std::string>();
    if (type == "text") {
      if (!field_of(part, "text").is_string()) refuse(400, "'", where, ".text' must be a string");
      message.content.push_back({Kind::kText, part["text"].get<std::string>()});
    } else if (type == "image_url") {
      const json& image_url = field_of(part, "image_url");
      // {"url": "..."} as OpenAI sends it; a bare string as some clients do.
      const json& url = image_url.is_object() ? field_of(image_url, "url") : image_url;
      if (!url.is_string()) refuse(400, "'", where, ".image_url.url' must be a string (a data URI)");
      std::string url_field = cat(where, ".image_url.url");
      std::string bytes = data_uri_bytes(url.get<std::string>(), url_field);
      try {
        images.push_back(vision::decode_image(bytes, url_field, max_image_pixels));
      } catch (const Error& e) {
        refuse(400, e.what());
      }
      message.content.push_back({Kind::kImage, ""});
    } else {
      refuse(400, "'", where, ".type' is '", type, "'; this model takes \"text\" and \"image_url\" parts");
    }
  }
}

// Each stop string as the one token it must be.
std::vector<int64_t> stop_tokens(const json& stop, const ChatRequestModel& model) {
  std::vector<std::string> strings;
  if (stop.is_string()) {
    strings.push_back(stop.get<std::string>());
  } else if (stop.is_array()) {
    for (auto& s : stop) {
      if (!s.is_string()) refuse(400, "'stop' must be a string or an array of strings, not ", stop.dump());
      strings.push_back(s.get<std::string>());
    }
  } else {
    refuse(400, "'stop' must be a string or an array of strings, not ", stop.dump());
  }
  std::vector<int64_t> tokens = model.generation.stop_tokens;
  for (auto& s : strings) {
    std::vector<int64_t> ids = model.tokenizer.encode(s);
    if (ids.size() != 1)
      refuse(400, "'stop' string \"", s, "\" is ", ids.size(),
             " tokens; this server stops on single tokens only (e.g. \"<|im_end|>\" or a one-token word)");
    tokens.push_back(ids[0]);
  }
  return tokens;
}

}  // namespace

ChatCompletionRequest parse_chat_completion(std::string_view body, const ChatRequestModel& model,
                                            int64_t max_image_pixels) {
  json j = parse_json_object(body);
  ChatCompletionRequest r;
  if (const json& model = field_of(j, "model"); !model.is_null()) {
    if (!model.is_string()) refuse(400, "'model' must be a string");
    r.model = model.get<std::string>();
  }
  const json& messages = field_of(j, "messages");
  if (!messages.is_array() || messages.empty())
    refuse(400, "'messages' must be a non-empty array of {\"role\", \"content\"} objects",
           messages.is_null() ? " (it is missing)" : "");
  for (size_t i = 0; i < messages.size(); i++) {
    const json& m = messages[i];
    std::string field = cat("messages[", i, "]");
    if (!m.is_object()) refuse(400, "'", field, "' must be an object with \"role\" and \"content\"");
    const json& role = field_of(m, "role");
    if (!role.is_string()) refuse(400, "'", field, ".role' must be a string (system, user or assistant)");
    text::ChatMessage message{role.get<std::string>(), {}};
    if (message.role != "system" && message.role != "user" && message.role != "assistant")
      refuse(400, "'", field, ".role' is '", message.role, "'; expected system, user or assistant");
    parse_content(field_of(m, "content"), field + ".content", max_image_pixels, message, r.images);
    r.messages.push_back(std::move(message));
  }

  vlm::SamplingOptions& s = r.generate.sampling;
  s = model.generation.sampling;
  if (const json& t = field_of(j, "temperature"); !t.is_null()) {
    double temperature = number_field(t, "temperature");
    if (temperature < 0) refuse(400, "'temperature' is ", temperature, "; it must be >= 0 (0: greedy)");
    s.sample = temperature > 0;
    if (s.sample) s.temperature = float(temperature);
  }
  if (const json& p = field_of(j, "top_p"); !p.is_null()) {
    double top_p = number_field(p, "top_p");
    if (!(top_p > 0 && top_p <= 1)) refuse(400, "'top_p' is ", top_p, "; it must be in (0, 1]");
    s.top_p = float(top_p);
  }
  if (const json& seed = field_of(j, "seed"); !seed.is_null()) s.seed = uint64_t(integer_field(seed, "seed"));
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (const json& v = field_of(j, key); !v.is_null()) {
      int64_t n = integer_field(v, key);
      if (n < 1) refuse(400, "'", key, "' is ", n, "; it must be at least 1");
      r.generate.max_new_tokens = n;
    }
  }
  if (const json& n = field_of(j, "n"); !n.is_null() && integer_field(n, "n") != 1)
    refuse(400, "'n' is ", n.dump(), "; this server answers one choice per request (n = 1)");
  if (const json& stop = field_of(j, "stop"); !stop.is_null()) r.generate.stop_tokens = stop_tokens(stop, model);
  if (const json& stream = field_of(j, "stream"); !stream.is_null()) {
    if (!stream.is_boolean()) refuse(400, "'stream' must be true or false");
    r.stream = stream.get<bool>();
  }
  if (const json& so = field_of(j, "stream_options"); so.is_object()) {
    const json& usage = field_of(so, "include_usage");
    if (!usage.is_null() && !usage.is_boolean()) refuse(400, "'stream_options.include_usage' must be true or false");
    r.include_usage = usage.is_boolean() && usage.get<bool>();
  }

  int64_t prompt_tokens = 0;
  try {
    prompt_tokens = model.prompt_tokens(r.messages, r.images);
  } catch (const Error& e) {
    refuse(400, "the messages cannot be a prompt for this model: ", e.what());
  }
  if (prompt_tokens >= model.context)
    refuse(400, "the prompt is ", prompt_tokens, " tokens (images included), which leaves no room in the context of ",
           model.context, " tokens; shorten the messages or use fewer or smaller images");
  return r;
}

}  // namespace vlrt::serve

#include "serve/label_studio.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include "io/base64.h"
#include "io/files.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

struct XmlTag {
  std::string name;
  bool closing = false;
  std::map<std::string, std::string> attributes;
};

std::string decode_entities(const std::string& s) {
  static const std::pair<const char*, char> entities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    bool replaced = false;
    for (auto& [entity, c] : entities)
      if (s.compare(i, std::strlen(entity), entity) == 0) {
        out += c;
        i += std::strlen(entity) - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += s[i];
  }
  return out;
}

// The tags of a label config in order (comments, declarations and text skipped): enough of XML
// for the attributes of Label Studio's tags.
std::vector<XmlTag> xml_tags(const std::string& xml) {
  std::vector<XmlTag> tags;
  auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.';
  };
  size_t i = 0;
  while ((i = xml.find('<', i)) != std::string::npos) {
    if (xml.compare(i, 4, "<!--") == 0) {
      size_t end = xml.find("-->", i);
      if (end == std::string::npos) refuse(400, "label config: a comment is not closed with -->");
      i = end + 3;
      continue;
    }
    if (xml.compare(i, 2, "<?") == 0 || xml.compare(i, 2, "<!") == 0) {
      i = xml.find('>', i);
      if (i == std::string::npos) break;
      continue;
    }
    XmlTag tag;
    i++;
    if (i < xml.size() && xml[i] == '/') tag.closing = true, i++;
    size_t start = i;
    while (i < xml.size() && is_name(xml[i])) i++;
    tag.name = xml.substr(start, i - start);
    for (;;) {
      while (i < xml.size() && std::isspace(static_cast<unsigned char>(xml[i]))) i++;
      if (i >= xml.size())
        refuse(400, "label config: the tag <", tag.name.substr(0, 40), " is not closed with >");
      if (xml[i] == '>' || xml.compare(i, 2, "/>") == 0) break;
      start = i;
      while (i < xml.size() && is_name(xml[i])) i++;
      std::string key = xml.substr(start, i - start);
      while (i < xml.size() && std::isspace(static_cast<unsigned char>(xml[i]))) i++;
      if (key.empty() || i >= xml.size() || xml[i] != '=')
        refuse(400, "label config: malformed attribute in <", tag.name.substr(0, 40), "> at byte ", i);
      i++;
      while (i < xml.size() && std::isspace(static_cast<unsigned char>(xml[i]))) i++;
      char quote = i < xml.size() ? xml[i] : '\0';
      size_t end = (quote == '"' || quote == '\'') ? xml.find(quote, i + 1) : std::string::npos;
      if (end == std::string::npos)
        refuse(400, "label config: attribute '", key.substr(0, 40), "' of <", tag.name.substr(0, 40),
               "> has no quoted value");
      tag.attributes[key] = decode_entities(xml.substr(i + 1, end - i - 1));
      i = end + 1;
    }
    tags.push_back(std::move(tag));
  }
  return tags;
}

// Lower case, runs of spaces as one: how a detected phrase is matched to a label value.
std::string label_key(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += char(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string url_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

size_t append_body(char* data, size_t size, size_t n, void* out) {
  auto* body = static_cast<std::string*>(out);
  if (body->size() + size * n > (size_t(256) << 20)) return 0;  // larger than any image we take
  body->append(data, size * n);
  return size * n;
}

// GET URL (with Label Studio's token when one is given); fails naming the URL and the reason.
std::string download(const std::string& url, const std::string& token) {
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (global != CURLE_OK) fail("libcurl: initialisation failed");
  CURL* curl = curl_easy_init();
  if (!curl) fail("libcurl: cannot start a transfer");
  std::string body;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  if (!token.empty()) headers = curl_slist_append(headers, ("Authorization: Token " + token).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) fail("cannot download ", url, ": ", errbuf[0] ? errbuf : curl_easy_strerror(rc));
  if (code != 200)
    fail("cannot download ", url, ": HTTP ", code,
         code == 401 || code == 403
             ? " (give Label Studio's access token: --ls-api-key or LABEL_STUDIO_API_KEY)"
             : "");
  return body;
}

// PATH (relative, or absolute inside ROOT) as a file under ROOT; fails when it leads outside.
std::string file_under(const std::string& root, const std::string& path) {
  namespace fs = std::filesystem;
  if (root.empty())
    fail("the image '", path.substr(0, 200),
         "' is a file; start the server with --ls-root DIR (Label Studio's media folder) to let tasks name "
         "files "
         "in DIR, or --ls-url and --ls-api-key to download them from Label Studio");
  std::error_code ec;
  fs::path base = fs::canonical(root, ec);
  if (ec) fail("--ls-root ", root, " is not a folder here (", ec.message(), ")");
  fs::path p = fs::path(path).is_absolute() ? fs::path(path) : base / path;
  p = fs::weakly_canonical(p);
  auto [b, q] = std::mismatch(base.begin(), base.end(), p.begin(), p.end());
  if (b != base.end()) fail("the image '", path.substr(0, 200), "' is outside --ls-root ", root);
  if (!fs::is_regular_file(p))
    fail("the image '", path.substr(0, 200), "' is no file (looked for ", p.string(), ")");
  return read_file(p.string());
}

std::string project_id(const json& body) {
  if (!body.contains("project")) return "";
  const json& p = body["project"];
  std::string id = p.is_string() ? p.get<std::string>() : p.is_number() ? p.dump() : "";
  return id.substr(0, id.find('.'));
}

}  // namespace

LabelConfig parse_label_config(const std::string& xml) {
  LabelConfig config;
  std::map<std::string, std::string> images;  // Image name -> value
  bool in_rectangles = false, found = false;
  for (auto& tag : xml_tags(xml)) {
    if (tag.name == "Image" && !tag.closing) images[tag.attributes["name"]] = tag.attributes["value"];
    if (tag.name == "RectangleLabels") {
      in_rectangles = !tag.closing && !found;
      if (in_rectangles) {
        found = true;
        config.from_name = tag.attributes["name"];
        config.to_name = tag.attributes["toName"];
      }
    } else if (tag.name == "Label" && in_rectangles && !tag.closing && tag.attributes.count("value")) {
      config.labels.push_back(tag.attributes["value"]);
    }
  }
  if (!found)
    refuse(
        400,
        "the label config has no <RectangleLabels>; this backend predicts boxes: add e.g. <RectangleLabels "
        "name=\"label\" toName=\"image\"><Label value=\"Person\"/></RectangleLabels>");
  if (config.from_name.empty() || config.to_name.empty())
    refuse(400, "the label config's <RectangleLabels> needs both name and toName");
  if (config.labels.empty())
    refuse(400, "the label config's <RectangleLabels name=\"", config.from_name,
           "\"> has no <Label value=...>");
  auto image = images.find(config.to_name);
  if (image == images.end())
    refuse(400, "the label config's <RectangleLabels toName=\"", config.to_name,
           "\"> names no <Image name=\"", config.to_name, "\">");
  config.image_key = image->second.starts_with("$") ? image->second.substr(1) : image->second;
  if (config.image_key.empty())
    refuse(400, "the label config's <Image name=\"", config.to_name, "\"> has no value=\"$field\"");
  return config;
}

LabelStudioBackend::LabelStudioBackend(LabellingModel model, LabellingOptions options)
    : model_(std::move(model)), options_(std::move(options)) {}

json LabelStudioBackend::health() const {
  return {{"status", "UP"}, {"model_class", "vlrt"}, {"model_version", model_.name}};
}

json LabelStudioBackend::setup(std::string_view body) {
  json j = parse_json_object(body);
  if (!j.contains("schema") || !j["schema"].is_string())
    refuse(400, "'schema' is missing or not a string; expected the project's label config XML");
  Project project{parse_label_config(j["schema"].get<std::string>()), j.value("hostname", ""),
                  j.value("access_token", "")};
  std::lock_guard<std::mutex> lk(mu_);
  last_project_ = project_id(j);
  projects_[last_project_] = std::move(project);
  return {{"model_version", model_.name}};
}

json LabelStudioBackend::predict(std::string_view body) {
  json j = parse_json_object(body);
  if (!j.contains("tasks")) refuse(400, "missing field 'tasks' (the tasks to predict, each with its data)");
  if (!j["tasks"].is_array())
    refuse(400, "'tasks' is JSON ", j["tasks"].type_name(), "; expected an array of tasks");
  Project project;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto known = projects_.find(project_id(j));
    if (known == projects_.end()) known = projects_.find(last_project_);
    if (known != projects_.end()) project = known->second;
  }
  if (j.contains("label_config") && j["label_config"].is_string())
    project.config = parse_label_config(j["label_config"].get<std::string>());
  else if (project.config.labels.empty())
    refuse(400,
           "no label config for this project: POST /setup with its schema first, or send 'label_config'");
  std::string prompt = options_.prompt;
  if (prompt.empty())
    for (auto& label : project.config.labels) prompt += label + " . ";
  json results = json::array();
  for (auto& task : j["tasks"]) results.push_back(predict_task(task, project, prompt));
  return {{"results", results}, {"model_version", model_.name}};
}

json LabelStudioBackend::predict_task(const json& task, const Project& project,
                                      const std::string& prompt) const {
  json prediction = {{"result", json::array()}, {"score", 0.0}, {"model_version", model_.name}};
  const LabelConfig& config = project.config;
  Record record;
  try {
    const json* data = task.is_object() && task.contains("data") ? &task["data"] : nullptr;
    if (!data || !data->is_object() || !data->contains(config.image_key) ||
        !(*data)[config.image_key].is_string())
      refuse(400, "the task has no data.", config.image_key, " (the field <Image name=\"", config.to_name,
             "\" value=\"$", config.image_key, "\"> names) with the image's URL");
    DetectFields fields;
    try {
      fields.image = read_image((*data)[config.image_key].get<std::string>(), project);
    } catch (const RequestError&) {
      throw;
    } catch (const Error& e) {
      refuse(400, e.what());
    }
    fields.prompt = prompt;
    record = model_.detect(fields);
  } catch (const RequestError& e) {
    if (e.status() == 503 || e.status() == 504) throw;  // overload: Label Studio retries the whole request
    prediction["error"] = e.what();
    return prediction;
  }
  std::map<std::string, std::string> labels;  // label_key -> label value
  for (auto& l : config.labels) labels.emplace(label_key(l), l);
  double w = std::max(1, record.width), h = std::max(1, record.height), total = 0;
  auto percent = [](double v, double size) { return std::clamp(100.0 * v / size, 0.0, 100.0); };
  for (auto& d : record.detections) {
    auto label = labels.find(label_key(d.label));
    if (label == labels.end()) continue;
    double x = percent(d.x1, w), y = percent(d.y1, h);
    json value = {{"x", x},
                  {"y", y},
                  {"width", percent(d.x2, w) - x},
                  {"height", percent(d.y2, h) - y},
                  {"rotation", 0},
                  {"rectanglelabels", {label->second}}};
    prediction["result"].push_back({{"id", cat("vlrt-", prediction["result"].size())},
                                    {"from_name", config.from_name},
                                    {"to_name", config.to_name},
                                    {"type", "rectanglelabels"},
                                    {"original_width", record.width},
                                    {"original_height", record.height},
                                    {"image_rotation", 0},
                                    {"value", value},
                                    {"score", d.score}});
    total += d.score;
  }
  if (!prediction["result"].empty()) prediction["score"] = total / double(prediction["result"].size());
  return prediction;
}

std::string LabelStudioBackend::read_image(const std::string& ref, const Project& project) const {
  if (ref.starts_with("data:")) {
    try {
      return base64_decode(ref);
    } catch (const Error& e) {
      fail("the image data URI is ", e.what());
    }
  }
  std::string url = options_.ls_url.empty() ? project.hostname : options_.ls_url;
  std::string token = options_.ls_api_key.empty() ? project.access_token : options_.ls_api_key;
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (ref.starts_with("http://") || ref.starts_with("https://"))
    return download(
        ref, !url.empty() && ref.starts_with(url) ? token : "");  // the token goes to Label Studio only
  const std::string upload = "/data/upload/", local = "/data/local-files/?d=";
  if (ref.starts_with(upload) || ref.starts_with(local)) {
    if (!options_.ls_root.empty())
      return file_under(options_.ls_root, ref.starts_with(upload)
                                              ? "upload/" + url_decode(ref.substr(upload.size()))
                                              : url_decode(ref.substr(local.size())));
    if (url.empty())
      fail("the image '", ref.substr(0, 200),
           "' is served by Label Studio; start the server with --ls-root DIR (Label Studio's media folder), "
           "or "
           "--ls-url URL and --ls-api-key TOKEN (LABEL_STUDIO_URL, LABEL_STUDIO_API_KEY) to download it");
    return download(url + ref, token);
  }
  return file_under(options_.ls_root, ref);
}

}  // namespace vlrt::serve

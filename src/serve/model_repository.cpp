#include "serve/model_repository.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>

#include "integrity/load_model.h"
#include "io/files.h"

namespace vlrt::serve {

namespace fs = std::filesystem;

ServedModel::ServedModel(std::string name, Pipeline& pipeline)
    : name_(std::move(name)),
      path_(pipeline.session().model().path),
      session_(&pipeline.session()),
      pipeline_(&pipeline) {}

ServedModel::ServedModel(std::string name, std::string version, std::string path,
                         std::unique_ptr<Session> session)
    : name_(std::move(name)),
      version_(std::move(version)),
      path_(std::move(path)),
      own_session_(std::move(session)),
      session_(own_session_.get()) {}

ModelStats ServedModel::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void ServedModel::add_success(uint64_t total_ns, uint64_t queue_ns, uint64_t compute_ns) {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.success.count++;
  stats_.success.ns += total_ns;
  stats_.queue.count++;
  stats_.queue.ns += queue_ns;
  stats_.compute_infer.count++;
  stats_.compute_infer.ns += compute_ns;
  stats_.inference_count++;
  stats_.last_inference_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

void ServedModel::add_failure(uint64_t total_ns) {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.fail.count++;
  stats_.fail.ns += total_ns;
}

void ServedModel::add_execution() {
  std::lock_guard<std::mutex> lk(mu_);
  stats_.execution_count++;
}

namespace {

bool is_version(const std::string& s) {
  return !s.empty() && s.size() < 10 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The `name: "..."` of a config.pbtxt, or "" when it names none.
std::string config_name(const std::string& text) {
  static const std::regex name_line(R"re((^|\n)\s*name\s*:\s*"([^"]*)")re");
  std::smatch m;
  return std::regex_search(text, m, name_line) ? m[2].str() : "";
}

}  // namespace

ModelRepository::ModelRepository(std::string dir, SessionOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec))
    fail("--model-repository ", dir_, " is not a folder; expected DIR/NAME/1/model.onnx for each model");
}

std::vector<std::string> ModelRepository::names() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir_, ec))
    if (e.is_directory() && e.path().filename().string()[0] != '.')
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::shared_ptr<ServedModel> ModelRepository::load(const std::string& name) const {
  fs::path folder = fs::path(dir_) / name;
  std::error_code ec;
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' ||
      !fs::is_directory(folder, ec)) {
    std::string list;
    for (auto& n : names()) list += (list.empty() ? "" : ", ") + n;
    refuse(404, "no model '", name.substr(0, 200), "' in the repository ", dir_, "; it has ",
           list.empty() ? "none" : list);
  }
  fs::path config = folder / "config.pbtxt";
  if (fs::exists(config, ec)) {
    std::string named = config_name(read_file(config.string()));
    if (!named.empty() && named != name)
      refuse(400, config.string(), " names the model '", named.substr(0, 200), "' but its folder is '", name,
             "'; they must be the same");
  }
  std::string version;
  for (auto& e : fs::directory_iterator(folder, ec)) {
    std::string v = e.path().filename().string();
    if (is_version(v) && fs::exists(e.path() / "model.onnx") &&
        (version.empty() || std::stoll(v) > std::stoll(version)))
      version = v;
  }
  if (version.empty())
    refuse(400, "model '", name, "': ", folder.string(),
           " has no version folder with a model.onnx (expected ", (folder / "1" / "model.onnx").string(),
           ")");
  std::string path = (folder / version / "model.onnx").string();
  try {
    return std::make_shared<ServedModel>(name, version, path,
                                         std::make_unique<Session>(load_model(path), options_));
  } catch (const RequestError&) {
    throw;
  } catch (const Error& e) {
    refuse(400, "model '", name, "' failed to load from ", path, ": ", e.what());
  }
}

}  // namespace vlrt::serve

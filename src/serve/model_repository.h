// The models a server answers for under /v2/models/NAME: the pipeline's model, and with
// --model-repository the ONNX models of a folder laid out as Triton's
// (DIR/NAME/VERSION/model.onnx, an optional DIR/NAME/config.pbtxt whose `name` must be NAME),
// served as plain tensors in, tensors out.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/session.h"
#include "pipelines/pipeline.h"

namespace vlrt::serve {

// Triton's inference statistics of one model; durations in nanoseconds.
struct ModelStats {
  struct Count {
    uint64_t count = 0, ns = 0;
  };
  Count success, fail, queue, compute_infer;
  uint64_t inference_count = 0, execution_count = 0;
  uint64_t last_inference_ms = 0;  // milliseconds since the epoch; 0: none yet
};

// One model behind /v2/models/NAME: its session (the pipeline's, or its own) and statistics.
class ServedModel {
 public:
  // The pipeline's model: its requests can also go through the pipeline.
  ServedModel(std::string name, Pipeline& pipeline);
  // A repository model, with a session of its own.
  ServedModel(std::string name, std::string version, std::string path, std::unique_ptr<Session> session);

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& path() const { return path_; }
  Session& session() { return *session_; }
  Pipeline* pipeline() const { return pipeline_; }  // null: a repository model

  ModelStats stats() const;
  void add_success(uint64_t total_ns, uint64_t queue_ns, uint64_t compute_ns);
  void add_failure(uint64_t total_ns);
  void add_execution();

 private:
  std::string name_, version_ = "1", path_;
  std::unique_ptr<Session> own_session_;
  Session* session_ = nullptr;
  Pipeline* pipeline_ = nullptr;
  mutable std::mutex mu_;
  ModelStats stats_;
};

class ModelRepository {
 public:
  // Fails when `dir` is not a folder.
  ModelRepository(std::string dir, SessionOptions options);

  const std::string& dir() const { return dir_; }
  // The model folders, sorted by name.
  std::vector<std::string> names() const;
  // Loads DIR/NAME's highest numbered version. HttpError 404 when DIR has no folder NAME;
  // 400 naming the file when it has no model.onnx, a config.pbtxt of another name, or a model
  // that fails to load.
  std::shared_ptr<ServedModel> load(const std::string& name) const;

 private:
  std::string dir_;
  SessionOptions options_;
};

}  // namespace vlrt::serve

// `vlrt serve`: a pipeline behind HTTP. POST to its endpoint (/v1/detect for grounding),
// the KServe v2 / Triton protocol on its model and on the models of a model repository
// (health, metadata, config, tensor infer with the binary data extension, BYTES inputs
// through the pipeline, statistics, repository index/load/unload), GET /metrics with vlrt's
// and Triton's metric names, and the labelling tools' protocols (Label Studio's ML backend,
// X-AnyLabeling's remote server). Requests are parsed and preprocessed on the HTTP threads; every
// model runs on the batcher's one worker.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "pipelines/pipeline.h"
#include "serve/auth.h"
#include "serve/batcher.h"
#include "serve/labelling.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"
#include "serve/openai_chat.h"
#include "serve/request.h"

namespace httplib {
class Server;
class Request;
struct Response;
}  // namespace httplib

namespace vlrt::serve {

class LabelStudioBackend;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port
  std::string model_name;  // "" : from the model's file name (its folder's for model.onnx)
  int64_t max_batch = 0;   // 0: the plan's largest that fits the memory budget
  double max_queue_delay_ms = 2;
  size_t max_queue = 128;
  int timeout_ms = 30000;
  size_t max_body_bytes = 32 << 20;
  size_t max_prompt_bytes = 2048;
  int64_t max_image_pixels = 64'000'000;
  int http_threads = 0;          // threads kept for connections; 0: max_queue + 64 (more start as connections open)
  double read_timeout_s = 10;    // a request's headers must arrive within it, and its body not pause longer
  size_t max_connections = 4096; // open at once; more are answered 503 and closed
  bool warm_up = true;           // one run at start, so the plan and the gauges exist before traffic
  std::string model_repository;  // "": none; else a Triton-layout folder whose models are all loaded at start
  SessionOptions repository_session;  // the sessions of the repository's models
  LabellingOptions labelling;         // Label Studio's and X-AnyLabeling's routes
  std::string api_key;                // "": open; else every route but health (serve/auth.h) asks for it
  bool insecure = false;              // allows a non-loopback host without an API key
  std::string tls_cert, tls_key;      // PEM files: HTTPS instead of HTTP (both or neither)
};

// Counts for the exit line and the shutdown test.
struct ServeStats {
  uint64_t accepted = 0;   // queued for the model
  uint64_t completed = 0;  // of those, answered with the model's result
  uint64_t timed_out = 0;  // of those, answered 504
  uint64_t failed = 0;     // of those, the model run failed (4xx/5xx)
  uint64_t refused = 0;    // 503: queue full or shutting down
};

class Server {
 public:
  Server(std::unique_ptr<Pipeline> pipeline, ServeOptions options, double load_seconds = 0);
  // A VLM folder's chat model: POST /v1/chat/completions and GET /v1/models (OpenAI's API)
  // instead of the pipeline's endpoint, beside the health, metrics and repository routes; no
  // labelling routes and no warm-up (the chat model plans its decoder and cache at load).
  Server(std::unique_ptr<vlm::Chat> chat, const std::string& folder, ServeOptions options, double load_seconds = 0);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // "https" with --tls-cert / --tls-key, else "http".
  const char* scheme() const { return options_.tls_cert.empty() ? "http" : "https"; }
  // Binds the port (fails naming host and port) and returns it.
  int bind();
  // Serves until shutdown() (blocks). bind() first.
  void listen();
  // Starts listen() on a thread of its own (tests); returns the port.
  int start();
  // New requests get 503, queued and running ones complete, then the listener stops and
  // listen() returns. Safe from any thread, idempotent; returns when drained.
  void shutdown();

  const std::string& model_name() const { return model_name_; }
  // The pipeline's endpoint (/v1/detect for grounding), or /v1/chat/completions.
  const std::string& endpoint() const { return endpoint_; }
  // The repository's models, each with its file when loaded or why it is not.
  std::vector<std::pair<std::string, std::string>> repository_models() const;
  Metrics& metrics() { return metrics_; }
  ServeStats stats() const;
  // Every route as an OpenAPI path and method ("/v2/models/{name}/infer", "post"), the
  // /v2/models/{name} ones also under /versions/{version}.
  std::vector<std::pair<std::string, std::string>> routes() const { return routes_; }

 private:
  struct ModelJob;
  struct PipelineJob;
  struct InferJob;
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // What both constructors share: metrics, batcher, HTTP server and routes, repository.
  void setup(const std::string& model_path, double load_seconds);
  void add_routes();
  void add_chat_routes();
  void add_health_routes();  // health, /v2 and /metrics
  void add_triton_routes();
  void add_labelling_routes();
  // With an API key: answers 401 to a request that is not health and lacks the key.
  bool refuse_unauthorized(const httplib::Request& req, httplib::Response& res);
  void route(const char* method, const std::string& pattern, const std::string& endpoint, Handler fn);
  void handle_pipeline(const httplib::Request& req, httplib::Response& res);
  void handle_infer(const httplib::Request& req, httplib::Response& res);
  // The model's tensors in, tensors out; or through the pipeline when the inputs are BYTES.
  std::shared_ptr<ModelJob> infer_tensors(const std::shared_ptr<ServedModel>& model, InferRequest& request,
                                          InferOutputs& outputs);
  std::shared_ptr<ModelJob> infer_pipeline(const std::shared_ptr<ServedModel>& model, InferRequest& request,
                                           InferOutputs& outputs);
  // parse, preprocess, queue, postprocess: a request through the pipeline of MODEL.
  std::shared_ptr<PipelineJob> run_pipeline_request(const std::shared_ptr<ServedModel>& model,
                                                    const RequestBody& body);
  // One detection for a labelling tool, counted as a request of the pipeline's model.
  Record detect_for_labelling(const DetectFields& fields);
  void handle_metrics(httplib::Response& res);
  // The loaded model NAME (version "" or its version); HttpError 404 otherwise.
  std::shared_ptr<ServedModel> find_model(const std::string& name, const std::string& version = "") const;
  std::vector<std::shared_ptr<ServedModel>> loaded_models() const;
  void load_model(const std::string& name);
  void unload_model(const std::string& name);
  nlohmann::json repository_index() const;
  // Triton's statistics and nv_inference_* metrics of a request the model answered or failed.
  void count_success(ServedModel& model, const Job& job, Clock::time_point t0);
  void count_failure(ServedModel& model, Clock::time_point t0);
  // Runs `answer` (which returns the request's job) and counts the request, started at t0, as
  // answered or failed.
  template <class Answer>
  auto counted(ServedModel& model, Clock::time_point t0, Answer&& answer) {
    decltype(answer()) job;
    try {
      job = answer();
    } catch (...) {
      count_failure(model, t0);
      throw;
    }
    completed_++;
    count_success(model, *job, t0);
    return job;
  }
  // Queues the job (in `place` when one is held) and waits for it; refuses with 503 when the
  // queue is full or closing, 504 when its time runs out, and the job's status when it failed.
  void run_job(const std::shared_ptr<Job>& job, Batcher::Place* place = nullptr);
  // A queue place for a request about to be prepared; 503 when none is free.
  Batcher::Place take_place();
  void refuse_unless_queued(Batcher::Submit submitted);
  int64_t batch_limit(const Job& job);
  void run_batch(const std::vector<std::shared_ptr<Job>>& batch);
  void run_pipeline_batch(const std::vector<std::shared_ptr<Job>>& batch);
  void record_memory(const Signature& signature);
  void warm_up();

  std::unique_ptr<Pipeline> pipeline_;  // null when serving a chat model
  std::unique_ptr<ChatService> chat_;    // null when serving a pipeline
  std::string endpoint_;                 // the pipeline's endpoint, or the chat completions'
  ServeOptions options_;
  std::string model_name_;
  std::shared_ptr<ServedModel> pipeline_model_;
  std::unique_ptr<ApiKey> api_key_;  // null: no key asked for
  LabellingModel labelling_model_;
  std::unique_ptr<LabelStudioBackend> label_studio_;
  std::unique_ptr<ModelRepository> repository_;
  mutable std::mutex models_mu_;
  std::map<std::string, std::shared_ptr<ServedModel>> models_;  // loaded, by name
  std::map<std::string, std::string> unavailable_;              // repository models not loaded: why
  std::mutex load_mu_;                                          // one load or unload at a time
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::vector<std::pair<std::string, std::string>> routes_;
  std::unique_ptr<Batcher> batcher_;
  std::map<std::string, int64_t> batch_limits_;  // worker thread only: signature -> plan's max batch
  std::atomic<bool> ready_{false}, draining_{false};
  std::atomic<uint64_t> accepted_{0}, completed_{0}, timed_out_{0}, failed_{0}, refused_{0};
  std::mutex shutdown_mu_;
  std::thread listen_thread_;
};

// The KServe name for a model file: its stem, or its folder's name for ".../NAME/model.onnx".
std::string default_model_name(const std::string& model_path);

}  // namespace vlrt::serve

#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

// Debian's cpp-httplib is a compiled library built with OpenSSL; its pkg-config flags define
// this for every target that links PkgConfig::HTTPLIB, and every one must see the same classes.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "CPPHTTPLIB_OPENSSL_SUPPORT must be defined wherever httplib.h is included: link PkgConfig::HTTPLIB"
#endif

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "serve/connections.h"
#include "serve/label_studio.h"
#include "serve/openapi_json.h"
#include "serve/request.h"
#include "serve/xanylabeling.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

// A failed run's status and message: memory running out is the server's state (503: try again,
// with Retry-After), anything else a failure of the run (500).
void fail_job(Job& job, const Error& e) {
  bool memory = dynamic_cast<const OutOfMemory*>(&e);
  job.status = memory ? 503 : 500;
  job.error = cat(memory ? "out of memory: " : "inference failed: ", e.what());
}

// HTTPS: httplib's SSLServer with a thread pool; the slow-client guard (connections.h) covers
// plain HTTP only. httplib listens with a backlog of 5: listen() on a listening socket only
// resizes it (the socket is a protected member of httplib::Server).
struct ListeningSocket : httplib::Server {
  static void widen_backlog(httplib::Server& server, int n) { ::listen(server.*(&ListeningSocket::svr_sock_), n); }
};

std::unique_ptr<httplib::Server> make_https_server(const ServeOptions& o, size_t threads) {
  auto https = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!https->is_valid())
    fail("--tls-cert ", o.tls_cert, " / --tls-key ", o.tls_key,
         ": OpenSSL cannot use them; give a PEM certificate and the PEM private key that matches it");
  https->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  https->set_keep_alive_max_count(1000);
  https->set_keep_alive_timeout(2);
  https->set_read_timeout(std::chrono::milliseconds(int64_t(o.read_timeout_s * 1000)));
  return https;
}

// Set by a route handler on its connection's thread, so the logger does not count it again.
thread_local bool t_counted = false;

const std::vector<double> kSecondsBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   30};

// The route a path belongs to, so the labels stay a fixed set whatever clients send.
std::string endpoint_of(const std::string& path, const std::string& pipeline_endpoint) {
  static const std::vector<std::string> exact = {
      "/v2/health/live",      "/v2/health/ready", "/v2", "/metrics", "/v2/models/stats",
      "/v2/repository/index", "/health",          "/",   "/setup",   "/predict",
      "/v1/models",           "/v1/predict",      "/openapi.json"};
  for (auto& e : exact)
    if (path == e) return e;
  if (path == pipeline_endpoint) return path;
  const std::string models = "/v2/models/";
  if (path.rfind(models, 0) == 0) {
    std::string rest = path.substr(models.size());
    size_t slash = rest.find('/');
    if (slash == std::string::npos) return "/v2/models/{name}";
    std::string tail = rest.substr(slash);
    for (const char* t : {"/infer", "/ready", "/config", "/stats"})
      if (tail == t) return "/v2/models/{name}" + tail;
  }
  if (path.rfind("/v2/repository/models/", 0) == 0) return "/v2/repository/models/{name}";
  return "other";
}

void reply_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& msg) {
  reply_json(res, status, {{"error", msg}});
  if (status == 503) res.set_header("Retry-After", "1");
}

// OpenAI's error shape, {"error": {"message", "type", "code"}}, which its clients show.
void reply_openai_error(httplib::Response& res, int status, const std::string& msg) {
  const char* type = status == 401 ? "authentication_error" : status < 500 ? "invalid_request_error" : "server_error";
  reply_json(res, status, {{"error", {{"message", msg}, {"type", type}, {"code", status}}}});
  if (status == 503) res.set_header("Retry-After", "1");
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

const char* const kTritonCounters[] = {"nv_inference_request_success",
                                       "nv_inference_request_failure",
                                       "nv_inference_count",
                                       "nv_inference_exec_count",
                                       "nv_inference_request_duration_us",
                                       "nv_inference_queue_duration_us",
                                       "nv_inference_compute_infer_duration_us"};

// Each of a model's Triton series shows from its load on, at 0.
void show_triton_series(Metrics& metrics, const ServedModel& model) {
  for (const char* counter : kTritonCounters)
    metrics.add(counter, {{"model", model.name()}, {"version", model.version()}}, 0);
}

// A model's entry of Triton's statistics extension (model_stats[]).
json stats_json(const ServedModel& m) {
  ModelStats s = m.stats();
  auto count = [](const ModelStats::Count& c) { return json{{"count", c.count}, {"ns", c.ns}}; };
  return json{{"name", m.name()},
              {"version", m.version()},
              {"last_inference", s.last_inference_ms},
              {"inference_count", s.inference_count},
              {"execution_count", s.execution_count},
              {"inference_stats",
               {{"success", count(s.success)},
                {"fail", count(s.fail)},
                {"queue", count(s.queue)},
                {"compute_infer", count(s.compute_infer)}}},
              {"batch_stats", json::array()}};
}

}  // namespace

// A request for one served model; a batch holds jobs of one model.
struct Server::ModelJob : Job {
  std::shared_ptr<ServedModel> model;
};

struct Server::PipelineJob : ModelJob {
  std::unique_ptr<Request> request;
};

struct Server::InferJob : ModelJob {
  TensorMap inputs, outputs;
};

std::string default_model_name(const std::string& model_path) {
  std::filesystem::path p(model_path);
  std::string stem = p.stem().string();
  if (stem == "model" && p.has_parent_path() && !p.parent_path().filename().empty())
    return p.parent_path().filename().string();
  return stem.empty() ? "model" : stem;
}

Server::Server(std::unique_ptr<Pipeline> pipeline, ServeOptions options, double load_seconds)
    : pipeline_(std::move(pipeline)), options_(std::move(options)) {
  const Model& model = pipeline_->session().model();
  model_name_ = options_.model_name.empty() ? default_model_name(model.path) : options_.model_name;
  endpoint_ = pipeline_->endpoint();
  pipeline_model_ = std::make_shared<ServedModel>(model_name_, *pipeline_);
  models_[model_name_] = pipeline_model_;
  setup(model.path, load_seconds);
}

Server::Server(std::unique_ptr<vlm::Chat> chat, const std::string& folder, ServeOptions options, double load_seconds)
    : options_(std::move(options)) {
  std::filesystem::path dir = std::filesystem::path(folder).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  model_name_ = options_.model_name.empty() ? dir.filename().string() : options_.model_name;
  if (model_name_.empty()) model_name_ = "model";
  endpoint_ = "/v1/chat/completions";
  options_.labelling.enabled = false;  // their /v1/models is X-AnyLabeling's; a chat model detects nothing
  options_.warm_up = false;
  chat_ = std::make_unique<ChatService>(std::move(chat), model_name_, options_.max_image_pixels);
  setup(folder, load_seconds);
}

void Server::setup(const std::string& model_path, double load_seconds) {
  check_security_options(options_);
  metrics_.counter("vlrt_requests_total", "HTTP requests by endpoint and status code.");
  metrics_.histogram("vlrt_request_duration_seconds",
                     "Time from reading a request to its response, by endpoint.", kSecondsBuckets);
  metrics_.histogram("vlrt_queue_duration_seconds", "Time a request waited in the batch queue.",
                     kSecondsBuckets);
  metrics_.histogram("vlrt_inference_duration_seconds", "Time the model took for one batch.",
                     kSecondsBuckets);
  metrics_.histogram("vlrt_batch_size", "Requests per model run.", {1, 2, 4, 8, 16, 32, 64, 128});
  metrics_.gauge("vlrt_queue_depth", "Requests waiting for the model.");
  metrics_.gauge("vlrt_memory_planned_bytes",
                 "Planned memory per device for the last batch: weights plus the activation arena peak.");
  metrics_.gauge("vlrt_memory_in_use_bytes",
                 "Memory in use per device: weights plus the highest arena offset used since start.");
  metrics_.gauge("vlrt_memory_budget_bytes",
                 "Memory budget per device: its --memory cap, else its capacity.");
  metrics_.gauge("vlrt_model_info", "The loaded model (value 1).");
  metrics_.gauge("vlrt_model_load_seconds", "Seconds to load, verify and plan the model.");
  metrics_.gauge("vlrt_max_batch", "The --max-batch cap (0: the memory plan decides per input size).");
  metrics_.gauge("process_resident_memory_bytes", "Resident memory of the server process.");
  metrics_.gauge("vlrt_host_allocations_total", "Host memory blocks allocated since start (tensors, arenas, caches).");
  metrics_.set("vlrt_model_info", {{"model", model_name_}, {"path", model_path}}, 1);
  metrics_.set("vlrt_model_load_seconds", {{"model", model_name_}}, load_seconds);
  metrics_.set("vlrt_max_batch", {}, double(options_.max_batch));
  metrics_.set("vlrt_queue_depth", {}, 0);
  // Triton's names, so its dashboards and alerts read this server too.
  metrics_.counter("nv_inference_request_success", "Successful inference requests, by model and version.");
  metrics_.counter("nv_inference_request_failure", "Failed inference requests, by model and version.");
  metrics_.counter("nv_inference_count", "Inferences performed, by model and version.");
  metrics_.counter("nv_inference_exec_count", "Model executions (batches), by model and version.");
  metrics_.counter("nv_inference_request_duration_us",
                   "Cumulative duration of successful inference requests in microseconds.");
  metrics_.counter("nv_inference_queue_duration_us",
                   "Cumulative time requests waited in the queue in microseconds.");
  metrics_.counter("nv_inference_compute_infer_duration_us",
                   "Cumulative time the model ran for requests in microseconds.");
  if (pipeline_model_) show_triton_series(metrics_, *pipeline_model_);

  BatcherOptions bo;
  bo.max_queue = options_.max_queue;
  bo.max_delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.max_queue_delay_ms));
  batcher_ = std::make_unique<Batcher>(
      bo, [this](const Job& j) { return batch_limit(j); },
      [this](const std::vector<std::shared_ptr<Job>>& b) { run_batch(b); },
      [this](size_t depth) { metrics_.set("vlrt_queue_depth", {}, double(depth)); });

  if (!options_.api_key.empty()) api_key_ = std::make_unique<ApiKey>(options_.api_key);
  // A waiting request holds its connection's thread: as many threads are kept as queue places
  // and more, and each further connection starts one (see connections.h).
  ConnectionLimits limits;
  limits.threads_kept = options_.http_threads > 0 ? size_t(options_.http_threads) : options_.max_queue + 64;
  limits.read_timeout = std::chrono::milliseconds(int64_t(options_.read_timeout_s * 1000));
  limits.max_connections = options_.max_connections;
  std::unique_ptr<httplib::Server> http = options_.tls_cert.empty()
                                              ? std::make_unique<GuardedHttpServer>(limits)
                                              : make_https_server(options_, limits.threads_kept);
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // silently; a port in use must be an error.
  http->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (api_key_)
    http->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return refuse_unauthorized(req, res) ? httplib::Server::HandlerResponse::Handled
                                           : httplib::Server::HandlerResponse::Unhandled;
    });
  http->set_payload_max_length(options_.max_body_bytes);
  // Requests no handler saw (404, 413, unparsable): counted when httplib logs them.
  http->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (!t_counted)
      metrics_.add("vlrt_requests_total", {{"endpoint", endpoint_of(req.path, endpoint_)},
                                           {"status", std::to_string(res.status)}});
    t_counted = false;
  });
  // Responses httplib makes itself (404, 413, unparsable requests) get a JSON body too.
  http->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg;
        if (res.status == 404)
          msg = cat("no route for ", req.method, " ", req.path.substr(0, 200), "; endpoints: POST ", endpoint_,
                    chat_ ? ", GET /v1/models" : "", ", GET /v2, GET /v2/health/live, GET /v2/health/ready, GET /v2/models/", model_name_,
                    "[/config|/ready|/stats], POST /v2/models/", model_name_,
                    "/infer, GET /v2/models/stats, POST /v2/repository/index, POST "
                    "/v2/repository/models/NAME/{load,unload}, GET /metrics",
                    options_.labelling.enabled
                        ? "; labelling tools: GET /health, POST /setup, POST /predict (Label Studio), GET "
                          "/v1/models, POST /v1/predict (X-AnyLabeling)"
                        : "");
        else if (res.status == 413)
          msg = cat("request body larger than the limit of ", options_.max_body_bytes, " bytes");
        else if (res.status == 400 && request_timed_out())
          res.status = 408, msg = cat("the request did not arrive within the read timeout of ", options_.read_timeout_s,
                                      " s (headers in all, body per pause)");
        else if (res.status == 400)
          msg = "malformed HTTP request (request line, headers or multipart body)";
        else
          msg = cat("HTTP status ", res.status);
        reply_error(res, res.status, msg);
        // After a request httplib could not read whole, the connection holds what is left of it:
        // the client must not send another request on it.
        if (res.status != 404) res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, 500, "internal error: " + what);
  });
  http_ = std::move(http);

  if (chat_)
    add_chat_routes();
  else
    add_routes();
  add_health_routes();
  add_triton_routes();
  if (options_.labelling.enabled) add_labelling_routes();
  if (!options_.model_repository.empty()) {
    repository_ = std::make_unique<ModelRepository>(options_.model_repository, options_.repository_session);
    for (auto& name : repository_->names()) {
      if (name == model_name_)
        fail("the repository ", options_.model_repository, " has a model named '", name,
             "', the name of the pipeline's model; pass --model-name to serve that under another");
      try {
        load_model(name);
      } catch (const RequestError& e) {
        std::fprintf(stderr, "vlrt serve: repository model '%s' not loaded: %s\n", name.c_str(), e.what());
      }
    }
  }
}

void Server::add_routes() {
  route("POST", endpoint_, endpoint_, [this](auto& req, auto& res) { handle_pipeline(req, res); });
}

// The chat model's requests are not batched: they wait for the one generation at a time in
// ChatService, on their HTTP threads.
void Server::add_chat_routes() {
  route("POST", endpoint_, endpoint_, [this](auto& req, auto& res) {
    try {
      if (draining_) refuse(503, "the server is shutting down");
      chat_->completions(req, res);
    } catch (const RequestError& e) {
      if (e.status() >= 500) accepted_++, failed_++;  // a 4xx never reached the model
      return reply_openai_error(res, e.status(), e.what());
    } catch (const OutOfMemory& e) {
      accepted_++, failed_++;
      return reply_openai_error(res, 503, cat("out of memory: ", e.what()));
    } catch (const std::exception& e) {
      accepted_++, failed_++;
      return reply_openai_error(res, 500, cat("internal error: ", e.what()));
    }
    accepted_++;
    completed_++;
  });
  route("GET", "/v1/models", "/v1/models", [this](auto&, auto& res) { reply_json(res, 200, chat_->models()); });
}

void Server::add_health_routes() {
  route("GET", "/v2/health/live", "/v2/health/live", [](auto&, auto& res) {
    reply_json(res, 200, {{"live", true}});
  });
  route("GET", "/v2/health/ready", "/v2/health/ready", [this](auto&, auto& res) {
    if (ready_ && !draining_) return reply_json(res, 200, {{"ready", true}});
    reply_json(res, 503, {{"ready", false}, {"error", draining_ ? "shutting down" : "warming up"}});
  });
  route("GET", "/v2", "/v2", [this](auto&, auto& res) {
    json extensions = {"binary_tensor_data", "statistics", "model_configuration"};
    if (repository_) extensions.push_back("model_repository");
    reply_json(res, 200, {{"name", "vlrt"}, {"version", "0.1.0"}, {"extensions", extensions}});
  });
  route("GET", "/metrics", "/metrics", [this](auto&, auto& res) { handle_metrics(res); });
  route("GET", "/openapi.json", "/openapi.json", [](auto&, auto& res) {
    res.status = 200;
    res.set_content(kOpenApiJson, "application/json");
  });
}

void Server::add_labelling_routes() {
  labelling_model_.name = model_name_;
  try {
    labelling_model_.defaults = pipeline_->settings(*pipeline_->query("object ."));
    labelling_model_.defaults.erase("prompt");
  } catch (const Error&) {
    // a pipeline without a text prompt: no defaults to show
  }
  labelling_model_.detect = [this](const DetectFields& f) { return detect_for_labelling(f); };
  label_studio_ = std::make_unique<LabelStudioBackend>(labelling_model_, options_.labelling);
  for (const char* health : {"/health", "/"})
    route("GET", health, health, [this](auto&, auto& res) { reply_json(res, 200, label_studio_->health()); });
  route("POST", "/setup", "/setup",
        [this](auto& req, auto& res) { reply_json(res, 200, label_studio_->setup(req.body)); });
  route("POST", "/predict", "/predict",
        [this](auto& req, auto& res) { reply_json(res, 200, label_studio_->predict(req.body)); });
  route("GET", "/v1/models", "/v1/models",
        [this](auto&, auto& res) { reply_json(res, 200, xanylabeling::models(labelling_model_)); });
  route("POST", "/v1/predict", "/v1/predict", [this](auto& req, auto& res) {
    reply_json(res, 200, xanylabeling::predict(req.body, labelling_model_, options_.labelling.prompt));
  });
}

// The per-model routes, each also under /v2/models/NAME/versions/VERSION/..., and the
// repository's.
void Server::add_triton_routes() {
  const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  route("GET", "/v2/models/stats", "/v2/models/stats", [this](auto&, auto& res) {
    json all = json::array();
    for (auto& m : loaded_models()) all.push_back(stats_json(*m));
    reply_json(res, 200, {{"model_stats", all}});
  });
  route("POST", model + "/infer", "/v2/models/{name}/infer",
        [this](auto& req, auto& res) { handle_infer(req, res); });
  route("GET", model, "/v2/models/{name}", [this](auto& req, auto& res) {
    auto m = find_model(req.matches[1], req.matches[2]);
    json meta = model_metadata(m->name(), m->session().model());
    meta["versions"] = {m->version()};
    reply_json(res, 200, meta);
  });
  route("GET", model + "/config", "/v2/models/{name}/config", [this](auto& req, auto& res) {
    auto m = find_model(req.matches[1], req.matches[2]);
    reply_json(res, 200, model_config(m->name(), m->session().model()));
  });
  route("GET", model + "/stats", "/v2/models/{name}/stats", [this](auto& req, auto& res) {
    reply_json(res, 200, {{"model_stats", {stats_json(*find_model(req.matches[1], req.matches[2]))}}});
  });
  route("GET", model + "/ready", "/v2/models/{name}/ready", [this](auto& req, auto& res) {
    std::string name = req.matches[1];
    {
      std::lock_guard<std::mutex> lk(models_mu_);
      if (unavailable_.count(name))
        return reply_json(res, 503, {{"name", name}, {"ready", false}, {"error", unavailable_.at(name)}});
    }
    auto m = find_model(name, req.matches[2]);
    bool ready = ready_ && !draining_;
    reply_json(res, ready ? 200 : 503, {{"name", m->name()}, {"ready", ready}});
  });
  auto need_repository = [this] {
    if (!repository_)
      refuse(400, "this server has no model repository; start it with --model-repository DIR");
  };
  route("POST", "/v2/repository/index", "/v2/repository/index", [this, need_repository](auto&, auto& res) {
    need_repository();
    reply_json(res, 200, repository_index());
  });
  route("POST", "/v2/repository/models/([^/]+)/load", "/v2/repository/models/{name}",
        [this, need_repository](auto& req, auto& res) {
          need_repository();
          load_model(req.matches[1]);
          reply_json(res, 200, json::object());
        });
  route("POST", "/v2/repository/models/([^/]+)/unload", "/v2/repository/models/{name}",
        [this, need_repository](auto& req, auto& res) {
          need_repository();
          unload_model(req.matches[1]);
          reply_json(res, 200, json::object());
        });
}

std::shared_ptr<ServedModel> Server::find_model(const std::string& name, const std::string& version) const {
  std::lock_guard<std::mutex> lk(models_mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    auto why = unavailable_.find(name);
    if (why != unavailable_.end())
      refuse(400, "model '", name, "' is not loaded (", why->second, "); POST /v2/repository/models/", name,
             "/load");
    std::string names;
    for (auto& [n, m] : models_) names += (names.empty() ? "'" : ", '") + n + "'";
    refuse(404, "unknown model '", name.substr(0, 200), "'; this server serves ", names);
  }
  if (!version.empty() && version != it->second->version())
    refuse(404, "model '", name, "' has no version '", version.substr(0, 40), "'; it has version ",
           it->second->version());
  return it->second;
}

std::vector<std::shared_ptr<ServedModel>> Server::loaded_models() const {
  std::lock_guard<std::mutex> lk(models_mu_);
  std::vector<std::shared_ptr<ServedModel>> all;
  for (auto& [name, m] : models_) all.push_back(m);
  return all;
}

void Server::load_model(const std::string& name) {
  std::lock_guard<std::mutex> load_lk(load_mu_);
  if (name == model_name_) return;  // the pipeline's model is always loaded
  std::shared_ptr<ServedModel> m;
  try {
    m = repository_->load(name);
  } catch (const RequestError& e) {
    std::lock_guard<std::mutex> lk(models_mu_);
    if (e.status() != 404) unavailable_[name] = cat("failed to load: ", e.what());
    throw;
  }
  show_triton_series(metrics_, *m);
  std::lock_guard<std::mutex> lk(models_mu_);
  models_[name] = std::move(m);  // a reload replaces the model; requests running on the old one finish
  unavailable_.erase(name);
}

void Server::unload_model(const std::string& name) {
  std::lock_guard<std::mutex> load_lk(load_mu_);
  if (name == model_name_)
    refuse(400, "model '", name,
           "' is the pipeline's model, served for the whole life of the server; only "
           "repository models can be unloaded");
  std::lock_guard<std::mutex> lk(models_mu_);
  auto names = repository_->names();
  if (!models_.count(name) && std::find(names.begin(), names.end(), name) == names.end())
    refuse(404, "no model '", name.substr(0, 200), "' in the repository ", repository_->dir());
  models_.erase(name);  // requests holding it finish on it
  unavailable_[name] = "unloaded";
}

std::vector<std::pair<std::string, std::string>> Server::repository_models() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!repository_) return out;
  std::lock_guard<std::mutex> lk(models_mu_);
  for (auto& name : repository_->names()) {
    auto m = models_.find(name);
    auto why = unavailable_.find(name);
    out.emplace_back(name, m != models_.end()          ? m->second->path()
                           : why != unavailable_.end() ? why->second
                                                       : "not loaded");
  }
  return out;
}

json Server::repository_index() const {
  json index = json::array();
  std::lock_guard<std::mutex> lk(models_mu_);
  for (auto& name : repository_->names()) {
    auto loaded = models_.find(name);
    if (loaded != models_.end()) {
      index.push_back({{"name", name}, {"version", loaded->second->version()}, {"state", "READY"}});
      continue;
    }
    auto why = unavailable_.find(name);
    index.push_back({{"name", name},
                     {"state", "UNAVAILABLE"},
                     {"reason", why == unavailable_.end() ? "not loaded" : why->second}});
  }
  return index;
}

Server::~Server() { shutdown(); }

bool Server::refuse_unauthorized(const httplib::Request& req, httplib::Response& res) {
  if (is_health_route(req.method, req.path) ||
      api_key_->accepts(req.get_header_value("Authorization"), req.get_header_value("Token")))
    return false;
  bool has_key = req.has_header("Authorization") || req.has_header("Token");
  std::string msg = has_key ? "the API key does not match this server's" : "this server asks for an API key";
  msg += ": send it as 'Authorization: Bearer KEY' or 'Token: KEY'";
  if (chat_ && req.path.rfind("/v1/", 0) == 0)
    reply_openai_error(res, 401, msg);
  else
    reply_error(res, 401, msg);
  res.set_header("WWW-Authenticate", "Bearer");
  res.set_header("Connection", "close");  // its body, if any, was not read
  // Counted now, like the routes' answers, rather than when httplib logs the response.
  metrics_.add("vlrt_requests_total", {{"endpoint", endpoint_of(req.path, endpoint_)}, {"status", "401"}});
  t_counted = true;
  return true;
}

void Server::route(const char* method, const std::string& pattern, const std::string& endpoint, Handler fn) {
  // Every handler answers JSON whatever goes wrong; vlrt::Errors that reach here were not
  // classified as the client's fault, so they are 500s.
  auto wrapped = [this, endpoint, fn](const httplib::Request& req, httplib::Response& res) {
    Clock::time_point t0 = Clock::now();
    try {
      fn(req, res);
    } catch (const HttpError& e) {
      reply_error(res, e.status(), e.what());
    } catch (const std::bad_alloc&) {
      reply_error(res, 503, "out of memory while handling the request");
    } catch (const OutOfMemory& e) {
      reply_error(res, 503, cat("out of memory while handling the request: ", e.what()));
    } catch (const std::exception& e) {
      reply_error(res, 500, cat("internal error: ", e.what()));
    } catch (...) {
      reply_error(res, 500, "internal error");
    }
    // Counted here rather than in the logger, which httplib calls after the response is
    // sent: a client scraping right after its response must see it counted.
    metrics_.add("vlrt_requests_total", {{"endpoint", endpoint}, {"status", std::to_string(res.status)}});
    metrics_.observe("vlrt_request_duration_seconds", {{"endpoint", endpoint}},
                     std::chrono::duration<double>(Clock::now() - t0).count());
    t_counted = true;
  };
  std::string path = pattern, lower = std::strcmp(method, "GET") == 0 ? "get" : "post";
  const std::string version = "(?:/versions/([^/]+))?", name = "([^/]+)";
  size_t v = path.find(version);
  if (v != std::string::npos) {
    path.erase(v, version.size());
    std::string versioned = path;
    versioned.insert(v, "/versions/{version}");
    versioned.replace(versioned.find(name), name.size(), "{name}");
    routes_.emplace_back(versioned, lower);
  }
  if (size_t n = path.find(name); n != std::string::npos) path.replace(n, name.size(), "{name}");
  routes_.emplace_back(path, lower);
  if (std::strcmp(method, "GET") == 0)
    http_->Get(pattern, wrapped);
  else
    http_->Post(pattern, wrapped);
}

int Server::bind() {
  // A client that closes its socket early must not kill the server with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // Each connection holds a descriptor: the default 1024 would refuse connections (and fail
  // file opens) long before --max-connections.
  raise_open_files_limit();
  if (options_.warm_up) warm_up();
  ready_ = true;
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) fail("cannot listen on ", options_.host, " (any port): bad address?");
  } else if (!http_->bind_to_port(options_.host, port)) {
    fail("cannot listen on ", options_.host, ":", port, " (in use, or not an address of this machine?)");
  }
  if (auto* guarded = dynamic_cast<GuardedHttpServer*>(http_.get()))
    guarded->widen_backlog(4096);
  else
    ListeningSocket::widen_backlog(*http_, 1024);
  return port;
}

void Server::listen() { http_->listen_after_bind(); }

int Server::start() {
  int port = bind();
  listen_thread_ = std::thread([this] { listen(); });
  while (!http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void Server::shutdown() {
  std::lock_guard<std::mutex> lk(shutdown_mu_);
  draining_ = true;
  batcher_->drain();  // every queued request runs; their handlers answer
  http_->stop();      // the listener closes; connections finish their current request
  if (listen_thread_.joinable()) listen_thread_.join();
}

ServeStats Server::stats() const { return {accepted_, completed_, timed_out_, failed_, refused_}; }

void Server::refuse_unless_queued(Batcher::Submit submitted) {
  switch (submitted) {
    case Batcher::Submit::closed:
      refused_++;
      refuse(503, "the server is shutting down");
    case Batcher::Submit::full:
      refused_++;
      refuse(503, "the queue is full (", options_.max_queue, " requests waiting); retry later");
    case Batcher::Submit::queued:
      break;
  }
}

Batcher::Place Server::take_place() {
  Batcher::Place place;
  refuse_unless_queued(batcher_->reserve(place));
  return place;
}

void Server::run_job(const std::shared_ptr<Job>& job, Batcher::Place* place) {
  refuse_unless_queued(batcher_->submit(job, place));
  accepted_++;
  if (job->finished_by(job->enqueued + std::chrono::milliseconds(options_.timeout_ms))) {
    if (job->status != 200) {
      failed_++;
      refuse(job->status, job->error);
    }
    return;
  }
  timed_out_++;
  bool queued = batcher_->cancel(job);
  refuse(504, "no result within the request timeout of ", options_.timeout_ms, " ms (",
         queued ? "still waiting in the queue" : "the model was still running it", ")");
}

void Server::handle_pipeline(const httplib::Request& req, httplib::Response& res) {
  Clock::time_point t0 = Clock::now();
  if (draining_) refuse(503, "the server is shutting down");
  RequestBody body;
  body.multipart = req.is_multipart_form_data();
  for (auto& [name, part] : req.files) body.parts.emplace_back(name, part.content);
  std::string content_type = req.get_header_value("Content-Type");
  body.content_type = content_type;
  body.body = req.body;
  auto job = counted(*pipeline_model_, t0, [&] { return run_pipeline_request(pipeline_model_, body); });
  json reply = pipeline_->response(*job->request);
  reply["timing"] = {{"queue_ms", ms_between(job->enqueued, job->started)},
                     {"inference_ms", ms_between(job->started, job->finished)},
                     {"total_ms", ms_between(t0, Clock::now())}};
  reply["batch_size"] = job->batch_size;
  reply_json(res, 200, reply);
}

void Server::handle_infer(const httplib::Request& req, httplib::Response& res) {
  Clock::time_point t0 = Clock::now();
  auto model = find_model(req.matches[1], req.matches[2]);
  InferRequest request;
  InferOutputs outputs;
  counted(*model, t0, [&] {
    if (draining_) refuse(503, "the server is shutting down");
    size_t json_length = std::string::npos;
    if (req.has_header("Inference-Header-Content-Length")) {
      std::string v = req.get_header_value("Inference-Header-Content-Length");
      char* end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || v[0] == '-' || errno != 0 || *end != '\0')
        refuse(400, "Inference-Header-Content-Length is '", v.substr(0, 40),
               "'; expected the JSON header's size in bytes");
      json_length = size_t(n);
    }
    request = parse_infer_request(req.body, json_length);
    return request.bytes_inputs.empty() ? infer_tensors(model, request, outputs)
                                        : infer_pipeline(model, request, outputs);
  });
  InferReply reply = infer_response(model->name(), request, outputs);
  res.status = 200;
  if (reply.json_length == std::string::npos) {
    res.set_content(std::move(reply.body), "application/json");
  } else {
    res.set_header("Inference-Header-Content-Length", std::to_string(reply.json_length));
    res.set_content(std::move(reply.body), "application/octet-stream");
  }
}

std::shared_ptr<Server::ModelJob> Server::infer_tensors(const std::shared_ptr<ServedModel>& model,
                                                        InferRequest& request, InferOutputs& outputs) {
  Session& session = model->session();
  for (auto& d : session.model().graph.outputs) outputs.names.push_back(d.name);
  check_output_names(request, outputs.names);
  try {
    session.check_inputs(request.inputs);  // reads only the model's declaration: safe off the worker
  } catch (const Error& e) {
    refuse(400, e.what());
  }
  auto job = std::make_shared<InferJob>();
  job->model = model;
  job->inputs = std::move(request.inputs);
  run_job(job);
  outputs.tensors = std::move(job->outputs);
  return job;
}

// BYTES inputs go through the pipeline as its form fields of the same names (grounding: image,
// the encoded file, and prompt); numbers and strings among the request's parameters join them
// (box_threshold). The answer is the detections as tensors.
std::shared_ptr<Server::ModelJob> Server::infer_pipeline(const std::shared_ptr<ServedModel>& model,
                                                         InferRequest& request, InferOutputs& outputs) {
  if (!model->pipeline())
    refuse(400, "model '", model->name(), "' takes tensors; BYTES inputs ('",
           request.bytes_inputs.begin()->first, "') are for the pipeline's model '", model_name_, "'");
  if (!request.inputs.empty())
    refuse(400, "input '", request.inputs.begin()->first,
           "' is numeric, but a request with BYTES inputs goes through the ", pipeline_->name(),
           " pipeline, whose inputs are all BYTES (grounding: image, prompt)");
  outputs.names = {"boxes", "scores", "labels"};
  check_output_names(request, outputs.names);
  static const std::set<std::string> reserved = {"binary_data_output", "sequence_id", "sequence_start",
                                                 "sequence_end",       "priority",    "timeout"};
  std::vector<std::string> texts;  // parameters as text, viewed by the body's parts
  texts.reserve(request.parameters.size());
  RequestBody body;
  body.multipart = true;
  for (auto& [name, tensor] : request.bytes_inputs) {
    if (tensor.elements.size() != 1)
      refuse(400, "input '", name, "' has ", tensor.elements.size(), " elements (shape ",
             shape_str(tensor.shape), "); the pipeline takes one per request (shape [1])");
    body.parts.emplace_back(name, tensor.elements[0]);
  }
  for (auto& [key, v] : request.parameters.items()) {
    if (reserved.count(key) || !(v.is_number() || v.is_string())) continue;
    texts.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    body.parts.emplace_back(key, texts.back());
  }
  auto job = run_pipeline_request(model, body);
  Record record = pipeline_->record(*job->request);
  int64_t n = int64_t(record.detections.size());
  Tensor boxes(DType::f32, {n, 4}), scores(DType::f32, {n});
  BytesTensor labels{{n}, {}};
  for (int64_t i = 0; i < n; i++) {
    const vision::Detection& d = record.detections[size_t(i)];
    float* b = boxes.data<float>() + 4 * i;
    b[0] = d.x1, b[1] = d.y1, b[2] = d.x2, b[3] = d.y2;
    scores.data<float>()[i] = d.score;
    labels.elements.push_back(d.label);
  }
  outputs.tensors = {{"boxes", boxes}, {"scores", scores}};
  outputs.bytes = {{"labels", labels}};
  return job;
}

// Decoding, resizing, normalizing and tokenizing run on the HTTP thread, once the request holds
// a place in the queue (a full queue refuses it before that work), and so does
// postprocessing (for grounding a sigmoid per query and token), in parallel with the worker's
// next batch: the worker only runs the model.
std::shared_ptr<Server::PipelineJob> Server::run_pipeline_request(const std::shared_ptr<ServedModel>& model,
                                                                  const RequestBody& body) {
  Batcher::Place place = take_place();  // before the decoding a full queue would waste
  auto job = std::make_shared<PipelineJob>();
  job->model = model;
  job->request = pipeline_->parse(body);
  pipeline_->preprocess(*job->request, {options_.max_prompt_bytes, options_.max_image_pixels});
  job->key = job->request->batch_key;
  run_job(job, &place);
  pipeline_->postprocess(*job->request);
  return job;
}

Record Server::detect_for_labelling(const DetectFields& fields) {
  Clock::time_point t0 = Clock::now();
  if (draining_) refuse(503, "the server is shutting down");
  RequestBody body;
  body.multipart = true;
  std::string box = fields.box_threshold ? cat(*fields.box_threshold) : "",
              text = fields.text_threshold ? cat(*fields.text_threshold) : "";
  body.parts = {{"image", fields.image}, {"prompt", fields.prompt}};
  if (fields.box_threshold) body.parts.emplace_back("box_threshold", box);
  if (fields.text_threshold) body.parts.emplace_back("text_threshold", text);
  auto job = counted(*pipeline_model_, t0, [&] { return run_pipeline_request(pipeline_model_, body); });
  return pipeline_->record(*job->request);
}

void Server::count_success(ServedModel& model, const Job& job, Clock::time_point t0) {
  auto ns = [](Clock::duration d) {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  };
  uint64_t total = ns(Clock::now() - t0), queue = ns(job.started - job.enqueued),
           compute = ns(job.finished - job.started);
  model.add_success(total, queue, compute);
  Labels labels = {{"model", model.name()}, {"version", model.version()}};
  metrics_.add("nv_inference_request_success", labels);
  metrics_.add("nv_inference_count", labels);
  metrics_.add("nv_inference_request_duration_us", labels, double(total) / 1000);
  metrics_.add("nv_inference_queue_duration_us", labels, double(queue) / 1000);
  metrics_.add("nv_inference_compute_infer_duration_us", labels, double(compute) / 1000);
}

void Server::count_failure(ServedModel& model, Clock::time_point t0) {
  model.add_failure(
      uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
  metrics_.add("nv_inference_request_failure", {{"model", model.name()}, {"version", model.version()}});
}

void Server::handle_metrics(httplib::Response& res) {
  metrics_.set("process_resident_memory_bytes", {}, double(resident_bytes()));
  metrics_.set("vlrt_host_allocations_total", {}, double(host_allocations()));
  res.status = 200;
  res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
}

int64_t Server::batch_limit(const Job& job) {
  auto* p = dynamic_cast<const PipelineJob*>(&job);
  if (!p) return 1;
  std::string key;
  for (auto& [name, decl] : pipeline_->signature(*p->request, 1))
    key += cat(name, ":", dtype_name(decl.first), shape_str(decl.second), ";");
  auto it = batch_limits_.find(key);
  if (it == batch_limits_.end()) {
    if (batch_limits_.size() > 4096) batch_limits_.clear();
    it = batch_limits_.emplace(key, pipeline_->max_batch(*p->request)).first;
  }
  return options_.max_batch > 0 ? std::min(options_.max_batch, it->second) : it->second;
}

void Server::run_batch(const std::vector<std::shared_ptr<Job>>& batch) {
  Clock::time_point start = Clock::now();
  ServedModel& model = *static_cast<ModelJob&>(*batch[0]).model;
  if (dynamic_cast<PipelineJob*>(batch[0].get())) {
    run_pipeline_batch(batch);
  } else {
    auto& job = static_cast<InferJob&>(*batch[0]);
    Session& session = model.session();
    auto sig = signature_of(job.inputs);
    try {
      session.plan(sig);
    } catch (const OutOfMemory& e) {
      fail_job(job, e);
    } catch (const Error& e) {
      job.status = 400;  // shapes the model cannot take: the client's inputs
      job.error = cat("the model cannot run on these inputs: ", e.what());
    }
    if (job.status == 200) {
      try {
        job.outputs = session.run(job.inputs);
        if (&model == pipeline_model_.get()) record_memory(sig);  // the gauges are the pipeline model's
      } catch (const Error& e) {
        fail_job(job, e);
      }
    }
    job.inputs.clear();
  }
  // Recorded before the jobs finish, so a client that scrapes right after its response
  // sees its batch counted.
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.observe("vlrt_inference_duration_seconds", {}, seconds);
  metrics_.observe("vlrt_batch_size", {}, double(batch.size()));
  model.add_execution();
  metrics_.add("nv_inference_exec_count", {{"model", model.name()}, {"version", model.version()}});
  for (auto& j : batch)
    metrics_.observe("vlrt_queue_duration_seconds", {},
                     std::chrono::duration<double>(j->started - j->enqueued).count());
  for (auto& j : batch) j->finish();
}

// The pipeline's model run for requests the HTTP threads preprocessed; they postprocess
// their own rows. Sets each job's error; run_batch finishes them.
void Server::run_pipeline_batch(const std::vector<std::shared_ptr<Job>>& batch) {
  std::vector<Request*> requests;
  for (auto& j : batch) requests.push_back(static_cast<PipelineJob&>(*j).request.get());
  try {
    pipeline_->run(requests);
    record_memory(pipeline_->signature(*requests[0], int64_t(requests.size())));
  } catch (const Error& e) {
    for (auto& j : batch) fail_job(*j, e);
  }
}

void Server::record_memory(const Signature& signature) {
  Session& session = pipeline_->session();
  const Plan& plan = session.plan(signature);  // cached: the plan of the run just done
  for (auto& dp : plan.devices) {
    Labels dev = {{"device", dp.device.str()}};
    metrics_.set("vlrt_memory_planned_bytes", dev, double(dp.total_bytes()));
    metrics_.set(
        "vlrt_memory_in_use_bytes", dev,
        double(dp.weight_bytes + dp.prepared_bytes + session.executor().arena_high_water(dp.device)));
    size_t budget = dp.cap ? dp.cap : session.executor().backend(dp.device).memory_capacity();
    metrics_.set("vlrt_memory_budget_bytes", dev, double(budget));
  }
}

void Server::warm_up() {
  // A request made up by the pipeline: the first plan, the batch limit for its size and the
  // memory gauges exist before the first client, and a model that cannot run fails here
  // rather than on a client.
  auto job = std::make_shared<PipelineJob>();
  try {
    job->request = pipeline_->warm_up_request();
    job->key = "warm-up";
    batch_limit(*job);
    run_pipeline_batch({job});
  } catch (const Error& e) {
    fail("warm-up detection failed: ", e.what());
  }
  if (job->status != 200) fail("warm-up detection failed: ", job->error);
}

}  // namespace vlrt::serve

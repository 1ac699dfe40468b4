#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serve/request.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

// httplib listens with a backlog of 5; 32 clients connecting at once would see dropped SYNs
// and one-second retransmits. listen() on a listening socket only resizes its backlog.
class HttpServer : public httplib::Server {
 public:
  void widen_backlog(int n) { ::listen(svr_sock_, n); }
};

// Set by a route handler on its connection's thread, so the logger does not count it again.
thread_local bool t_counted = false;

const std::vector<double> kSecondsBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   30};

// The route a path belongs to, so the labels stay a fixed set whatever clients send.
std::string endpoint_of(const std::string& path, const std::string& pipeline_endpoint) {
  static const std::vector<std::string> exact = {"/v2/health/live", "/v2/health/ready", "/v2", "/metrics"};
  for (auto& e : exact)
    if (path == e) return e;
  if (path == pipeline_endpoint) return path;
  const std::string models = "/v2/models/";
  if (path.rfind(models, 0) == 0) {
    std::string rest = path.substr(models.size());
    size_t slash = rest.find('/');
    if (slash == std::string::npos) return "/v2/models/{name}";
    std::string tail = rest.substr(slash);
    if (tail == "/infer") return "/v2/models/{name}/infer";
    if (tail == "/ready") return "/v2/models/{name}/ready";
  }
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

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

struct Server::PipelineJob : Job {
  std::unique_ptr<Request> request;
};

struct Server::InferJob : Job {
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
  metrics_.set("vlrt_model_info", {{"model", model_name_}, {"path", model.path}}, 1);
  metrics_.set("vlrt_model_load_seconds", {{"model", model_name_}}, load_seconds);
  metrics_.set("vlrt_max_batch", {}, double(options_.max_batch));
  metrics_.set("vlrt_queue_depth", {}, 0);

  BatcherOptions bo;
  bo.max_queue = options_.max_queue;
  bo.max_delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.max_queue_delay_ms));
  batcher_ = std::make_unique<Batcher>(
      bo, [this](const Job& j) { return batch_limit(j); },
      [this](const std::vector<std::shared_ptr<Job>>& b) { run_batch(b); },
      [this](size_t depth) { metrics_.set("vlrt_queue_depth", {}, double(depth)); });

  auto http = std::make_unique<HttpServer>();
  // A waiting request holds its connection's thread: more threads than queue places, so
  // the queue fills (and answers 503) before connections wait unanswered for a thread.
  int threads = options_.http_threads > 0 ? options_.http_threads : int(options_.max_queue) + 64;
  http->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // silently; a port in use must be an error.
  http->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http->set_payload_max_length(options_.max_body_bytes);
  http->set_keep_alive_max_count(1000);
  http->set_keep_alive_timeout(2);  // an idle connection holds back shutdown this long
  http->set_read_timeout(10);
  // Requests no handler saw (404, 413, unparsable): counted when httplib logs them.
  http->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (!t_counted)
      metrics_.add("vlrt_requests_total", {{"endpoint", endpoint_of(req.path, pipeline_->endpoint())},
                                           {"status", std::to_string(res.status)}});
    t_counted = false;
  });
  // Responses httplib makes itself (404, 413, unparsable requests) get a JSON body too.
  http->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg;
        if (res.status == 404)
          msg = cat("no route for ", req.method, " ", req.path.substr(0, 200), "; endpoints: POST ",
                    pipeline_->endpoint(), ", GET /v2/health/live, GET /v2/health/ready, GET /v2/models/",
                    model_name_, ", POST /v2/models/", model_name_, "/infer, GET /metrics");
        else if (res.status == 413)
          msg = cat("request body larger than the limit of ", options_.max_body_bytes, " bytes");
        else if (res.status == 400)
          msg = "malformed HTTP request (request line, headers or multipart body)";
        else
          msg = cat("HTTP status ", res.status);
        reply_error(res, res.status, msg);
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

  route("POST", pipeline_->endpoint(), pipeline_->endpoint(),
        [this](auto& req, auto& res) { handle_pipeline(req, res); });
  route("POST", R"(/v2/models/([^/]+)/infer)", "/v2/models/{name}/infer",
        [this](auto& req, auto& res) { handle_infer(req, res); });
  route("GET", "/v2/health/live", "/v2/health/live", [](auto&, auto& res) {
    reply_json(res, 200, {{"live", true}});
  });
  route("GET", "/v2/health/ready", "/v2/health/ready", [this](auto&, auto& res) {
    if (ready_ && !draining_) return reply_json(res, 200, {{"ready", true}});
    reply_json(res, 503, {{"ready", false}, {"error", draining_ ? "shutting down" : "warming up"}});
  });
  route("GET", "/v2", "/v2", [](auto&, auto& res) {
    reply_json(res, 200, {{"name", "vlrt"}, {"version", "0.1.0"}, {"extensions", json::array()}});
  });
  route("GET", R"(/v2/models/([^/]+))", "/v2/models/{name}", [this](auto& req, auto& res) {
    if (req.matches[1] != model_name_)
      refuse(404, "unknown model '", req.matches[1].str().substr(0, 200), "'; this server serves '",
             model_name_, "'");
    reply_json(res, 200, model_metadata(model_name_, pipeline_->session().model()));
  });
  route("GET", R"(/v2/models/([^/]+)/ready)", "/v2/models/{name}/ready", [this](auto& req, auto& res) {
    if (req.matches[1] != model_name_)
      refuse(404, "unknown model '", req.matches[1].str().substr(0, 200), "'; this server serves '",
             model_name_, "'");
    reply_json(res, ready_ && !draining_ ? 200 : 503,
               {{"name", model_name_}, {"ready", ready_ && !draining_}});
  });
  route("GET", "/metrics", "/metrics", [this](auto&, auto& res) { handle_metrics(res); });
}

Server::~Server() { shutdown(); }

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
  if (std::strcmp(method, "GET") == 0)
    http_->Get(pattern, wrapped);
  else
    http_->Post(pattern, wrapped);
}

int Server::bind() {
  // A client that closes its socket early must not kill the server with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  if (options_.warm_up) warm_up();
  ready_ = true;
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) fail("cannot listen on ", options_.host, " (any port): bad address?");
  } else if (!http_->bind_to_port(options_.host, port)) {
    fail("cannot listen on ", options_.host, ":", port, " (in use, or not an address of this machine?)");
  }
  static_cast<HttpServer&>(*http_).widen_backlog(1024);
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

void Server::run_job(const std::shared_ptr<Job>& job) {
  switch (batcher_->submit(job)) {
    case Batcher::Submit::closed:
      refused_++;
      refuse(503, "the server is shutting down");
    case Batcher::Submit::full:
      refused_++;
      refuse(503, "the queue is full (", options_.max_queue, " requests waiting); retry later");
    case Batcher::Submit::queued:
      break;
  }
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
  auto job = std::make_shared<PipelineJob>();
  job->request = pipeline_->parse(body);
  // Decode, resize, normalize and tokenize here, on the HTTP thread: the worker only runs the model.
  pipeline_->preprocess(*job->request, {options_.max_prompt_bytes, options_.max_image_pixels});
  job->key = job->request->batch_key;

  run_job(job);
  // Postprocessing (for grounding a sigmoid per query and token) also runs here, in parallel
  // with the worker's next batch.
  pipeline_->postprocess(*job->request);
  completed_++;
  json reply = pipeline_->response(*job->request);
  reply["timing"] = {{"queue_ms", ms_between(job->enqueued, job->started)},
                     {"inference_ms", ms_between(job->started, job->finished)},
                     {"total_ms", ms_between(t0, Clock::now())}};
  reply["batch_size"] = job->batch_size;
  reply_json(res, 200, reply);
}

void Server::handle_infer(const httplib::Request& req, httplib::Response& res) {
  if (req.matches[1] != model_name_)
    refuse(404, "unknown model '", req.matches[1].str().substr(0, 200), "'; this server serves '",
           model_name_, "'");
  if (draining_) refuse(503, "the server is shutting down");
  Session& session = pipeline_->session();
  InferRequest r = parse_infer_request(req.body, session.model());
  try {
    session.check_inputs(r.inputs);  // reads only the model's declaration: safe off the worker
  } catch (const Error& e) {
    refuse(400, e.what());
  }
  auto job = std::make_shared<InferJob>();
  job->inputs = std::move(r.inputs);
  run_job(job);
  completed_++;
  std::vector<std::string> names = r.outputs;
  if (names.empty())
    for (auto& d : session.model().graph.outputs) names.push_back(d.name);
  reply_json(res, 200, infer_response(model_name_, r.id, job->outputs, names));
}

void Server::handle_metrics(httplib::Response& res) {
  metrics_.set("process_resident_memory_bytes", {}, double(resident_bytes()));
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
  if (dynamic_cast<PipelineJob*>(batch[0].get())) {
    run_pipeline_batch(batch);
  } else {
    auto& job = static_cast<InferJob&>(*batch[0]);
    Session& session = pipeline_->session();
    auto sig = signature_of(job.inputs);
    try {
      session.plan(sig);
    } catch (const Error& e) {
      job.status = 400;  // shapes the model cannot take: the client's inputs
      job.error = cat("the model cannot run on these inputs: ", e.what());
    }
    if (job.status == 200) {
      try {
        job.outputs = session.run(job.inputs);
        record_memory(sig);
      } catch (const Error& e) {
        job.status = 500;
        job.error = cat("inference failed: ", e.what());
      }
    }
    job.inputs.clear();
  }
  // Recorded before the jobs finish, so a client that scrapes right after its response
  // sees its batch counted.
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.observe("vlrt_inference_duration_seconds", {}, seconds);
  metrics_.observe("vlrt_batch_size", {}, double(batch.size()));
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
    for (auto& j : batch) {
      j->status = 500;
      j->error = cat("inference failed: ", e.what());
    }
  }
}

void Server::record_memory(const Signature& signature) {
  Session& session = pipeline_->session();
  const Plan& plan = session.plan(signature);  // cached: the plan of the run just done
  for (auto& dp : plan.devices) {
    Labels dev = {{"device", dp.device.str()}};
    metrics_.set("vlrt_memory_planned_bytes", dev, double(dp.total_bytes()));
    metrics_.set("vlrt_memory_in_use_bytes", dev,
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

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
#include "text/unicode.h"

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
std::string endpoint_of(const std::string& path) {
  static const std::vector<std::pair<std::string, std::string>> exact = {
      {"/v1/detect", "/v1/detect"},
      {"/v2/health/live", "/v2/health/live"},
      {"/v2/health/ready", "/v2/health/ready"},
      {"/v2", "/v2"},
      {"/metrics", "/metrics"}};
  for (auto& [p, e] : exact)
    if (path == p) return e;
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

struct Server::DetectJob : Job {
  grounding::EncodedCaption caption;
  grounding::DetectOptions options;  // the server's, with the request's thresholds
  Tensor pixels;                     // float32 [1,3,h,w], normalized
  int width = 0, height = 0;         // the original image
  int input_width = 0, input_height = 0;
  Tensor logits, boxes;  // the whole batch's outputs (shared); this request's row
  int64_t row = 0;
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

Server::Server(std::unique_ptr<grounding::Detector> detector, ServeOptions options, double load_seconds)
    : detector_(std::move(detector)), options_(std::move(options)) {
  const Model& model = detector_->session().model();
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
      metrics_.add("vlrt_requests_total",
                   {{"endpoint", endpoint_of(req.path)}, {"status", std::to_string(res.status)}});
    t_counted = false;
  });
  // Responses httplib makes itself (404, 413, unparsable requests) get a JSON body too.
  http->set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg;
    if (res.status == 404)
      msg = cat("no route for ", req.method, " ", req.path.substr(0, 200),
                "; endpoints: POST /v1/detect, GET /v2/health/live, GET /v2/health/ready, GET /v2/models/",
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

  route("POST", "/v1/detect", "/v1/detect", [this](auto& req, auto& res) { handle_detect(req, res); });
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
    reply_json(res, 200, model_metadata(model_name_, detector_->session().model()));
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

void Server::handle_detect(const httplib::Request& req, httplib::Response& res) {
  Clock::time_point t0 = Clock::now();
  if (draining_) refuse(503, "the server is shutting down");
  DetectRequest r = parse_detect_request(req);

  auto job = std::make_shared<DetectJob>();
  size_t bad = text::invalid_utf8_at(r.prompt);
  if (bad != std::string::npos) refuse(400, "'prompt' is not valid UTF-8 (byte ", bad, ")");
  if (r.prompt.find_first_not_of(" \t\r\n") == std::string::npos)
    refuse(400, "'prompt' is empty; give phrases separated by ' . ', e.g. \"person . bicycle .\"");
  if (r.prompt.size() > options_.max_prompt_bytes)
    refuse(400, "'prompt' is ", r.prompt.size(), " bytes; the limit is ", options_.max_prompt_bytes,
           " (a GroundingDINO caption holds at most ", detector_->options().max_text_length, " tokens)");
  try {
    job->caption = detector_->encode(r.prompt);
  } catch (const Error& e) {
    refuse(400, "'prompt': ", e.what());
  }
  vision::Image img;
  try {
    img = vision::decode_image(r.image, "image", options_.max_image_pixels);
  } catch (const Error& e) {
    refuse(400, e.what());
  }
  // Resize and normalize here, on the HTTP thread: the worker only runs the model.
  job->options = detector_->options();
  if (r.box_threshold) job->options.box_threshold = *r.box_threshold;
  if (r.text_threshold) job->options.text_threshold = *r.text_threshold;
  auto [w, h] = vision::target_size(img.width, img.height, job->options.resize);
  job->width = img.width;
  job->height = img.height;
  job->input_width = w;
  job->input_height = h;
  if (img.width != w || img.height != h) img = vision::resize_bilinear(img, w, h);
  job->pixels = vision::normalize_images({&img});
  img = {};
  job->key = cat(w, "x", h, "|", job->caption.caption);

  run_job(job);
  // Postprocessing (a sigmoid per query and token) also runs here, in parallel with the
  // worker's next batch.
  int64_t q = job->logits.dim(1), t = job->logits.dim(2);
  auto detections = grounding::postprocess(job->logits.data<float>() + job->row * q * t,
                                           job->boxes.data<float>() + job->row * q * 4, q, t, job->caption,
                                           job->width, job->height, job->options);
  job->logits = job->boxes = Tensor();
  completed_++;
  auto round_to = [](double v, double scale) { return std::round(v * scale) / scale; };  // shorter JSON
  json dets = json::array();
  for (auto& d : detections)
    dets.push_back(
        {{"label", d.label},
         {"score", round_to(d.score, 1e5)},
         {"box", {round_to(d.x1, 100), round_to(d.y1, 100), round_to(d.x2, 100), round_to(d.y2, 100)}}});
  Clock::time_point t1 = Clock::now();
  json body = {{"detections", dets},
               {"timing",
                {{"queue_ms", ms_between(job->enqueued, job->started)},
                 {"inference_ms", ms_between(job->started, job->finished)},
                 {"total_ms", ms_between(t0, t1)}}},
               {"batch_size", job->batch_size},
               {"prompt", job->caption.caption},
               {"image", {{"width", job->width}, {"height", job->height}}},
               {"model_input", {{"width", w}, {"height", h}}}};
  if (!job->caption.warning.empty()) body["warning"] = job->caption.warning;
  reply_json(res, 200, body);
}

void Server::handle_infer(const httplib::Request& req, httplib::Response& res) {
  if (req.matches[1] != model_name_)
    refuse(404, "unknown model '", req.matches[1].str().substr(0, 200), "'; this server serves '",
           model_name_, "'");
  if (draining_) refuse(503, "the server is shutting down");
  Session& session = detector_->session();
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
  auto* d = dynamic_cast<const DetectJob*>(&job);
  if (!d) return 1;
  std::string key = cat(d->input_width, "x", d->input_height, "/", d->caption.input_ids.size());
  auto it = batch_limits_.find(key);
  if (it == batch_limits_.end()) {
    if (batch_limits_.size() > 4096) batch_limits_.clear();
    it = batch_limits_.emplace(key, detector_->max_batch(d->input_width, d->input_height, d->caption)).first;
  }
  return options_.max_batch > 0 ? std::min(options_.max_batch, it->second) : it->second;
}

void Server::run_batch(const std::vector<std::shared_ptr<Job>>& batch) {
  Clock::time_point start = Clock::now();
  if (dynamic_cast<DetectJob*>(batch[0].get())) {
    run_detect_batch(batch);
  } else {
    auto& job = static_cast<InferJob&>(*batch[0]);
    Session& session = detector_->session();
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

// Detector::detect's model run for images already resized and normalized by the HTTP
// threads; they postprocess each row with the request's own thresholds. Sets each job's
// result or error; run_batch finishes them.
void Server::run_detect_batch(const std::vector<std::shared_ptr<Job>>& batch) {
  auto& first = static_cast<DetectJob&>(*batch[0]);
  int64_t n = int64_t(batch.size());
  int w = first.input_width, h = first.input_height;
  try {
    grounding::TextInputs text = grounding::make_text_inputs(detector_->tokenizer(), {first.caption});
    Tensor img(DType::f32, {n, 3, h, w});
    for (int64_t i = 0; i < n; i++) {
      auto& job = static_cast<DetectJob&>(*batch[size_t(i)]);
      std::memcpy(static_cast<char*>(img.raw()) + size_t(i) * job.pixels.nbytes(), job.pixels.raw(),
                  job.pixels.nbytes());
    }
    TensorMap out = detector_->session().run(grounding::grounding_inputs(std::move(img), text));
    const Tensor& logits = out.at("logits");
    const Tensor& boxes = out.at("boxes");
    VLRT_CHECK(logits.rank() == 3 && logits.dim(0) == n && boxes.rank() == 3 && boxes.dim(0) == n &&
                   boxes.dim(2) == 4 && boxes.dim(1) == logits.dim(1),
               "model outputs logits ", logits.describe(), " and boxes ", boxes.describe(),
               "; expected [B,Q,T] and [B,Q,4]");
    for (int64_t i = 0; i < n; i++) {
      auto& job = static_cast<DetectJob&>(*batch[size_t(i)]);
      job.logits = logits;
      job.boxes = boxes;
      job.row = i;
    }
    record_memory(grounding::grounding_signature(n, w, h, int64_t(first.caption.input_ids.size())));
  } catch (const Error& e) {
    for (auto& j : batch) {
      j->status = 500;
      j->error = cat("inference failed: ", e.what());
    }
  }
  for (auto& j : batch) static_cast<DetectJob&>(*j).pixels = Tensor();
}

void Server::record_memory(const std::map<std::string, std::pair<DType, Shape>>& signature) {
  Session& session = detector_->session();
  const Plan& plan = session.plan(signature);  // cached: the plan of the run just done
  for (auto& dp : plan.devices) {
    Labels dev = {{"device", dp.device.str()}};
    metrics_.set("vlrt_memory_planned_bytes", dev, double(dp.weight_bytes + dp.peak_activation_bytes));
    metrics_.set("vlrt_memory_in_use_bytes", dev,
                 double(dp.weight_bytes + session.executor().arena_high_water(dp.device)));
    size_t budget = dp.cap ? dp.cap : session.executor().backend(dp.device).memory_capacity();
    metrics_.set("vlrt_memory_budget_bytes", dev, double(budget));
  }
}

void Server::warm_up() {
  // A mid-gray 640x480 image and a one-word prompt: the first plan, the batch limit for
  // this size and the memory gauges exist before the first request, and a model that
  // cannot run fails here rather than on a client.
  auto job = std::make_shared<DetectJob>();
  try {
    job->caption = detector_->encode("object .");
    job->options = detector_->options();
    vision::Image img{640, 480, std::vector<uint8_t>(640 * 480 * 3, 128)};
    auto [w, h] = vision::target_size(img.width, img.height, job->options.resize);
    vision::Image resized = vision::resize_bilinear(img, w, h);
    job->width = img.width;
    job->height = img.height;
    job->input_width = w;
    job->input_height = h;
    job->pixels = vision::normalize_images({&resized});
    job->key = "warm-up";
    batch_limit(*job);
    run_detect_batch({job});
  } catch (const Error& e) {
    fail("warm-up detection failed: ", e.what());
  }
  if (job->status != 200) fail("warm-up detection failed: ", job->error);
}

}  // namespace vlrt::serve

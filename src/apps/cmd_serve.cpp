// vlrt serve: a pipeline (by default GroundingDINO-contract detection) behind HTTP with dynamic
// batching, KServe v2 / Triton (binary data, BYTES, statistics, model repository) and Prometheus
// metrics. SIGTERM or SIGINT drains and exits 0.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "apps/pipeline_options.h"
#include "pipelines/vlm/chat.h"
#include "serve/loadtest.h"
#include "serve/server.h"

namespace vlrt {

namespace {

struct ServeArgs {
  PipelineArgs p;
  serve::ServeOptions o;
  std::string max_body = "32MiB";
  bool no_labelling = false;
  std::string model_dir;  // positional: a model file or a VLM folder (as --model)
  int64_t context = 0;    // VLM folders: the KV cache's tokens
  std::string vision_devices, text_devices;  // VLM folders: "" is --devices
  std::string api_key, api_key_file;         // resolved into o.api_key with VLRT_API_KEY
};

std::unique_ptr<serve::Server> make_chat_server(ServeArgs& a, double& load_s) {
  auto t0 = std::chrono::steady_clock::now();
  DeviceArgs vision{a.vision_devices.empty() ? a.p.device_args.devices : a.vision_devices, {}};
  DeviceArgs text{a.text_devices.empty() ? a.p.device_args.devices : a.text_devices, a.p.device_args.memory};
  auto chat = std::make_unique<vlm::Chat>(
      a.p.model, chat_options(vision, text, a.p.threads, a.context, !a.p.no_verify_hash));
  load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::make_unique<serve::Server>(std::move(chat), a.p.model, a.o, load_s);
}

// The signal handler only writes the signal's number to a pipe; a thread reads it and
// drains. (Blocking the signals and sigwait() is not enough: OpenBLAS starts its threads
// before main, with the signals unblocked.)
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  char c = char(sig);
  ssize_t n = write(g_stop_pipe[1], &c, 1);
  (void)n;
}

void serve_main(ServeArgs& a) {
  if (pipe(g_stop_pipe) != 0) fail("cannot create a pipe for signal handling");
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  // Images and batch outputs of changing sizes, freed on other threads than the ones that
  // allocated them, fragment glibc's per-thread arenas: RSS crept up by a third over 10k
  // requests. Buffers from 256 KiB up are mmapped and returned on free instead.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);

  // The key and the exposure are checked before the model loads, so a refusal is quick.
  std::string warnings;
  a.o.api_key = serve::resolve_api_key(a.api_key, a.api_key_file, std::getenv("VLRT_API_KEY"), &warnings);
  serve::check_security_options(a.o);
  if (a.o.insecure && a.o.api_key.empty() && !serve::is_loopback_host(a.o.host))
    warnings += cat("warning: --insecure: anyone who can reach ", a.o.host, " may use this server without a key\n");
  std::fputs(warnings.c_str(), stderr);

  a.o.max_body_bytes = parse_bytes(a.max_body);
  a.o.labelling.enabled = !a.no_labelling;
  if (!a.model_dir.empty()) {
    if (!a.p.model.empty() && a.p.model != a.model_dir)
      fail("the model is given twice: '", a.model_dir, "' and --model '", a.p.model, "'; give one");
    a.p.model = a.model_dir;
  }
  a.o.repository_session = session_options(a.p);
  double load_s = 0;
  std::string path;
  std::unique_ptr<serve::Server> served;
  bool chat = !a.p.model.empty() && vlm::is_model_folder(a.p.model);
  if (chat) {
    path = a.p.model;
    served = make_chat_server(a, load_s);
  } else {
    auto t0 = std::chrono::steady_clock::now();
    auto pipeline = make_pipeline(a.p);
    load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    path = pipeline->session().model().path;
    served = std::make_unique<serve::Server>(std::move(pipeline), a.o, load_s);
  }
  serve::Server& server = *served;
  int port = server.bind();
  std::printf("vlrt serve: model '%s' (%s, loaded in %.2f s) on %s://%s:%d%s\n", server.model_name().c_str(),
              path.c_str(), load_s, server.scheme(), a.o.host.c_str(), port,
              a.o.api_key.empty() ? "" : " (API key required but on /v2/health/{live,ready}, /health)");
  if (chat)
    std::printf(
        "  OpenAI chat API: POST /v1/chat/completions (one generation at a time, requests in arrival order), "
        "GET /v1/models; GET /v2/health/{live,ready}, /metrics\n");
  else
    std::printf(
        "  POST %s, /v2/models/%s/infer; GET /v2/health/{live,ready}, /v2/models/%s[/config|/stats], "
        "/metrics\n",
        server.endpoint().c_str(), server.model_name().c_str(), server.model_name().c_str());
  if (a.o.labelling.enabled && !chat)
    std::printf(
        "  labelling tools: Label Studio ML backend at this URL (/health, /setup, /predict), "
        "X-AnyLabeling remote server (/v1/models, /v1/predict)\n");
  for (auto& m : server.repository_models())
    std::printf("  repository model '%s': %s\n", m.first.c_str(), m.second.c_str());
  std::fflush(stdout);

  std::thread waiter([&] {
    char sig = 0;
    while (read(g_stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return server.shutdown();  // listen() returned by itself
    std::printf("vlrt serve: %s: refusing new requests, draining the queue\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stdout);
    server.shutdown();
  });
  server.listen();
  char zero = 0;
  ssize_t n = write(g_stop_pipe[1], &zero, 1);  // listen() also returns when the listener fails
  (void)n;
  waiter.join();
  serve::ServeStats s = server.stats();
  std::printf(
      "vlrt serve: stopped; %llu requests accepted, %llu completed, %llu timed out, %llu failed, %llu "
      "refused\n",
      (unsigned long long)s.accepted, (unsigned long long)s.completed, (unsigned long long)s.timed_out,
      (unsigned long long)s.failed, (unsigned long long)s.refused);
  std::fflush(stdout);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  static ServeArgs a;
  auto* cmd = app.add_subcommand("serve",
                                 "Serve a GroundingDINO-contract model over HTTP: /v1/detect, KServe v2 / "
                                 "Triton, /metrics, dynamic batching");
  cmd->footer(
      "KServe v2 / Triton: POST /v2/models/NAME/infer takes the model's own tensors (JSON, or Triton's\n"
      "binary data extension); for the pipeline's model also the BYTES inputs 'image' (the encoded image\n"
      "file, shape [1]) and 'prompt' (shape [1]), box_threshold/text_threshold as request parameters,\n"
      "answered with 'boxes' (FP32 [N,4], x1 y1 x2 y2 in image pixels), 'scores' (FP32 [N]) and 'labels'\n"
      "(BYTES [N]). GET /v2/models/NAME/{config,stats}, /v2/models/stats. With --model-repository DIR\n"
      "(DIR/NAME/1/model.onnx): POST /v2/repository/index, /v2/repository/models/NAME/{load,unload}.\n"
      "/metrics has vlrt_* and Triton's nv_inference_* series.\n"
      "Labelling tools (on unless --no-labelling): Label Studio connects this server as its ML backend\n"
      "(GET /health, POST /setup with the project's label config, POST /predict with tasks, answered\n"
      "with rectanglelabels in percent); the prompt is --ls-prompt, else the RectangleLabels' label\n"
      "values. A task's image is a data URI, a file under --ls-root (a path, /data/upload/..., or\n"
      "/data/local-files/?d=...), or downloaded from --ls-url with --ls-api-key. X-AnyLabeling's remote\n"
      "server model: GET /v1/models, POST /v1/predict (text_prompt, conf_threshold = box threshold).");
  add_pipeline_options(cmd, a.p);
  cmd->add_option("model_dir", a.model_dir,
                  "the model (as --model); a Qwen2-VL / Qwen2.5-VL folder is served as OpenAI's chat API "
                  "(POST /v1/chat/completions, GET /v1/models)");
  cmd->add_option("--context", a.context,
                  "VLM folders: tokens a turn may hold, prompt and answer (the KV cache's size, planned at load; "
                  "default: the model's max_position_embeddings, at most 4096)");
  cmd->add_option("--vision-devices", a.vision_devices, "VLM folders: devices of the vision encoder (default: --devices)");
  cmd->add_option("--text-devices", a.text_devices,
                  "VLM folders: devices of the embedding and the decoder with its KV cache (default: --devices; "
                  "--memory caps them)");
  cmd->add_option("--host", a.o.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a.o.port, "port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* key = cmd->add_option("--api-key", a.api_key,
                              "require this key on every route but health (GET /v2/health/{live,ready}, /health), "
                              "as 'Authorization: Bearer KEY' or 'Token: KEY'; other users may see it in the process "
                              "list: prefer --api-key-file or VLRT_API_KEY (used when neither option is given)");
  cmd->add_option("--api-key-file", a.api_key_file, "read the API key from the first line of this file")
      ->excludes(key);
  cmd->add_flag("--insecure", a.o.insecure, "allow a --host other than loopback without an API key");
  cmd->add_option("--tls-cert", a.o.tls_cert, "serve HTTPS with this PEM certificate (chain) and --tls-key");
  cmd->add_option("--tls-key", a.o.tls_key, "the PEM private key of --tls-cert");
  cmd->add_option("--model-name", a.o.model_name, "name in the /v2 URLs (default: the model file's name)");
  cmd->add_option(
      "--model-repository", a.o.model_repository,
      "a Triton-layout folder (DIR/NAME/1/model.onnx, optional DIR/NAME/config.pbtxt): each model is "
      "loaded at start and served as tensors at /v2/models/NAME");
  cmd->add_option("--max-batch", a.o.max_batch,
                  "cap on requests per model run (default: the largest batch the memory plan fits)")
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->add_option("--max-queue-delay-ms", a.o.max_queue_delay_ms,
                  "how long the oldest request waits for others to fill its batch")
      ->check(CLI::Range(0.0, 10000.0))
      ->capture_default_str();
  cmd->add_option(
         "--max-queue", a.o.max_queue,
         "requests waiting at most (each holds its preprocessed image); more are answered 503 at once")
      ->check(CLI::Range(size_t(1), size_t(4096)))
      ->capture_default_str();
  cmd->add_option("--timeout-ms", a.o.timeout_ms, "a request without a result after this is answered 504")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", a.max_body, "larger request bodies are answered 413 (e.g. 32MiB)")
      ->capture_default_str();
  cmd->add_option("--max-prompt-bytes", a.o.max_prompt_bytes, "longer prompts are answered 400")
      ->check(CLI::Range(size_t(1), size_t(1) << 20))
      ->capture_default_str();
  cmd->add_option("--http-threads", a.o.http_threads,
                  "threads kept for connections, each serves one at a time; more start as connections open "
                  "(default: --max-queue + 64)");
  cmd->add_option("--read-timeout-s", a.o.read_timeout_s,
                  "a request's headers must arrive within this, and its body not pause longer; else 408 and "
                  "the connection is closed")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--max-connections", a.o.max_connections,
                  "connections open at once; more are answered 503 and closed (the open-files limit is raised "
                  "to its hard limit)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--no-labelling", a.no_labelling,
                "leave out the labelling tools' routes (Label Studio, X-AnyLabeling)");
  cmd->add_option(
         "--ls-prompt", a.o.labelling.prompt,
         "the labelling tools' prompt when a request has none (Label Studio: instead of its label values)")
      ->envname("VLRT_LS_PROMPT");
  cmd->add_option("--ls-root", a.o.labelling.ls_root,
                  "the folder Label Studio tasks may name files in: its media folder for /data/upload/... "
                  "(without it, tasks must carry their image as a data URI or a URL)")
      ->envname("VLRT_LS_ROOT");
  cmd->add_option("--ls-url", a.o.labelling.ls_url,
                  "Label Studio's address, to download task images it serves (/data/...) and http(s) URLs")
      ->envname("LABEL_STUDIO_URL");
  cmd->add_option("--ls-api-key", a.o.labelling.ls_api_key, "Label Studio's access token for those downloads")
      ->envname("LABEL_STUDIO_API_KEY");
  cmd->callback([] { serve_main(a); });
}

}  // namespace vlrt

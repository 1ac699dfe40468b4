// vlrt loadtest: N concurrent clients x M /v1/detect requests against a loopback `vlrt serve`;
// throughput, latency percentiles and the count of each status.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "apps/commands.h"
#include "serve/loadtest.h"
#include "vision/image.h"

namespace vlrt {

namespace {

struct LoadtestArgs {
  serve::LoadOptions o;
  std::string image_path;
  bool json = false;
  bool compare_batching = false;
  std::string model;  // for the servers --compare-batching starts
};

// A `vlrt serve` child process on a free loopback port; SIGTERM (drain) when done.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> args) {
    // Everything the child needs is built before fork: it only calls async-signal-safe functions.
    std::string self = "/proc/self/exe";
    std::vector<char*> argv = {self.data()};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) fail("cannot create a pipe for the server's output");
    pid_ = fork();
    if (pid_ < 0) fail("cannot start a server process");
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      execv(self.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
    static const std::regex listening(R"(on http://127\.0\.0\.1:(\d+))");
    char line[4096];
    std::string seen;
    while (std::fgets(line, sizeof line, out_)) {
      seen += line;
      std::cmatch m;
      if (std::regex_search(line, m, listening)) {
        port_ = std::stoi(m[1].str());
        // Keep reading what it prints, so that it never blocks on a full pipe.
        drain_ = std::thread([f = out_] {
          char rest[4096];
          while (std::fgets(rest, sizeof rest, f)) {
          }
        });
        return;
      }
    }
    stop();
    fail("the server did not start:\n", seen);
  }
  ~ServerProcess() { stop(); }
  int port() const { return port_; }
  // SIGTERM: the server finishes what it accepted and exits.
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();  // EOF once the server has exited
    if (out_) fclose(out_);
    out_ = nullptr;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::thread drain_;
  int port_ = 0;
};

nlohmann::json report_json(const serve::LoadReport& r) {
  nlohmann::json j = {{"sent", r.sent},
                      {"seconds", r.seconds},
                      {"throughput_per_s", r.throughput()},
                      {"p50_ms", r.percentile(50)},
                      {"p90_ms", r.percentile(90)},
                      {"p99_ms", r.percentile(99)},
                      {"ok_per_s", r.ok_throughput()},
                      {"p50_ok_ms", r.ok_percentile(50)},
                      {"p99_ok_ms", r.ok_percentile(99)},
                      {"no_response", r.failed},
                      {"mean_batch_size", r.mean_batch_size},
                      {"server_rss_before", r.rss_before},
                      {"server_rss_after", r.rss_after},
                      {"retry_after_503s", r.retry_after}};
  auto statuses = [](const std::map<int, int64_t>& counts) {
    nlohmann::json s = nlohmann::json::object();
    for (auto& [status, n] : counts) s[std::to_string(status)] = n;
    return s;
  };
  j["statuses"] = statuses(r.statuses);
  if (r.windows.empty()) return j;
  j["windows"] = nlohmann::json::array();
  for (const serve::LoadWindow& w : r.windows)
    j["windows"].push_back({{"start_s", w.start_s}, {"end_s", w.end_s}, {"responses", w.responses},
                            {"no_response", w.failed}, {"statuses", statuses(w.statuses)},
                            {"retry_after_503s", w.retry_after}, {"p50_ms", w.p50_ms}, {"p99_ms", w.p99_ms},
                            {"server_rss", w.server_rss}});
  serve::SoakDrift d = serve::soak_drift(r);
  if (d.first) j["drift"] = {{"p99_change", d.p99_change}, {"rss_growth", d.rss_growth}};
  return j;
}

// The same load on a server with dynamic batching and on one with --max-batch 1, one after
// the other on this machine; prints both and the throughput ratio.
void compare_batching(LoadtestArgs& a) {
  std::vector<std::pair<std::string, std::vector<std::string>>> configs = {
      {"batching", {}}, {"max-batch 1", {"--max-batch", "1"}}};
  nlohmann::json all = nlohmann::json::object();
  std::vector<double> throughput;
  for (auto& [name, extra] : configs) {
    std::vector<std::string> args = {"serve", "--port", "0"};
    if (!a.model.empty()) args.insert(args.end(), {"--model", a.model});
    args.insert(args.end(), extra.begin(), extra.end());
    ServerProcess server(args);
    a.o.url = cat("http://127.0.0.1:", server.port());
    serve::LoadReport r = serve::run_load(a.o);
    server.stop();
    throughput.push_back(r.throughput());
    if (a.json) {
      all[name] = report_json(r);
    } else {
      std::printf("%s: %d clients x %d requests\n%s\n", name.c_str(), a.o.clients, a.o.requests,
                  serve::format_report(r).c_str());
    }
  }
  double ratio = throughput[1] > 0 ? throughput[0] / throughput[1] : 0;
  if (a.json) {
    all["throughput_ratio"] = ratio;
    std::cout << all.dump(2) << "\n";
  } else {
    std::printf("throughput with batching / with --max-batch 1: %.2fx\n", ratio);
  }
}

// A 640x480 gradient when no image is given, so the tool needs no files.
std::string synthetic_image() {
  vision::Image img{640, 480, std::vector<uint8_t>(640 * 480 * 3)};
  for (int y = 0; y < img.height; y++)
    for (int x = 0; x < img.width; x++) {
      uint8_t* p = &img.rgb[(size_t(y) * img.width + x) * 3];
      p[0] = uint8_t(x * 255 / img.width);
      p[1] = uint8_t(y * 255 / img.height);
      p[2] = uint8_t((x ^ y) & 255);
    }
  return vision::encode_png(img);
}

void loadtest(LoadtestArgs& a) {
  if (a.image_path.empty()) {
    a.o.image = synthetic_image();
  } else {
    std::ifstream f(a.image_path, std::ios::binary);
    if (!f) fail(a.image_path, ": cannot open");
    std::ostringstream ss;
    ss << f.rdbuf();
    a.o.image = ss.str();
  }
  if (a.compare_batching) return compare_batching(a);
  if (a.o.duration > 0 && a.o.window == 0) a.o.window = 60;
  a.o.progress = a.o.window > 0 && !a.json;
  if (!a.json && a.o.duration > 0)
    std::fprintf(stderr, "soak: %d clients for %.0f s against %s%s\n", a.o.clients, a.o.duration, a.o.url.c_str(),
                 a.o.rate > 0 ? cat(" at ", a.o.rate, " requests/s").c_str() : "");
  serve::LoadReport r = serve::run_load(a.o);
  if (!a.json) {
    std::string what = a.o.duration > 0 ? cat(a.o.duration, " s") : cat(a.o.requests, " requests");
    std::printf("%d clients x %s -> %s\n%s", a.o.clients, what.c_str(), a.o.url.c_str(),
                serve::format_report(r).c_str());
    return;
  }
  nlohmann::json j = report_json(r);
  j["clients"] = a.o.clients;
  j["requests_per_client"] = a.o.requests;
  std::cout << j.dump(2) << "\n";
}

}  // namespace

void add_loadtest_command(CLI::App& app) {
  static LoadtestArgs a;
  auto* cmd =
      app.add_subcommand("loadtest", "Load-test a loopback `vlrt serve`: throughput, p50/p99, statuses");
  cmd->add_option("--url", a.o.url, "server (loopback only)")->capture_default_str();
  cmd->add_option("--image", a.image_path, "image to send (default: a generated 640x480 PNG)");
  cmd->add_option("-p,--prompt", a.o.prompt, "prompt to send")->capture_default_str();
  cmd->add_option("-c,--clients", a.o.clients, "concurrent clients")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("-n,--requests", a.o.requests, "requests per client")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--max-seconds", a.o.max_seconds, "stop sending after this long")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--duration", a.o.duration,
                  "a soak: every client sends until this many seconds have passed (--requests and --max-seconds "
                  "are then no limit)")
      ->check(CLI::Range(1.0, 7.0 * 86400));
  cmd->add_option("--rate", a.o.rate,
                  "requests per second over all clients, each on its own schedule (default: each client sends "
                  "when answered); above what the server sustains, the excess gets 503 with Retry-After")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--window", a.o.window,
                  "report each window of this many seconds (latency, statuses, the server's RSS) and the drift "
                  "from the first to the last (default with --duration: 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->add_flag(
      "--compare-batching", a.compare_batching,
      "start `vlrt serve` twice on a free port, with dynamic batching and with --max-batch 1, send each "
      "the same load and print the throughput ratio (--url is then ignored)");
  cmd->add_option("-m,--model", a.model,
                  "with --compare-batching: the model the servers load (default: theirs)");
  cmd->callback([] { loadtest(a); });
}

}  // namespace vlrt

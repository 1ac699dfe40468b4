// vlrt loadtest: N concurrent clients x M /v1/detect requests against a loopback `vlrt serve`;
// throughput, latency percentiles and the count of each status.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.h"
#include "pipelines/grounding/image.h"
#include "serve/loadtest.h"

namespace vlrt {

namespace {

struct LoadtestArgs {
  serve::LoadOptions o;
  std::string image_path;
  bool json = false;
};

// A 640x480 gradient when no image is given, so the tool needs no files.
std::string synthetic_image() {
  grounding::Image img{640, 480, std::vector<uint8_t>(640 * 480 * 3)};
  for (int y = 0; y < img.height; y++)
    for (int x = 0; x < img.width; x++) {
      uint8_t* p = &img.rgb[(size_t(y) * img.width + x) * 3];
      p[0] = uint8_t(x * 255 / img.width);
      p[1] = uint8_t(y * 255 / img.height);
      p[2] = uint8_t((x ^ y) & 255);
    }
  return grounding::encode_png(img);
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
  serve::LoadReport r = serve::run_load(a.o);
  if (!a.json) {
    std::printf("%d clients x %d requests -> %s\n%s", a.o.clients, a.o.requests, a.o.url.c_str(),
                serve::format_report(r).c_str());
    return;
  }
  nlohmann::json j = {{"clients", a.o.clients},
                      {"requests_per_client", a.o.requests},
                      {"sent", r.sent},
                      {"seconds", r.seconds},
                      {"throughput_per_s", r.throughput()},
                      {"p50_ms", r.percentile(50)},
                      {"p90_ms", r.percentile(90)},
                      {"p99_ms", r.percentile(99)},
                      {"no_response", r.failed},
                      {"mean_batch_size", r.mean_batch_size},
                      {"server_rss_before", r.rss_before},
                      {"server_rss_after", r.rss_after}};
  j["statuses"] = nlohmann::json::object();
  for (auto& [status, n] : r.statuses) j["statuses"][std::to_string(status)] = n;
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
  cmd->add_flag("--json", a.json, "print one JSON object");
  cmd->callback([] { loadtest(a); });
}

}  // namespace vlrt

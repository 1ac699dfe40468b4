#include "serve/loadtest.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "core/error.h"

namespace vlrt::serve {

namespace {

struct Url {
  std::string host;
  int port = 80;
};

Url parse_url(const std::string& url) {
  static const std::regex re(R"(^http://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-]+)(?::(\d{1,5}))?/?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    fail("--url '", url, "': expected http://HOST:PORT (plain HTTP, no path)");
  Url u;
  u.host = m[1].str();
  if (u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  if (m[2].matched) u.port = std::stoi(m[2].str());
  if (u.port <= 0 || u.port > 65535) fail("--url '", url, "': port out of range");
  return u;
}

double server_rss(httplib::Client& c) {
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return 0;
  const std::string key = "\nprocess_resident_memory_bytes ";
  size_t at = r->body.find(key);
  return at == std::string::npos ? 0 : std::atof(r->body.c_str() + at + key.size());
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

double LoadReport::percentile(double p) const {
  if (latencies_ms.empty()) return 0;
  size_t i = size_t(
      std::clamp(p / 100.0 * double(latencies_ms.size()) - 1, 0.0, double(latencies_ms.size() - 1)) + 0.5);
  return latencies_ms[std::min(i, latencies_ms.size() - 1)];
}

LoadReport run_load(const LoadOptions& o) {
  Url url = parse_url(o.url);
  if (!is_loopback_host(url.host))
    fail("--url ", o.url, ": the load test only targets loopback servers (127.0.0.1, ::1, localhost)");
  if (o.clients < 1 || o.clients > 1024) fail("--clients must be 1..1024");
  if (o.requests < 1 || o.requests > 100000) fail("--requests must be 1..100000");
  if (o.image.empty()) fail("no image to send");

  httplib::MultipartFormDataItems form = {{"image", o.image, "image", "application/octet-stream"},
                                          {"prompt", o.prompt, "", ""}};
  LoadReport report;
  {
    httplib::Client probe(url.host, url.port);
    probe.set_connection_timeout(2);
    report.rss_before = server_rss(probe);
  }
  std::mutex mu;
  double batch_sum = 0;
  int64_t ok = 0;
  auto t0 = std::chrono::steady_clock::now();
  auto deadline = t0 + std::chrono::duration<double>(o.max_seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; c++) {
    threads.emplace_back([&] {
      httplib::Client client(url.host, url.port);
      client.set_keep_alive(true);
      client.set_connection_timeout(5);
      client.set_read_timeout(std::max<time_t>(1, time_t(o.max_seconds)));
      for (int i = 0; i < o.requests && std::chrono::steady_clock::now() < deadline; i++) {
        auto s = std::chrono::steady_clock::now();
        auto r = client.Post("/v1/detect", form);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
        double batch = 0;
        if (r && r->status == 200) {
          auto j = nlohmann::json::parse(r->body, nullptr, false);
          if (j.is_object() && j.contains("batch_size") && j["batch_size"].is_number())
            batch = j["batch_size"].get<double>();
        }
        std::lock_guard<std::mutex> lk(mu);
        report.sent++;
        if (!r) {
          report.failed++;
          continue;
        }
        report.statuses[r->status]++;
        report.latencies_ms.push_back(ms);
        if (r->status == 200) {
          ok++;
          batch_sum += batch;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::sort(report.latencies_ms.begin(), report.latencies_ms.end());
  report.mean_batch_size = ok ? batch_sum / double(ok) : 0;
  httplib::Client probe(url.host, url.port);
  probe.set_connection_timeout(2);
  report.rss_after = server_rss(probe);
  return report;
}

std::string format_report(const LoadReport& r) {
  std::string s = cat(r.sent, " requests in ", r.seconds, " s: ", r.throughput(), " responses/s\n");
  s += cat("latency ms: p50 ", r.percentile(50), ", p90 ", r.percentile(90), ", p99 ", r.percentile(99),
           ", max ", r.latencies_ms.empty() ? 0 : r.latencies_ms.back(), "\n");
  s += "status:";
  for (auto& [status, n] : r.statuses) s += cat(" ", status, "=", n);
  s += cat(" no-response=", r.failed, "\n");
  s += cat("mean batch size (200s): ", r.mean_batch_size, "\n");
  if (r.rss_before > 0 && r.rss_after > 0)
    s += cat("server RSS: ", r.rss_before / 1048576, " MiB before, ", r.rss_after / 1048576, " MiB after\n");
  return s;
}

}  // namespace vlrt::serve

#include "serve/loadtest.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
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

// A percentile of sorted values (0 when there are none).
double percentile_of(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = size_t(std::clamp(p / 100.0 * double(sorted.size()) - 1, 0.0, double(sorted.size() - 1)) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// One request of a run: when it was sent (seconds from the start), its status (0: no response),
// latency and whether a 503 carried Retry-After.
struct Sample {
  double sent_s, ms;
  int status;
  bool retry_after;
};

// The samples by the window of [0, span_s) their request was sent in; rss: the server's memory
// sampled at each window's end (rss_end for those not sampled).
std::vector<LoadWindow> split_windows(const std::vector<Sample>& samples, double window, double span_s,
                                      const std::vector<double>& rss, double rss_end) {
  size_t n = std::max<size_t>(1, size_t(std::ceil(span_s / window)));
  std::vector<LoadWindow> out(n);
  std::vector<std::vector<double>> ok_ms(n);
  for (const Sample& s : samples) {
    size_t w = std::min(n - 1, size_t(s.sent_s / window));
    LoadWindow& lw = out[w];
    if (s.status == 0) {
      lw.failed++;
      continue;
    }
    lw.responses++;
    lw.statuses[s.status]++;
    lw.retry_after += s.retry_after;
    if (s.status == 200) ok_ms[w].push_back(s.ms);
  }
  for (size_t w = 0; w < n; w++) {
    out[w].start_s = double(w) * window;
    out[w].end_s = std::min(double(w + 1) * window, span_s);
    std::sort(ok_ms[w].begin(), ok_ms[w].end());
    out[w].p50_ms = percentile_of(ok_ms[w], 50);
    out[w].p99_ms = percentile_of(ok_ms[w], 99);
    out[w].server_rss = w < rss.size() ? rss[w] : rss_end;
  }
  return out;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

double LoadReport::percentile(double p) const { return percentile_of(latencies_ms, p); }
double LoadReport::ok_percentile(double p) const { return percentile_of(ok_latencies_ms, p); }

LoadReport run_load(const LoadOptions& o) {
  Url url = parse_url(o.url);
  if (!is_loopback_host(url.host))
    fail("--url ", o.url, ": the load test only targets loopback servers (127.0.0.1, ::1, localhost)");
  if (o.clients < 1 || o.clients > 1024) fail("--clients must be 1..1024");
  if (o.requests < 1 || o.requests > 100000) fail("--requests must be 1..100000");
  if (o.duration < 0 || o.rate < 0 || o.window < 0) fail("--duration, --rate and --window must not be negative");
  if (o.image.empty()) fail("no image to send");
  bool soak = o.duration > 0;

  httplib::MultipartFormDataItems form = {{"image", o.image, "image", "application/octet-stream"},
                                          {"prompt", o.prompt, "", ""}};
  LoadReport report;
  {
    httplib::Client probe(url.host, url.port);
    probe.set_connection_timeout(2);
    report.rss_before = server_rss(probe);
  }
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::mutex mu;
  double batch_sum = 0;
  int64_t ok = 0;
  std::vector<Sample> samples;
  auto t0 = Clock::now();
  auto deadline = t0 + std::chrono::duration<double>(soak ? o.duration : o.max_seconds);
  int64_t per_client = soak ? INT64_MAX : o.requests;
  // The window boundaries' server memory, sampled as they pass.
  std::vector<double> window_rss;
  std::atomic<bool> done{false};
  std::thread monitor;
  if (o.window > 0)
    monitor = std::thread([&] {
      httplib::Client probe(url.host, url.port);
      probe.set_connection_timeout(2);
      for (int w = 1; !done; w++) {
        auto at = t0 + std::chrono::duration<double>(o.window * w);
        while (!done && Clock::now() < at) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (done) break;
        double rss = server_rss(probe);
        std::lock_guard<std::mutex> lk(mu);
        window_rss.push_back(rss);
        if (o.progress)
          std::fprintf(stderr, "  %.0f s: %lld responses, %lld without one; server RSS %.1f MiB\n", o.window * w,
                       (long long)(report.sent - report.failed), (long long)report.failed, rss / 1048576);
      }
    });
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; c++) {
    threads.emplace_back([&, c] {
      httplib::Client client(url.host, url.port);
      client.set_keep_alive(true);
      client.set_connection_timeout(5);
      client.set_read_timeout(std::max<time_t>(1, time_t(soak ? 60 : o.max_seconds)));
      for (int64_t i = 0; i < per_client && Clock::now() < deadline; i++) {
        if (o.rate > 0) {  // this client's i-th request of the whole schedule
          auto due = t0 + std::chrono::duration<double>(double(i * o.clients + c) / o.rate);
          if (due >= deadline) break;
          std::this_thread::sleep_until(due);
        }
        auto s = Clock::now();
        auto r = client.Post("/v1/detect", form);
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
        double batch = 0;
        if (r && r->status == 200) {
          auto j = nlohmann::json::parse(r->body, nullptr, false);
          if (j.is_object() && j.contains("batch_size") && j["batch_size"].is_number())
            batch = j["batch_size"].get<double>();
        }
        bool retry_after = r && r->status == 503 && r->has_header("Retry-After");
        std::lock_guard<std::mutex> lk(mu);
        report.sent++;
        samples.push_back({std::chrono::duration<double>(s - t0).count(), ms, r ? r->status : 0, retry_after});
        if (!r) {
          report.failed++;
          continue;
        }
        report.statuses[r->status]++;
        report.retry_after += retry_after;
        report.latencies_ms.push_back(ms);
        if (r->status == 200) {
          report.ok_latencies_ms.push_back(ms);
          ok++;
          batch_sum += batch;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  if (monitor.joinable()) monitor.join();
  report.seconds = seconds_since(t0);
  std::sort(report.latencies_ms.begin(), report.latencies_ms.end());
  std::sort(report.ok_latencies_ms.begin(), report.ok_latencies_ms.end());
  report.mean_batch_size = ok ? batch_sum / double(ok) : 0;
  httplib::Client probe(url.host, url.port);
  probe.set_connection_timeout(2);
  report.rss_after = server_rss(probe);
  // A soak's requests are all sent within its duration; the last answers may come after it.
  double span = soak ? std::min(o.duration, report.seconds) : report.seconds;
  if (o.window > 0) report.windows = split_windows(samples, o.window, span, window_rss, report.rss_after);
  return report;
}

SoakDrift soak_drift(const LoadReport& r) {
  SoakDrift d;
  size_t n = r.windows.size();
  if (n >= 2 && r.windows[n - 1].end_s - r.windows[n - 1].start_s < 0.5 * (r.windows[0].end_s - r.windows[0].start_s))
    n--;
  if (n < 2) return d;
  d.first = &r.windows[0];
  d.last = &r.windows[n - 1];
  if (d.first->p99_ms > 0) d.p99_change = d.last->p99_ms / d.first->p99_ms - 1;
  if (d.first->server_rss > 0) d.rss_growth = d.last->server_rss / d.first->server_rss - 1;
  return d;
}

std::string format_report(const LoadReport& r) {
  std::string s = cat(r.sent, " requests in ", r.seconds, " s: ", r.throughput(), " responses/s\n");
  s += cat("latency ms: p50 ", r.percentile(50), ", p90 ", r.percentile(90), ", p99 ", r.percentile(99),
           ", max ", r.latencies_ms.empty() ? 0 : r.latencies_ms.back(), "\n");
  s += "status:";
  for (auto& [status, n] : r.statuses) s += cat(" ", status, "=", n);
  s += cat(" no-response=", r.failed);
  if (r.statuses.count(503)) s += cat(" (503s with Retry-After: ", r.retry_after, ")");
  s += "\n";
  if (r.ok_latencies_ms.size() != r.latencies_ms.size())
    s += cat("200s: ", r.ok_throughput(), "/s, latency ms p50 ",
             r.ok_percentile(50), ", p99 ", r.ok_percentile(99), "\n");
  s += cat("mean batch size (200s): ", r.mean_batch_size, "\n");
  if (r.rss_before > 0 && r.rss_after > 0)
    s += cat("server RSS: ", r.rss_before / 1048576, " MiB before, ", r.rss_after / 1048576, " MiB after\n");
  if (r.windows.empty()) return s;
  char line[160];
  s += "window (s)      responses  200s    503s  other  no-resp  p50 ms   p99 ms   server RSS MiB\n";
  for (const LoadWindow& w : r.windows) {
    int64_t ok = w.statuses.count(200) ? w.statuses.at(200) : 0, busy = w.statuses.count(503) ? w.statuses.at(503) : 0;
    std::snprintf(line, sizeof line, "%6.0f-%-6.0f  %9lld  %6lld  %6lld  %5lld  %7lld  %7.1f  %7.1f  %8.1f\n", w.start_s,
                  w.end_s, (long long)w.responses, (long long)ok, (long long)busy, (long long)(w.responses - ok - busy),
                  (long long)w.failed, w.p50_ms, w.p99_ms, w.server_rss / 1048576);
    s += line;
  }
  SoakDrift d = soak_drift(r);
  if (d.first)
    s += cat("drift, window ", d.first->start_s, "-", d.first->end_s, " s to ", d.last->start_s, "-", d.last->end_s,
             " s: p99 ", d.first->p99_ms, " -> ", d.last->p99_ms, " ms (", d.p99_change * 100, "%), server RSS ",
             d.first->server_rss / 1048576, " -> ", d.last->server_rss / 1048576, " MiB (", d.rss_growth * 100, "%)\n");
  return s;
}

}  // namespace vlrt::serve

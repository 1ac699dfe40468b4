// A bounded load generator for `vlrt serve`: N clients, each sending M /v1/detect requests
// (or as many as fit in a duration: a soak) on one keep-alive connection, as fast as they are
// answered or at a set total rate, stopping at a time limit; loopback servers only. A soak
// reports each window of time on its own (latency, statuses, the server's memory), so that
// drift shows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vlrt::serve {

struct LoadOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string image;  // encoded image bytes
  std::string prompt = "person . car .";
  int clients = 32;
  int requests = 20;  // per client
  double max_seconds = 60;
  // > 0: every client sends until this many seconds have passed (requests and max_seconds
  // are then not limits).
  double duration = 0;
  // > 0: requests per second over all clients, each client sending on its own schedule (a
  // client whose answer comes late sends at once); 0: each sends when answered.
  double rate = 0;
  double window = 0;  // > 0: a report per window of this many seconds
  bool progress = false;  // a line on stderr as each window ends
};

// One window of a run: what was answered in it (by the time the request was sent).
struct LoadWindow {
  double start_s = 0, end_s = 0;
  int64_t responses = 0, failed = 0;
  std::map<int, int64_t> statuses;
  int64_t retry_after = 0;  // 503s that carried Retry-After
  double p50_ms = 0, p99_ms = 0;  // of its 200 responses
  double server_rss = 0;          // at its end, 0 if unknown
};

struct LoadReport {
  int64_t sent = 0;
  std::map<int, int64_t> statuses;  // HTTP status -> count
  int64_t failed = 0;               // no response (connection refused, reset, timeout)
  double seconds = 0;
  std::vector<double> latencies_ms;      // of every response, sorted
  std::vector<double> ok_latencies_ms;   // of the 200 responses, sorted
  double mean_batch_size = 0;            // over 200 responses
  double rss_before = 0, rss_after = 0;  // server's process_resident_memory_bytes, 0 if unknown
  int64_t retry_after = 0;               // 503s that carried Retry-After
  std::vector<LoadWindow> windows;       // with LoadOptions::window
  double percentile(double p) const;
  double ok_percentile(double p) const;  // of the 200 responses alone (accepted requests under overload)
  double throughput() const { return seconds > 0 ? double(latencies_ms.size()) / seconds : 0; }
  double ok_throughput() const { return seconds > 0 ? double(ok_latencies_ms.size()) / seconds : 0; }
};

// "127.0.0.1", "::1", "localhost" and the rest of 127/8; anything else is refused.
bool is_loopback_host(const std::string& host);

// Fails (vlrt::Error) on a bad or non-loopback URL; never sends more than clients x requests.
LoadReport run_load(const LoadOptions& options);

// A soak's drift: its first full window against its last (a last window shorter than half a
// window is left out), the first one's end taken as the end of warm-up.
struct SoakDrift {
  const LoadWindow* first = nullptr;
  const LoadWindow* last = nullptr;
  double p99_change = 0;  // last p99 / first p99 - 1
  double rss_growth = 0;  // server memory at the last one's end / at the first one's end - 1
};
// Null first and last when the run has fewer than two windows.
SoakDrift soak_drift(const LoadReport& r);

std::string format_report(const LoadReport& r);

}  // namespace vlrt::serve

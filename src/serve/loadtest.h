// A bounded load generator for `vlrt serve`: N clients, each sending M /v1/detect requests
// on one keep-alive connection, stopping at a time limit; loopback servers only.
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
};

struct LoadReport {
  int64_t sent = 0;
  std::map<int, int64_t> statuses;  // HTTP status -> count
  int64_t failed = 0;               // no response (connection refused, reset, timeout)
  double seconds = 0;
  std::vector<double> latencies_ms;      // of every response, sorted
  double mean_batch_size = 0;            // over 200 responses
  double rss_before = 0, rss_after = 0;  // server's process_resident_memory_bytes, 0 if unknown
  double percentile(double p) const;
  double throughput() const { return seconds > 0 ? double(latencies_ms.size()) / seconds : 0; }
};

// "127.0.0.1", "::1", "localhost" and the rest of 127/8; anything else is refused.
bool is_loopback_host(const std::string& host);

// Fails (vlrt::Error) on a bad or non-loopback URL; never sends more than clients x requests.
LoadReport run_load(const LoadOptions& options);

std::string format_report(const LoadReport& r);

}  // namespace vlrt::serve

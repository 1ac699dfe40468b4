// Downloads a model file over HTTP(S) so that a file at its final path is always complete
// and verified: bytes go to OUT.part (resumed with a Range request after a dropped
// connection) and are renamed to OUT only when the SHA-256 (and size) match.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace vlrt {

struct FetchOptions {
  std::string url;
  std::string sha256;  // expected, 64 hex digits
  int64_t size = -1;   // expected bytes; -1 when unknown
  std::string out;
  int retries = 5;        // transient failures (drops, timeouts, 5xx) retried at most this often
  int backoff_ms = 1000;  // delay before the first retry, doubled for each next one
  int connect_timeout_s = 15;
  int stall_timeout_s = 30;     // an attempt that receives nothing for this long is a timeout
  std::ostream* log = nullptr;  // progress and retry notes
  bool bar = false;             // redraw one progress bar line (a terminal) instead of periodic lines
};

struct FetchResult {
  bool already_present = false;  // OUT existed with the right hash; nothing was requested
  int64_t bytes = 0;
  int64_t resumed_from = 0;  // bytes of an earlier OUT.part that were kept
  int requests = 0;
};

// Fails with what was expected and what was found. It never deletes or replaces an existing
// OUT that does not match, and on a mismatch removes only OUT.part.
FetchResult fetch(const FetchOptions& options);

}  // namespace vlrt

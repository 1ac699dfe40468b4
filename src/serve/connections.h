// The HTTP server's connections, guarded against slow and too many clients. httplib's own
// pool makes one thread serve one connection until it closes, so a few hundred clients that
// open a connection and send half a request hold every thread, and nobody else is answered.
// Here every connection gets a thread of its own from a pool that grows with the open
// connections (and shrinks back when they close), up to a cap beyond which a connection is
// answered 503 and closed at once; a request's headers must arrive within the read timeout
// from its first byte, and its body may not pause longer than it, else the connection is closed.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace vlrt::serve {

struct ConnectionLimits {
  std::chrono::milliseconds read_timeout{10000};  // the headers, all of them; the body, each pause
  size_t max_connections = 4096;  // open at once; more are answered 503 and closed
  size_t threads_kept = 64;       // idle threads kept for the next connections
  int keep_alive_timeout_s = 2;   // an idle connection is closed after this
  size_t keep_alive_max_count = 1000;
};

struct ConnectionStats {
  uint64_t open = 0;       // now
  uint64_t refused = 0;    // over max_connections: answered 503 and closed
  uint64_t timed_out = 0;  // closed because the request did not arrive within the read timeout
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits);
  // httplib listens with a backlog of 5; 32 clients connecting at once would see dropped SYNs
  // and one-second retransmits. listen() on a listening socket only resizes its backlog.
  void widen_backlog(int n);
  ConnectionStats stats() const;
  const ConnectionLimits& limits() const { return limits_; }

 private:
  class Stream;
  bool process_and_close_socket(socket_t sock) override;
  void refuse(socket_t sock);

  ConnectionLimits limits_;
  std::atomic<uint64_t> open_{0}, refused_{0}, timed_out_{0};
};

// True on a connection's thread after its request did not arrive within the read timeout, until
// the next request starts: the error handler answers it 408 rather than 400.
bool request_timed_out();

// Raises this process's soft limit on open files to its hard limit, so the connections are
// bounded by max_connections and not by the default 1024 descriptors. Returns the new limit.
uint64_t raise_open_files_limit();

}  // namespace vlrt::serve

#include "serve/connections.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace vlrt::serve {

namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_timed_out = false;

// A task queue whose threads grow with the tasks: a task never waits for another to end.
// Threads beyond `kept` end after they have been idle for a while.
class ElasticPool : public httplib::TaskQueue {
 public:
  explicit ElasticPool(size_t kept) : kept_(kept) {}
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lk(mu_);
    tasks_.push_back(std::move(fn));
    if (idle_ >= tasks_.size()) {
      more_.notify_one();
      return;
    }
    threads_++;
    std::thread([this] { work(); }).detach();
  }

  // Runs the queued tasks, then returns when every thread has ended.
  void shutdown() override {
    std::unique_lock<std::mutex> lk(mu_);
    stopping_ = true;
    more_.notify_all();
    ended_.wait(lk, [&] { return threads_ == 0; });
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      idle_++;
      bool got = more_.wait_for(lk, std::chrono::seconds(10), [&] { return !tasks_.empty() || stopping_; });
      idle_--;
      if (tasks_.empty() && (stopping_ || (!got && threads_ > kept_))) break;
      if (tasks_.empty()) continue;
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
    if (--threads_ == 0) ended_.notify_all();
  }

  const size_t kept_;
  std::mutex mu_;
  std::condition_variable more_, ended_;
  std::deque<std::function<void()>> tasks_;
  size_t threads_ = 0, idle_ = 0;
  bool stopping_ = false;
};

// Waits for EVENTS on SOCK until DEADLINE, in slices so that a stopped server is noticed when
// `listener` is given (waiting for a request); false on timeout, error or that stop. A response
// is written whether the server stopped or not: stop() lets connections finish their request.
bool wait_for(socket_t sock, short events, Clock::time_point deadline, const std::atomic<socket_t>* listener) {
  for (;;) {
    if (listener && *listener == INVALID_SOCKET) return false;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{sock, events, 0};
    int n = ::poll(&p, 1, int(std::min<long long>(left, 100)));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n < 0 && errno != EINTR) return false;
  }
}

void address_of(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  int r = peer ? getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
               : getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

}  // namespace

// A connection's reads, buffered, with the request's deadlines: its header lines must all
// arrive within the read timeout of the request's start, each read of its body within the
// read timeout of the last.
class GuardedHttpServer::Stream : public httplib::Stream {
 public:
  Stream(socket_t sock, const GuardedHttpServer& server) : sock_(sock), server_(server) {}

  // The next request starts: its headers' deadline runs from now.
  void start_request() {
    in_headers_ = true;
    t_timed_out = false;
    line_length_ = 0;
    lines_ = 0;
    headers_deadline_ = Clock::now() + server_.limits_.read_timeout;
  }
  bool timed_out() const { return timed_out_; }
  bool has_buffered() const { return begin_ < end_; }

  // Within a request a stopped server still reads it whole (to its read timeout): stop() lets
  // connections finish their request, and one cut off mid-body would be answered 400.
  bool is_readable() const override {
    return has_buffered() || wait_for(sock_, POLLIN, read_deadline(), nullptr);
  }
  bool is_writable() const override {
    auto deadline = Clock::now() + std::chrono::seconds(server_.write_timeout_sec_) +
                    std::chrono::microseconds(server_.write_timeout_usec_);
    return wait_for(sock_, POLLOUT, deadline, nullptr);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!has_buffered()) {
      auto deadline = read_deadline();
      if (!wait_for(sock_, POLLIN, deadline, nullptr)) {
        timed_out_ = t_timed_out = Clock::now() >= deadline;
        return -1;
      }
      ssize_t n;
      do n = ::recv(sock_, buffer_, sizeof buffer_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0, end_ = size_t(n);
    }
    size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    if (in_headers_) see_header_bytes(ptr, n);
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  Clock::time_point read_deadline() const {
    auto pause = Clock::now() + server_.limits_.read_timeout;
    return in_headers_ ? std::min(pause, headers_deadline_) : pause;
  }
  // The headers end at the first empty line after the request line.
  void see_header_bytes(const char* p, size_t n) {
    for (size_t i = 0; i < n && in_headers_; i++) {
      if (p[i] == '\n') {
        if (line_length_ == 0 && lines_ > 0) in_headers_ = false;
        lines_++;
        line_length_ = 0;
      } else if (p[i] != '\r') {
        line_length_++;
      }
    }
  }

  socket_t sock_;
  const GuardedHttpServer& server_;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
  bool in_headers_ = true, timed_out_ = false;
  size_t line_length_ = 0, lines_ = 0;
  Clock::time_point headers_deadline_;
};

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  size_t kept = limits_.threads_kept;
  new_task_queue = [kept] { return new ElasticPool(kept); };
  set_read_timeout(limits_.read_timeout);
  set_keep_alive_timeout(limits_.keep_alive_timeout_s);
  set_keep_alive_max_count(limits_.keep_alive_max_count);
}

void GuardedHttpServer::widen_backlog(int n) { ::listen(svr_sock_, n); }

ConnectionStats GuardedHttpServer::stats() const { return {open_, refused_, timed_out_}; }

void GuardedHttpServer::refuse(socket_t sock) {
  static const std::string body =
      R"({"error":"too many open connections; retry later; the limit is the server's --max-connections"})";
  std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                      "Connection: close\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
  // Best effort, never blocking: the socket's send buffer takes a reply this small.
  (void)::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  if (open_.fetch_add(1) >= limits_.max_connections) {
    refused_++;
    refuse(sock);
  } else {
    Stream stream(sock, *this);
    for (size_t count = limits_.keep_alive_max_count; count > 0; count--) {
      // Waiting for a request: the first one as long as between two of a keep-alive connection.
      auto idle_deadline = Clock::now() + std::chrono::seconds(limits_.keep_alive_timeout_s);
      if (!stream.has_buffered() && !wait_for(sock, POLLIN, idle_deadline, &svr_sock_)) break;
      stream.start_request();
      bool connection_closed = false;
      ok = process_request(stream, count == 1, connection_closed, nullptr);
      if (stream.timed_out()) {  // answered 408; whatever the client sends later is not a request
        timed_out_++;
        break;
      }
      if (!ok || connection_closed) break;
    }
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  open_--;
  return ok;
}

bool request_timed_out() { return t_timed_out; }

uint64_t raise_open_files_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return uint64_t(r.rlim_cur);
}

}  // namespace vlrt::serve

// An HTTP server on 127.0.0.1 inside the test process, for the fetch tests. It serves
// /file (Range requests honoured), /drop (the first response stops halfway and closes the
// connection), /wrong (other bytes of the same size), /flaky (503 once) and /busy (always
// 503), and records every request.
#pragma once

#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace vlrt::test {

class LoopbackServer {
 public:
  explicit LoopbackServer(size_t size = 64 * 1024) : content_(size, '\0') {
    std::mt19937 rng(42);
    for (char& c : content_) c = char(rng());
    wrong_ = content_;
    wrong_[size / 3] ^= 1;
    server_.Get("/file", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.set_content(content_, "application/octet-stream");
    });
    server_.Get("/wrong", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.set_content(wrong_, "application/octet-stream");
    });
    server_.Get("/drop", [this](const httplib::Request& req, httplib::Response& res) {
      if (record(req) > 1 || !req.get_header_value("Range").empty()) {
        res.set_content(content_, "application/octet-stream");
        return;
      }
      res.set_content_provider(content_.size(), "application/octet-stream",
                               [this](size_t offset, size_t, httplib::DataSink& sink) {
                                 if (offset >= content_.size() / 2) return false;  // drops the connection
                                 sink.write(content_.data(), content_.size() / 2);
                                 return true;
                               });
    });
    server_.Get("/flaky", [this](const httplib::Request& req, httplib::Response& res) {
      if (record(req) == 1) {
        res.status = 503;
        return;
      }
      res.set_content(content_, "application/octet-stream");
    });
    server_.Get("/busy", [this](const httplib::Request& req, httplib::Response& res) {
      record(req);
      res.status = 503;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackServer() {
    server_.stop();
    thread_.join();
  }

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  const std::string& content() const { return content_; }
  const std::string& wrong() const { return wrong_; }
  // The Range header of each request so far ("" when none).
  std::vector<std::string> ranges() {
    std::lock_guard<std::mutex> lk(mu_);
    return ranges_;
  }
  size_t requests() { return ranges().size(); }

 private:
  // Returns how many requests this path has had, this one included.
  int record(const httplib::Request& req) {
    std::lock_guard<std::mutex> lk(mu_);
    ranges_.push_back(req.get_header_value("Range"));
    return ++per_path_[req.path];
  }

  std::string content_, wrong_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> ranges_;
  std::map<std::string, int> per_path_;
};

}  // namespace vlrt::test

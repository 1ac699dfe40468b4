// `vlrt serve` and `vlrt loadtest` as programs: SIGTERM under load drains every accepted
// request and exits 0; startup errors are clear messages.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <thread>

#include "serve_util.h"

namespace vlrt {

namespace {

// A child process with its stdout and stderr on a pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv = {const_cast<char*>(VLRT_BINARY)};
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(VLRT_BINARY, argv.data());
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  // Reads output until `re` matches it or the timeout passes; returns the match ("" if none).
  std::string wait_for(const std::regex& re, double seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::smatch m;
    while (!std::regex_search(output_, m, re)) {
      int left =
          int(std::chrono::duration<double, std::milli>(deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0 || !read_some(left)) return "";
    }
    return m.size() > 1 ? m[1].str() : m[0].str();
  }
  // Waits for the exit (SIGKILL after the timeout); the exit code, 128+signal when killed.
  int wait_exit(double seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      read_some(10);
    }
    exited_ = true;
    while (read_some(10)) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

 private:
  bool read_some(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    output_.append(buf, size_t(n));
    return true;
  }
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  std::string output_;
};

const std::regex kPort(R"(on http://127\.0\.0\.1:(\d+))");

}  // namespace

TEST(ServeProcess, SigtermUnderLoadCompletesEveryAcceptedRequestAndExitsZero) {
  Child server({"serve", "--port", "0", "--max-queue-delay-ms", "5"});
  std::string port = server.wait_for(kPort, 30);
  ASSERT_FALSE(port.empty()) << server.output();

  const std::string png = test::png_bytes(64, 48);
  std::atomic<int> ok{0}, refused{0}, no_response{0}, other{0}, other_status{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; i++)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", std::stoi(port));
      c.set_read_timeout(20);
      // Until the server refuses or goes away; bounded in case it does neither.
      for (int k = 0; k < 400; k++) {
        auto r = test::post_detect(c, png, "dog . cat");
        if (!r) {
          no_response++;
          return;
        }
        if (r->status == 200) {
          ok++;
          continue;
        }
        if (r->status != 503) other_status = r->status;
        (r->status == 503 ? refused : other)++;
        return;
      }
    });
  while (ok < 150) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  for (auto& t : clients) t.join();
  int code = server.wait_exit(30);
  EXPECT_EQ(code, 0) << server.output();
  EXPECT_EQ(other, 0) << "answered " << other_status << ": " << server.output();
  std::smatch m;
  const std::string& out = server.output();
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"((\d+) requests accepted, (\d+) completed, (\d+) timed out, (\d+) failed)")))
      << out;
  EXPECT_EQ(m[1].str(), m[2].str()) << "every accepted request completed: " << out;
  EXPECT_EQ(std::stoi(m[2].str()), ok.load()) << "every completed request reached its client: " << out;
  EXPECT_EQ(m[3].str(), "0");
  EXPECT_EQ(m[4].str(), "0");
  EXPECT_NE(out.find("SIGTERM: refusing new requests, draining the queue"), std::string::npos) << out;
}

TEST(ServeProcess, SigintWhenIdleAndStartupErrors) {
  Child server({"serve", "--port", "0"});
  std::string port = server.wait_for(kPort, 30);
  ASSERT_FALSE(port.empty()) << server.output();

  // The same port again: refused, not silently shared.
  Child second({"serve", "--port", port});
  EXPECT_EQ(second.wait_exit(30), 1);
  EXPECT_NE(second.output().find("cannot listen on 127.0.0.1:" + port), std::string::npos) << second.output();

  ASSERT_EQ(kill(server.pid(), SIGINT), 0);
  EXPECT_EQ(server.wait_exit(30), 0) << server.output();
  EXPECT_NE(server.output().find("0 requests accepted"), std::string::npos) << server.output();

  auto missing = test::run_cli("serve -m /nonexistent/model.onnx --port 0");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent/model.onnx"), std::string::npos) << missing.output;
  auto not_grounding =
      test::run_cli("serve -m " + test::source_path("models/tiny/tiny_cnn.onnx") + " --vocab " +
                    test::source_path("tests/fixtures/grounding/tiny/vocab.txt") + " --port 0");
  EXPECT_EQ(not_grounding.exit_code, 1);
  EXPECT_NE(not_grounding.output.find("does not follow the GroundingDINO model contract"), std::string::npos)
      << not_grounding.output;

  auto remote = test::run_cli("loadtest --url http://192.0.2.1:8080 -c 1 -n 1");
  EXPECT_EQ(remote.exit_code, 1);
  EXPECT_NE(remote.output.find("only targets loopback servers"), std::string::npos) << remote.output;

  auto no_model = test::run_cli("loadtest --compare-batching -m /nonexistent/model.onnx -c 1 -n 1");
  EXPECT_EQ(no_model.exit_code, 1);
  EXPECT_NE(no_model.output.find("the server did not start"), std::string::npos) << no_model.output;
  EXPECT_NE(no_model.output.find("/nonexistent/model.onnx"), std::string::npos) << no_model.output;
}

TEST(ServeProcess, LoadtestComparesBatchingWithMaxBatchOne) {
  // Both servers are started by the load tool itself and answer every request; the ratio is
  // reported, not asserted (a benchmark, not a timed test).
  auto r = test::run_cli("loadtest --compare-batching -c 4 -n 3 --json --image " +
                         test::source_path("assets/demo.png") + " --prompt 'red square . green triangle .'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.output;
  for (const char* config : {"batching", "max-batch 1"}) {
    EXPECT_EQ(j[config]["statuses"]["200"], 12) << config << ": " << r.output;
    EXPECT_EQ(j[config]["no_response"], 0) << config;
  }
  EXPECT_EQ(j["max-batch 1"]["mean_batch_size"], 1.0);
  EXPECT_GT(j["throughput_ratio"].get<double>(), 0.0);
}

}  // namespace vlrt

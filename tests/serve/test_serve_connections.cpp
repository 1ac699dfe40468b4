// The server's OpenAPI document and its guards against slow and too many clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include "serve_util.h"

namespace vlrt {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A connection to the server that sends TEXT and then nothing.
int stalled_connection(int port, const std::string& text) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(send(fd, text.data(), text.size(), MSG_NOSIGNAL), ssize_t(text.size()));
  return fd;
}

// What the server sends on FD until it closes it, or "<open>" when it still has not after WAIT_MS.
std::string read_until_closed(int fd, int wait_ms) {
  std::string got;
  auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return "<open>";
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return got;
    got.append(buf, size_t(n));
  }
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

TEST(ServeOpenApi, EveryRouteTheServerRegistersIsDescribed) {
  test::TestServer ts;
  auto c = ts.client();
  auto r = c.Get("/openapi.json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  json doc = json::parse(r->body);
  EXPECT_EQ(doc, json::parse(read_file(test::source_path("docs/openapi.json"))));
  auto routes = ts.server->routes();
  EXPECT_GT(routes.size(), 20u);
  std::set<std::string> paths;
  for (auto& [path, method] : routes) {
    paths.insert(path);
    EXPECT_TRUE(doc["paths"].contains(path) && doc["paths"][path].contains(method))
        << method << " " << path << " is a route of the server but not in docs/openapi.json";
  }
  EXPECT_TRUE(paths.count("/v2/models/{name}/versions/{version}/infer"));
  EXPECT_TRUE(paths.count("/v2/repository/models/{name}/unload"));
}

// Many connections holding half a request do not keep others from being answered, and are
// closed (with a 408) once the read timeout has passed.
TEST(ServeSlowClients, StalledHeadersAndBodiesDoNotBlockOthersAndAreClosed) {
  serve::ServeOptions o;
  o.read_timeout_s = 0.4;
  o.http_threads = 4;  // the stalled connections outnumber the threads kept
  test::TestServer ts(o);
  std::vector<int> stalled;
  for (int i = 0; i < 50; i++) stalled.push_back(stalled_connection(ts.port, "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n"));
  for (int i = 0; i < 50; i++)
    stalled.push_back(stalled_connection(
        ts.port, "POST /v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"pro"));
  auto c = ts.client();
  auto t0 = Clock::now();
  auto ready = c.Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_LT(ms_since(t0), 300);
  auto detect = test::post_detect(c, test::demo_png(), test::demo_prompt());
  ASSERT_TRUE(detect);
  EXPECT_EQ(detect->status, 200);
  for (int fd : stalled) {
    std::string got = read_until_closed(fd, 2000);
    EXPECT_NE(got, "<open>");
    EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got.substr(0, 200);
    close(fd);
  }
}

// Headers sent a byte at a time, each in less than the read timeout, still must all arrive within it.
TEST(ServeSlowClients, HeadersMustAllArriveWithinTheReadTimeout) {
  serve::ServeOptions o;
  o.read_timeout_s = 0.3;
  test::TestServer ts(o);
  int fd = stalled_connection(ts.port, "G");
  auto t0 = Clock::now();
  bool closed = false;
  for (int i = 0; i < 20 && !closed; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    closed = send(fd, "E", 1, MSG_NOSIGNAL) < 0;
    pollfd p{fd, POLLIN, 0};
    closed = closed || poll(&p, 1, 0) > 0;
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(ms_since(t0), 800);
  close(fd);
}

TEST(ServeSlowClients, ConnectionsBeyondTheCapAreAnswered503) {
  serve::ServeOptions o;
  o.max_connections = 3;
  test::TestServer ts(o);
  std::vector<int> held;
  for (int i = 0; i < 3; i++) held.push_back(stalled_connection(ts.port, "GET / HTTP/1.1\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int extra = stalled_connection(ts.port, "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string got = read_until_closed(extra, 1000);
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
  EXPECT_NE(got.find("--max-connections"), std::string::npos);
  close(extra);
  for (int fd : held) close(fd);
  // Once they are closed, connections are served again.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto c = ts.client();
  auto r = c.Get("/v2/health/ready");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// A request httplib cannot read whole leaves the rest of itself on the connection: the 400 says
// Connection: close, so that a client does not send its next request after it.
// A request whose body is still arriving when the server stops is read whole and answered (503:
// shutting down), not cut off as malformed; the stop waits for it.
TEST(ServeSlowClients, ARequestHalfSentWhenTheServerStopsIsAnswered) {
  test::TestServer ts;
  const std::string body = R"({"prompt": "dog"})";
  int fd = stalled_connection(ts.port,
                              "POST /v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " +
                                  std::to_string(body.size()) + "\r\n\r\n" + body.substr(0, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server is reading the body
  std::thread stop([&] { ts.server->shutdown(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the listener has closed
  EXPECT_EQ(send(fd, body.data() + 5, body.size() - 5, MSG_NOSIGNAL), ssize_t(body.size() - 5));
  std::string got = read_until_closed(fd, 5000);
  stop.join();
  close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got.substr(0, 300);
  EXPECT_NE(got.find("shutting down"), std::string::npos) << got.substr(0, 300);
}

TEST(ServeSlowClients, MalformedRequestsCloseTheirConnection) {
  test::TestServer ts(serve::ServeOptions{});
  std::string body = "--b\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\nno closing boundary";
  int fd = stalled_connection(ts.port, "POST /v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                                       "boundary=b\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  std::string reply;
  char buf[4096];
  for (int i = 0; i < 40 && reply.find("malformed HTTP request") == std::string::npos; i++) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, size_t(n));
  }
  close(fd);
  EXPECT_NE(reply.find("HTTP/1.1 400"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  EXPECT_NE(reply.find("malformed HTTP request"), std::string::npos) << reply;
}

}  // namespace
}  // namespace vlrt

// `vlrt serve` with an API key and TLS: every route but health answers 401 without the key and
// works with it (Bearer or X-AnyLabeling's Token header), wrong keys of any length are refused,
// a non-loopback host needs a key or --insecure, and HTTPS round-trips with a certificate made here.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/files.h"
#include "pipelines/vlm/chat.h"
#include "serve/auth.h"
#include "serve_util.h"

namespace vlrt::test {
namespace {

using nlohmann::json;

const std::string kKey = "s3cret-key-0123456789";

serve::ServeOptions keyed() {
  serve::ServeOptions o;
  o.api_key = kKey;
  return o;
}

TestServer& keyed_server() {
  static TestServer s(keyed());
  return s;
}

httplib::Headers bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }
httplib::Headers token(const std::string& key) { return {{"Token", key}}; }

int get_status(const std::string& path, const httplib::Headers& headers = {}) {
  auto c = keyed_server().client();
  auto r = c.Get(path, headers);
  return r ? r->status : -1;
}

TEST(ServeAuth, EveryRouteButHealthAsksForTheKey) {
  const std::string model = "/v2/models/" + keyed_server().server->model_name();
  for (const std::string& path : std::vector<std::string>{"/metrics", "/v2", model, model + "/config",
                                                          "/v2/models/stats", "/v1/models", "/", "/no/such/route"}) {
    auto c = keyed_server().client();
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer") << path;
    EXPECT_NE(body_json(r)["error"].get<std::string>().find("Authorization: Bearer"), std::string::npos) << path;
    if (path == "/no/such/route") continue;
    EXPECT_EQ(get_status(path, bearer(kKey)), 200) << path;
    EXPECT_EQ(get_status(path, token(kKey)), 200) << path;
  }
  for (const char* health : {"/v2/health/live", "/v2/health/ready", "/health"})
    EXPECT_EQ(get_status(health), 200) << health;
}

TEST(ServeAuth, PostRoutesRefuseWithoutTheKeyAndAnswerWithIt) {
  auto c = keyed_server().client();
  httplib::MultipartFormDataItems form = {{"image", png_bytes(32, 32), "image.png", "image/png"},
                                          {"prompt", demo_prompt(), "", ""}};
  auto refused = c.Post("/v1/detect", form);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto c2 = keyed_server().client();
  auto detected = c2.Post("/v1/detect", bearer(kKey), form);
  ASSERT_TRUE(detected);
  EXPECT_EQ(detected->status, 200) << detected->body;

  json predict = {{"model", keyed_server().server->model_name()},
                  {"image", "data:image/png;base64," + base64_encode(png_bytes(32, 32))},
                  {"params", {{"text_prompt", demo_prompt()}}}};
  auto c3 = keyed_server().client();
  auto xany = c3.Post("/v1/predict", predict.dump(), "application/json");
  ASSERT_TRUE(xany);
  EXPECT_EQ(xany->status, 401);
  auto c4 = keyed_server().client();
  xany = c4.Post("/v1/predict", token(kKey), predict.dump(), "application/json");
  ASSERT_TRUE(xany);
  EXPECT_EQ(xany->status, 200) << xany->body;
}

TEST(ServeAuth, ChatRoutesAnswer401InOpenAIsShape) {
  std::string folder = source_path("tests/fixtures/vlm/qwen2-vl/");
  serve::ServeOptions o = keyed();
  o.port = 0;
  serve::Server server(std::make_unique<vlm::Chat>(folder, vlm::ChatOptions{}), folder, o, 0.01);
  int port = server.start();
  httplib::Client c("127.0.0.1", port);
  auto refused = c.Post("/v1/chat/completions", R"({"messages": []})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  json error = body_json(refused)["error"];
  EXPECT_EQ(error["type"], "authentication_error") << error;
  EXPECT_EQ(error["code"], 401) << error;
  EXPECT_TRUE(error["message"].is_string()) << error;
  httplib::Client c2("127.0.0.1", port);
  auto models = c2.Get("/v1/models", bearer(kKey));
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200) << models->body;
  EXPECT_EQ(c2.Get("/v2/health/ready")->status, 200);
}

TEST(ServeAuth, WrongKeysOfAnyLengthAreRefusedAndCounted) {
  std::string same_length = kKey;
  same_length.back() ^= 1;
  for (const auto& wrong : std::vector<std::string>{same_length, kKey.substr(0, 5), kKey + "x", std::string("")}) {
    EXPECT_EQ(get_status("/metrics", bearer(wrong)), 401) << wrong;
    EXPECT_EQ(get_status("/metrics", token(wrong)), 401) << wrong;
  }
  EXPECT_EQ(get_status("/metrics", {{"Authorization", "Basic " + kKey}}), 401);
  EXPECT_EQ(get_status("/metrics", {{"Authorization", "bearer  " + kKey + " "}}), 200);  // scheme in any case
  auto c = keyed_server().client();
  auto page = c.Get("/metrics", bearer(kKey));
  ASSERT_TRUE(page);
  EXPECT_GE(metric_value(page->body, R"(vlrt_requests_total{endpoint="/metrics",status="401"})"), 9);
}

TEST(ServeAuth, ApiKeyComparesDigests) {
  serve::ApiKey key("abc");
  EXPECT_TRUE(key.matches("abc"));
  EXPECT_FALSE(key.matches("abd"));
  EXPECT_FALSE(key.matches("ab"));
  EXPECT_FALSE(key.matches(""));
  EXPECT_TRUE(key.accepts("Bearer abc", ""));
  EXPECT_TRUE(key.accepts("", " abc "));
  EXPECT_TRUE(key.accepts("Bearer wrong", "abc"));
  EXPECT_FALSE(key.accepts("abc", ""));
  EXPECT_FALSE(key.accepts("Bearer", ""));
}

TEST(ServeAuth, KeyFromOptionFileOrEnvironment) {
  std::string dir = temp_dir("serve_auth_key");
  std::string file = dir + "/key";
  write_file_atomically(file, "  from-file \nsecond line\n");
  chmod(file.c_str(), 0600);
  std::string warnings;
  EXPECT_EQ(serve::resolve_api_key("flag", file, "env", &warnings), "flag");
  EXPECT_EQ(serve::resolve_api_key("", file, "env", &warnings), "from-file");
  EXPECT_EQ(warnings, "");
  EXPECT_EQ(serve::resolve_api_key("", "", " env ", &warnings), "env");
  EXPECT_EQ(serve::resolve_api_key("", "", nullptr, &warnings), "");
  chmod(file.c_str(), 0644);
  EXPECT_EQ(serve::resolve_api_key("", file, nullptr, &warnings), "from-file");
  EXPECT_NE(warnings.find("may be read by every user"), std::string::npos) << warnings;

  EXPECT_NE(error_of([&] { serve::resolve_api_key("", dir + "/missing", nullptr, nullptr); })
                .find("--api-key-file " + dir + "/missing: cannot read it"),
            std::string::npos);
  write_file_atomically(file, "\nkey on the second line\n");
  EXPECT_NE(error_of([&] { serve::resolve_api_key("", file, nullptr, nullptr); }).find("first line is empty"),
            std::string::npos);
}

TEST(ServeAuth, NonLoopbackHostNeedsAKeyOrInsecure) {
  serve::ServeOptions o;
  o.host = "0.0.0.0";
  std::string refused = error_of([&] { serve::check_security_options(o); });
  EXPECT_NE(refused.find("--api-key"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--insecure"), std::string::npos) << refused;
  o.api_key = "k";
  EXPECT_EQ(error_of([&] { serve::check_security_options(o); }), "");
  o.api_key = "";
  o.insecure = true;
  EXPECT_EQ(error_of([&] { serve::check_security_options(o); }), "");
  for (const char* loopback : {"127.0.0.1", "::1", "localhost"}) {
    serve::ServeOptions l;
    l.host = loopback;
    EXPECT_EQ(error_of([&] { serve::check_security_options(l); }), "") << loopback;
  }

  auto cli = run_cli("serve --host 0.0.0.0 --port 0");
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.output.find("--api-key"), std::string::npos) << cli.output;
  EXPECT_NE(cli.output.find("--insecure"), std::string::npos) << cli.output;
  // --insecure gets past the check, with a warning, to the model (which is missing here).
  auto insecure = run_cli("serve --host 0.0.0.0 --insecure --port 0 -m /nonexistent/model.onnx");
  EXPECT_EQ(insecure.exit_code, 1);
  EXPECT_NE(insecure.output.find("warning: --insecure"), std::string::npos) << insecure.output;
  EXPECT_NE(insecure.output.find("/nonexistent/model.onnx"), std::string::npos) << insecure.output;
}

// A self-signed certificate for localhost and its key, as PEM files in DIR.
void write_self_signed(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  ASSERT_NE(pkey, nullptr);
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, pkey);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  ASSERT_GT(X509_sign(x, pkey, EVP_sha256()), 0);
  FILE* f = std::fopen(cert_path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(pkey);
}

TEST(ServeAuth, TlsRoundTripWithASelfSignedCertificate) {
  std::string dir = temp_dir("serve_tls");
  serve::ServeOptions o = keyed();
  o.tls_cert = dir + "/cert.pem";
  o.tls_key = dir + "/key.pem";
  write_self_signed(o.tls_cert, o.tls_key);
  TestServer server(o);
  EXPECT_STREQ(server.server->scheme(), "https");

  httplib::SSLClient https("127.0.0.1", server.port);
  https.enable_server_certificate_verification(false);
  https.set_read_timeout(20);
  auto ready = https.Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
  auto refused = https.Get("/metrics");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto metrics = https.Get("/metrics", bearer(kKey));
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);

  httplib::Client plain("127.0.0.1", server.port);
  plain.set_read_timeout(5);
  auto r = plain.Get("/v2/health/ready");
  EXPECT_TRUE(!r || r->status != 200);
}

TEST(ServeAuth, TlsOptionsComeInPairsOfReadableFiles) {
  serve::ServeOptions o;
  o.tls_cert = "/nonexistent/cert.pem";
  EXPECT_NE(error_of([&] { serve::check_security_options(o); }).find("needs both --tls-cert and --tls-key"),
            std::string::npos);
  o.tls_key = "/nonexistent/key.pem";
  EXPECT_NE(error_of([&] { serve::check_security_options(o); }).find("--tls-cert /nonexistent/cert.pem: cannot read"),
            std::string::npos);
  // Readable files that are not PEM: OpenSSL refuses them, named.
  std::string dir = temp_dir("serve_tls_bad");
  o.tls_cert = o.tls_key = dir + "/not.pem";
  write_file_atomically(o.tls_cert, "not a certificate\n");
  o.port = 0;
  std::string msg = error_of([&] { serve::Server s(demo_pipeline(), o, 0.01); });
  EXPECT_NE(msg.find("OpenSSL cannot use them"), std::string::npos) << msg;
}

}  // namespace
}  // namespace vlrt::test

// Thousands of malformed requests — random bytes, broken multipart, broken JSON, broken
// images, bad tensors, unknown routes — each answered 4xx with a JSON error; the server
// is healthy and correct afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "serve/request.h"
#include "serve_util.h"

namespace vlrt {

using nlohmann::json;

namespace {

struct Malformed {
  std::string kind;
  std::string method = "POST";
  std::string path = "/v1/detect";
  std::string body;
  std::string content_type;
};

std::string random_bytes(std::mt19937& rng, size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = char(rng());
  return s;
}

std::string multipart(const std::string& boundary,
                      const std::vector<std::pair<std::string, std::string>>& parts) {
  std::string body;
  for (auto& [name, content] : parts) {
    body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"";
    if (name == "image") body += "; filename=\"x.png\"\r\nContent-Type: image/png";
    body += "\r\n\r\n" + content + "\r\n";
  }
  return body + "--" + boundary + "--\r\n";
}

// Images that can never decode: each names a failure decode_image detects.
std::string broken_image(std::mt19937& rng, const std::string& png, const std::string& jpg) {
  switch (rng() % 5) {
    case 0:  // a JPEG cut before its end-of-image marker
      return jpg.substr(0, 2 + rng() % (jpg.size() - 4));
    case 1: {  // a PNG header claiming far too many pixels
      std::string h = png.substr(0, 33);
      for (int i : {16, 20}) h[size_t(i)] = char(0x7f), h[size_t(i) + 1] = char(rng());
      return h;
    }
    case 2:  // random bytes after an image signature
      return (rng() % 2 ? png.substr(0, 8) : std::string("BM")) + random_bytes(rng, 64);
    case 3:  // a PNG cut inside its header
      return png.substr(0, 8 + rng() % 20);
    default:  // no signature at all
      return "not" + random_bytes(rng, 200);
  }
}

Malformed make_malformed(std::mt19937& rng, const std::string& png, const std::string& jpg) {
  Malformed m;
  std::string good_json = json({{"image", base64_encode(png)}, {"prompt", "dog . cat"}}).dump();
  std::string good_multipart = multipart("b0und", {{"image", png}, {"prompt", "dog . cat"}});
  static const char* types[] = {"application/json", "multipart/form-data; boundary=zz", "text/plain",
                                "application/octet-stream", "application/json; charset=utf-8"};
  switch (rng() % 12) {
    case 0:
      m.kind = "random bytes";
      m.body = random_bytes(rng, 2000);
      m.content_type = types[rng() % 5];
      break;
    case 1:
      m.kind = "truncated multipart";
      m.body = good_multipart.substr(0, rng() % (good_multipart.size() - 8));
      m.content_type = "multipart/form-data; boundary=b0und";
      break;
    case 2:
      m.kind = "multipart with another boundary";
      m.body = good_multipart;
      m.content_type = "multipart/form-data; boundary=other";
      break;
    case 3:
      m.kind = "multipart with a broken image";
      m.body = multipart("b0und", {{"image", broken_image(rng, png, jpg)}, {"prompt", "dog"}});
      m.content_type = "multipart/form-data; boundary=b0und";
      break;
    case 4:
      m.kind = "truncated JSON";
      m.body = good_json.substr(0, rng() % (good_json.size() - 1));
      m.content_type = "application/json";
      break;
    case 5: {
      m.kind = "JSON with wrong types";
      json values[] = {5, 1.5, true, nullptr, json::array({1}), json::object({{"a", 1}}), "x"};
      json j = {{"image", base64_encode(png)}, {"prompt", "dog"}, {"box_threshold", 0.3}};
      const char* keys[] = {"image", "prompt", "box_threshold"};
      std::string key = keys[rng() % 3];
      json v = values[rng() % 7];
      // Values of the right type are skipped: a number threshold in range would be valid.
      if ((key == "box_threshold" && v.is_number() && v.get<double>() <= 1) ||
          (key == "prompt" && v.is_string()))
        v = nullptr;
      j[key] = v;
      m.body = j.dump();
      m.content_type = "application/json";
      break;
    }
    case 6:
      m.kind = "JSON with a broken image";
      m.body = json({{"image", base64_encode(broken_image(rng, png, jpg))}, {"prompt", "dog"}}).dump();
      m.content_type = "application/json";
      break;
    case 7: {
      m.kind = "JSON with bad base64";
      std::string b64 = base64_encode(png);
      b64[rng() % b64.size()] = "!*#\x01\xff-_"[rng() % 7];
      m.body = json({{"image", b64}, {"prompt", "dog"}}).dump(-1, ' ', false, json::error_handler_t::replace);
      m.content_type = "application/json";
      break;
    }
    case 8: {
      m.kind = "bad prompt";
      std::string prompts[] = {"", "   ", std::string(3000 + rng() % 8000, 'a'), "dog \xff\xfe .", " . . ."};
      m.body = multipart("b0und", {{"image", png}, {"prompt", prompts[rng() % 5]}});
      m.content_type = "multipart/form-data; boundary=b0und";
      break;
    }
    case 9: {
      m.kind = "bad tensors";
      m.path = "/v2/models/demo/infer";
      m.content_type = "application/json";
      const char* bodies[] = {
          R"({"inputs":[{"name":"img","datatype":"FP32","shape":[1,3,8,8],"data":[1]}]})",
          R"({"inputs":[{"name":"img","datatype":"INT64","shape":[1],"data":[1]}]})",
          R"({"inputs":[{"name":"img","datatype":"FP32","shape":[1,3,4,4],"data":"abc"}]})",
          R"({"inputs":[{"name":"img","datatype":"BYTES","shape":[1],"data":["a"]}]})",
          R"({"inputs":"img"})",
          R"({"outputs":[{"name":"nope"}],"inputs":[]})",
          R"({"inputs":[{"name":"zzz","datatype":"FP32","shape":[1],"data":[1]}]})",
          R"({"inputs":[{"name":"img","datatype":"FP32","shape":[1,3,4,4],"data":[)"};
      m.body = bodies[rng() % 8];
      if (rng() % 4 == 0) m.body = random_bytes(rng, 300);
      break;
    }
    case 10:
      m.kind = "unknown route";
      m.method = rng() % 2 ? "GET" : "POST";
      m.path = "/" + std::to_string(rng()) + (rng() % 2 ? "/v2/models" : "");
      m.body = random_bytes(rng, 100);
      m.content_type = "application/json";
      break;
    default:
      m.kind = "unknown model";
      m.path = "/v2/models/m" + std::to_string(rng() % 100) + "/infer";
      m.body = "{}";
      m.content_type = "application/json";
      break;
  }
  return m;
}

}  // namespace

TEST(ServeFuzz, TwoThousandMalformedRequestsAreAll4xx) {
  test::TestServer s;
  const std::string png = test::png_bytes(48, 40, 9), jpg = test::jpeg_bytes(48, 40, 9);
  const int kThreads = 4, kPerThread = 550;
  std::mutex mu;
  std::map<std::string, std::map<int, int>> seen;  // kind -> status -> count
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      auto c = s.client();
      for (int i = 0; i < kPerThread; i++) {
        Malformed m = make_malformed(rng, png, jpg);
        httplib::Result r = m.method == "GET" ? c.Get(m.path) : c.Post(m.path, m.body, m.content_type);
        int status = r ? r->status : -1;
        bool json_error = false;
        if (r) {
          json j = json::parse(r->body, nullptr, false);
          json_error = j.is_object() && j.contains("error") && j["error"].is_string() && !j["error"].empty();
        }
        std::lock_guard<std::mutex> lk(mu);
        seen[m.kind][status]++;
        if ((status < 400 || status > 499 || !json_error) && failures.size() < 20)
          failures.push_back(m.kind + ": " + std::to_string(status) + " " +
                             (r ? r->body.substr(0, 200) : ""));
      }
    });
  }
  for (auto& th : threads) th.join();
  int total = 0;
  std::string summary;
  for (auto& [kind, statuses] : seen) {
    summary += kind + ":";
    for (auto& [st, n] : statuses) {
      summary += cat(" ", st, "x", n);
      total += n;
    }
    summary += "\n";
  }
  std::cout << summary;
  EXPECT_EQ(total, kThreads * kPerThread);
  EXPECT_TRUE(failures.empty()) << summary << "first failures:\n"
                                << [&] {
                                     std::string f;
                                     for (auto& x : failures) f += "  " + x + "\n";
                                     return f;
                                   }();
  EXPECT_GE(seen.size(), 10u) << summary;

  auto c = s.client();
  EXPECT_EQ(c.Get("/v2/health/ready")->status, 200);
  auto ok = test::post_detect(c, png, "dog . cat");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  std::string metrics = c.Get("/metrics")->body;
  EXPECT_EQ(metrics.find("status=\"5"), std::string::npos) << "no 5xx was ever answered";
}

}  // namespace vlrt

// vlrt serve's endpoints over HTTP on a loopback port, with the shipped demo model: results
// equal to the detector's, every bad input a 4xx with a JSON error naming the problem,
// batching, overload and timeouts, metrics.
#include <gtest/gtest.h>
#include <webp/encode.h>

#include <thread>

#include "serve/loadtest.h"
#include "serve/request.h"
#include "serve_util.h"

namespace vlrt {

using nlohmann::json;
using test::body_json;
using test::post_detect;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve::ServeOptions o;
    o.max_body_bytes = 4 << 20;
    server_ = new test::TestServer(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  httplib::Client client() { return server_->client(); }
  static test::TestServer* server_;
};
test::TestServer* ServeHttp::server_ = nullptr;

// Status and error message of a response; the body must be a JSON object with "error".
std::pair<int, std::string> error_of(const httplib::Result& r) {
  if (!r) return {-1, "no response"};
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_string())
    return {r->status, "not a JSON error: " + r->body};
  return {r->status, j["error"].get<std::string>()};
}

}  // namespace

TEST_F(ServeHttp, HealthAndModelMetadata) {
  auto c = client();
  auto live = c.Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  auto ready = c.Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(c.Get("/v2/models/demo/ready")->status, 200);
  EXPECT_EQ(body_json(c.Get("/v2"))["name"], "vlrt");

  auto meta = c.Get("/v2/models/demo");
  ASSERT_TRUE(meta);
  ASSERT_EQ(meta->status, 200) << meta->body;
  json m = json::parse(meta->body);
  EXPECT_EQ(m["name"], "demo");
  ASSERT_EQ(m["inputs"].size(), 6u);
  EXPECT_EQ(m["inputs"][0], json({{"name", "img"}, {"datatype", "FP32"}, {"shape", {-1, 3, -1, -1}}}));
  EXPECT_EQ(m["inputs"][1]["datatype"], "INT64");
  EXPECT_EQ(m["inputs"][2]["datatype"], "BOOL");
  EXPECT_EQ(m["inputs"][5]["shape"], json({-1, -1, -1}));
  EXPECT_EQ(m["outputs"][1], json({{"name", "boxes"}, {"datatype", "FP32"}, {"shape", {-1, 900, 4}}}));

  auto [status, msg] = error_of(c.Get("/v2/models/other"));
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(contains(msg, "unknown model 'other'; this server serves 'demo'")) << msg;
  std::tie(status, msg) = error_of(c.Get("/nowhere"));
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(contains(msg, "no route for GET /nowhere")) << msg;
}

TEST_F(ServeHttp, DetectMatchesTheDetectorInMultipartAndJson) {
  auto detector = test::demo_detector();
  const std::string prompt = test::demo_prompt(), png = test::demo_png();
  const std::string jpg = test::jpeg_bytes(vision::decode_image(png, "demo.png"));
  auto c = client();
  for (auto& [bytes, multipart] : {std::pair{png, true}, std::pair{jpg, false}}) {
    httplib::Result r =
        multipart
            ? post_detect(c, bytes, prompt)
            : c.Post("/v1/detect", json({{"image", base64_encode(bytes)}, {"prompt", prompt}}).dump(),
                     "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    vision::Image img = vision::decode_image(bytes, "test");
    auto expected = detector->detect({&img}, detector->encode(prompt))[0];
    ASSERT_GT(expected.size(), 0u);
    ASSERT_EQ(j["detections"].size(), expected.size());
    for (size_t i = 0; i < expected.size(); i++) {
      const json& d = j["detections"][i];
      EXPECT_EQ(d["label"], expected[i].label);
      EXPECT_NEAR(d["score"].get<double>(), expected[i].score, 1e-5);
      EXPECT_NEAR(d["box"][0].get<double>(), expected[i].x1, 0.01);
      EXPECT_NEAR(d["box"][3].get<double>(), expected[i].y2, 0.01);
    }
    EXPECT_EQ(j["batch_size"], 1);
    EXPECT_EQ(j["prompt"], detector->encode(prompt).caption);
    EXPECT_EQ(j["image"]["width"], img.width);
    for (const char* k : {"queue_ms", "inference_ms", "total_ms"})
      EXPECT_GE(j["timing"][k].get<double>(), 0) << k;
  }
}

// The endpoint tells formats by content: a lossless WebP of the demo image (sent as
// "demo.png") gives the PNG's detections; a cut one is a 400 naming the format.
TEST_F(ServeHttp, WebpImagesAreDecodedByContent) {
  auto c = client();
  std::string png = test::demo_png(), prompt = test::demo_prompt();
  vision::Image img = vision::decode_image(png, "demo.png");
  uint8_t* encoded = nullptr;
  size_t size = WebPEncodeLosslessRGB(img.rgb.data(), img.width, img.height, img.width * 3, &encoded);
  ASSERT_GT(size, 0u);
  std::string webp(reinterpret_cast<char*>(encoded), size);
  WebPFree(encoded);
  auto from_png = body_json(post_detect(c, png, prompt));
  auto from_webp = body_json(post_detect(c, webp, prompt));
  ASSERT_GT(from_png["detections"].size(), 0u);
  EXPECT_EQ(from_webp["detections"], from_png["detections"]);
  auto cut = post_detect(c, webp.substr(0, webp.size() / 2), prompt);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->status, 400);
  EXPECT_NE(cut->body.find("truncated WebP"), std::string::npos) << cut->body;
}

// Memory running out during a request is a 503 with Retry-After naming it; the server stays ready
// and the same request then succeeds. Each image has a size of its own, so that its request plans
// (and allocates) anew. (tools/check_allocation_failures.py fails each allocation of a request in
// turn.)
TEST_F(ServeHttp, OutOfMemoryDuringARequestIs503AndTheServerGoesOn) {
  auto c = client();
  std::string prompt = test::demo_prompt();
  for (int n : {1, 5, 40}) {
    std::string png = test::png_bytes(80 + n, 60 + n);
    fail_host_allocation(n);
    auto r = post_detect(c, png, prompt);
    fail_host_allocation(0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_NE(r->body.find("out of memory"), std::string::npos) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    EXPECT_EQ(post_detect(c, png, prompt)->status, 200);
  }
  EXPECT_EQ(c.Get("/v2/health/ready")->status, 200);
}

TEST_F(ServeHttp, ThresholdsPerRequest) {
  auto c = client();
  std::string png = test::demo_png(), prompt = test::demo_prompt();
  auto usual = body_json(post_detect(c, png, prompt));
  auto many = body_json(post_detect(c, png, prompt, {{"box_threshold", "0.05", "", ""}}));
  ASSERT_TRUE(usual.contains("detections") && many.contains("detections"));
  EXPECT_GT(usual["detections"].size(), 0u);
  EXPECT_GT(many["detections"].size(), usual["detections"].size());
  for (auto& d : many["detections"]) EXPECT_GT(d["score"].get<double>(), 0.05);
  auto none = body_json(
      c.Post("/v1/detect",
             json({{"image", base64_encode(png)}, {"prompt", "dog"}, {"box_threshold", 1.0}}).dump(),
             "application/json"));
  EXPECT_EQ(none["detections"].size(), 0u);
}

TEST_F(ServeHttp, BadDetectRequestsAre4xxNamingTheProblem) {
  auto c = client();
  std::string png = test::png_bytes(64, 48), jpg = test::jpeg_bytes(64, 48);
  // A PNG header claiming 50000x50000 pixels, and nothing after it.
  std::string huge = png.substr(0, 33);
  for (int i : {16, 20}) {
    huge[i] = 0, huge[i + 1] = 0, huge[i + 2] = char(0xc3), huge[i + 3] = char(0x50);
  }
  auto as_json = [](json j) { return j.dump(); };
  struct Case {
    const char* what;
    std::function<httplib::Result()> send;
    int status;
    const char* message;
  };
  std::vector<Case> cases = {
      {"non-image bytes", [&] { return post_detect(c, "hello, not an image", "dog"); }, 400, "not an image"},
      {"empty image", [&] { return post_detect(c, "", "dog"); }, 400, "empty"},
      {"truncated JPEG", [&] { return post_detect(c, jpg.substr(0, jpg.size() / 2), "dog"); }, 400,
       "truncated"},
      {"50000x50000 PNG header", [&] { return post_detect(c, huge, "dog"); }, 400, "50000x50000"},
      {"empty prompt", [&] { return post_detect(c, png, ""); }, 400, "'prompt' is empty"},
      {"blank prompt", [&] { return post_detect(c, png, "  \n "); }, 400, "'prompt' is empty"},
      {"only separators", [&] { return post_detect(c, png, " . . "); }, 400, "'prompt'"},
      {"10 kB prompt", [&] { return post_detect(c, png, std::string(10240, 'a')); }, 400,
       "10240 bytes; the limit is 2048"},
      {"invalid UTF-8 prompt", [&] { return post_detect(c, png, "dog \xff ."); }, 400, "not valid UTF-8"},
      {"missing prompt",
       [&] {
         return c.Post("/v1/detect", httplib::MultipartFormDataItems{{"image", png, "a.png", "image/png"}});
       },
       400, "missing form field 'prompt'"},
      {"missing image",
       [&] {
         return c.Post("/v1/detect", httplib::MultipartFormDataItems{{"prompt", "dog", "", ""}});
       },
       400, "missing form field 'image'"},
      {"unknown form field",
       [&] {
         return post_detect(c, png, "dog", {{"colour", "red", "", ""}});
       },
       400, "unknown form field 'colour'"},
      {"threshold text",
       [&] {
         return post_detect(c, png, "dog", {{"box_threshold", "high", "", ""}});
       },
       400, "'box_threshold' is 'high'"},
      {"threshold range",
       [&] {
         return post_detect(c, png, "dog", {{"text_threshold", "1.5", "", ""}});
       },
       400, "between 0 and 1"},
      {"JSON prompt a number",
       [&] {
         return c.Post("/v1/detect", as_json({{"image", base64_encode(png)}, {"prompt", 5}}),
                       "application/json");
       },
       400, "'prompt' is JSON number"},
      {"JSON image an array",
       [&] {
         return c.Post("/v1/detect", as_json({{"image", {1, 2}}, {"prompt", "dog"}}), "application/json");
       },
       400, "'image' is JSON array"},
      {"JSON threshold a string",
       [&] {
         return c.Post(
             "/v1/detect",
             as_json({{"image", base64_encode(png)}, {"prompt", "dog"}, {"box_threshold", "0.3"}}),
             "application/json");
       },
       400, "'box_threshold' is JSON string"},
      {"bad base64",
       [&] {
         return c.Post("/v1/detect", as_json({{"image", "iVBOR!!!"}, {"prompt", "dog"}}), "application/json");
       },
       400, "not valid base64"},
      {"broken JSON", [&] { return c.Post("/v1/detect", "{\"image\": \"abc", "application/json"); }, 400,
       "not valid JSON"},
      {"JSON array", [&] { return c.Post("/v1/detect", "[1,2,3]", "application/json"); }, 400,
       "expected a JSON object"},
      {"empty body", [&] { return c.Post("/v1/detect", "", "application/json"); }, 400, "the body is empty"},
      {"unknown JSON field",
       [&] {
         return c.Post("/v1/detect", as_json({{"img", "x"}, {"prompt", "dog"}}), "application/json");
       },
       400, "unknown field 'img'"},
      {"wrong content type", [&] { return c.Post("/v1/detect", png, "image/png"); }, 415, "is not accepted"},
      {"body over the limit",
       [&] { return c.Post("/v1/detect", std::string(5 << 20, 'x'), "application/json"); }, 413,
       "larger than the limit of 4194304 bytes"},
      {"broken multipart",
       [&] {
         return c.Post("/v1/detect", "--xyz\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\ndog",
                       "multipart/form-data; boundary=xyz");
       },
       400, "malformed"},
      {"GET on a POST route", [&] { return c.Get("/v1/detect"); }, 404, "no route for GET /v1/detect"},
  };
  for (auto& k : cases) {
    auto [status, msg] = error_of(k.send());
    EXPECT_EQ(status, k.status) << k.what << ": " << msg;
    EXPECT_TRUE(contains(msg, k.message)) << k.what << ": " << msg;
  }
  EXPECT_EQ(c.Get("/v2/health/ready")->status, 200);
}

TEST_F(ServeHttp, InferRunsTheRawModel) {
  auto c = client();
  int64_t len = 4;
  std::vector<float> img(1 * 3 * 32 * 32, 0.5f);
  json req = {
      {"id", "r1"},
      {"inputs",
       {{{"name", "img"}, {"datatype", "FP32"}, {"shape", {1, 3, 32, 32}}, {"data", img}},
        {{"name", "input_ids"}, {"datatype", "INT64"}, {"shape", {1, len}}, {"data", {2, 10, 5, 3}}},
        {{"name", "attention_mask"},
         {"datatype", "BOOL"},
         {"shape", {1, len}},
         {"data", {true, true, true, true}}},
        {{"name", "position_ids"}, {"datatype", "INT64"}, {"shape", {1, len}}, {"data", {0, 0, 1, 0}}},
        {{"name", "token_type_ids"}, {"datatype", "INT64"}, {"shape", {1, len}}, {"data", {0, 0, 0, 0}}},
        {{"name", "text_token_mask"},
         {"datatype", "BOOL"},
         {"shape", {1, len, len}},
         {"data", {1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1}}}}}};
  auto r = c.Post("/v2/models/demo/infer", req.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body.substr(0, 500);
  json j = json::parse(r->body);
  EXPECT_EQ(j["model_name"], "demo");
  EXPECT_EQ(j["id"], "r1");
  ASSERT_EQ(j["outputs"].size(), 2u);
  const json& logits = j["outputs"][0];
  EXPECT_EQ(logits["name"], "logits");
  EXPECT_EQ(logits["datatype"], "FP32");
  EXPECT_EQ(logits["shape"], json({1, 900, 256}));
  ASSERT_EQ(logits["data"].size(), 900u * 256);
  EXPECT_TRUE(logits["data"][0].is_number());
  EXPECT_LE(logits["data"][len].get<double>(), -1e4) << "the demo model's logit past the caption";

  // The same inputs through the session directly.
  auto detector = test::demo_detector();
  TensorMap inputs = serve::parse_infer_request(req.dump()).inputs;
  Tensor expected = detector->session().run(inputs).at("boxes");
  const json& boxes = j["outputs"][1];
  ASSERT_EQ(boxes["data"].size(), size_t(expected.numel()));
  for (int64_t i = 0; i < expected.numel(); i += 97)
    EXPECT_NEAR(boxes["data"][size_t(i)].get<double>(), expected.data<float>()[i], 1e-6);

  req["outputs"] = {{{"name", "boxes"}}};
  json only = body_json(c.Post("/v2/models/demo/infer", req.dump(), "application/json"));
  ASSERT_EQ(only["outputs"].size(), 1u);
  EXPECT_EQ(only["outputs"][0]["name"], "boxes");
}

TEST_F(ServeHttp, BadTensorsAre400NamingTheInput) {
  auto c = client();
  auto tensor = [](const char* name, const char* dt, Shape shape) {
    int64_t n = shape_numel(shape);
    json data = json::array();
    for (int64_t i = 0; i < n; i++) data.push_back(std::string(dt) == "BOOL" ? json(true) : json(i % 2));
    return json({{"name", name}, {"datatype", dt}, {"shape", shape}, {"data", data}});
  };
  auto request = [&](int64_t batch_ids, const char* img_dt, Shape img_shape, bool with_mask = true) {
    json inputs = {tensor("img", img_dt, img_shape), tensor("input_ids", "INT64", {batch_ids, 3}),
                   tensor("attention_mask", "BOOL", {batch_ids, 3}),
                   tensor("position_ids", "INT64", {batch_ids, 3}),
                   tensor("token_type_ids", "INT64", {batch_ids, 3})};
    if (with_mask) inputs.push_back(tensor("text_token_mask", "BOOL", {batch_ids, 3, 3}));
    return json({{"inputs", inputs}}).dump();
  };
  struct Case {
    const char* what;
    std::string body;
    std::string path;
    int status;
    const char* message;
  };
  std::string infer = "/v2/models/demo/infer";
  std::vector<Case> cases = {
      {"wrong dtype", request(1, "INT64", {1, 3, 32, 32}), infer, 400, "input 'img' is int64[1,3,32,32]"},
      {"wrong rank", request(1, "FP32", {1, 3, 32}), infer, 400, "input 'img' has shape [1,3,32]"},
      {"wrong fixed dim", request(1, "FP32", {1, 4, 32, 32}), infer, 400, "axis 1 must be 3"},
      // A symbol binds nothing across inputs (as in ONNX Runtime): the model itself refuses.
      {"batch mismatch", request(2, "FP32", {1, 3, 32, 32}), infer, 400,
       "the model cannot run on these inputs: node '/fusion/att/"},
      {"missing input", request(1, "FP32", {1, 3, 32, 32}, false), infer, 400,
       "missing input 'text_token_mask'"},
      {"image too small for the model", request(1, "FP32", {1, 3, 0, 5}), infer, 400,
       "the model cannot run on these inputs: node '/backbone/s4/s4.0/s4.0.0/Conv'"},
      {"unknown input", json({{"inputs", {tensor("pixels", "FP32", {1})}}}).dump(), infer, 400,
       "unknown input 'pixels'"},
      {"data count", R"({"inputs":[{"name":"img","datatype":"FP32","shape":[1,3,2,2],"data":[1,2,3]}]})",
       infer, 400, "input 'img': data has 3 elements but shape [1,3,2,2] needs 12"},
      {"shape a string", R"({"inputs":[{"name":"img","datatype":"FP32","shape":"1x3","data":[]}]})", infer,
       400, "shape is JSON string"},
      {"broken JSON", "{\"inputs\": [", infer, 400, "not valid JSON"},
      {"other model", request(1, "FP32", {1, 3, 32, 32}), "/v2/models/big/infer", 404, "unknown model 'big'"},
  };
  for (auto& k : cases) {
    auto [status, msg] = error_of(c.Post(k.path, k.body, "application/json"));
    EXPECT_EQ(status, k.status) << k.what << ": " << msg;
    EXPECT_TRUE(contains(msg, k.message)) << k.what << ": " << msg;
  }
}

TEST_F(ServeHttp, MetricsChangeAfterRequests) {
  auto c = client();
  auto scrape = [&] {
    auto r = c.Get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    EXPECT_TRUE(r && contains(r->get_header_value("Content-Type"), "text/plain"));
    return r ? r->body : "";
  };
  std::string before = scrape();
  const std::string ok = R"(vlrt_requests_total{endpoint="/v1/detect",status="200"})";
  const std::string bad = R"(vlrt_requests_total{endpoint="/v1/detect",status="400"})";
  double ok0 = std::max(0.0, test::metric_value(before, ok)),
         bad0 = std::max(0.0, test::metric_value(before, bad));
  double batches0 = std::max(0.0, test::metric_value(before, "vlrt_batch_size_count"));
  ASSERT_EQ(post_detect(c, test::png_bytes(64, 48), "dog")->status, 200);
  ASSERT_EQ(post_detect(c, "junk", "dog")->status, 400);
  std::string after = scrape();
  EXPECT_EQ(test::metric_value(after, ok), ok0 + 1) << after;
  EXPECT_EQ(test::metric_value(after, bad), bad0 + 1) << after;
  EXPECT_EQ(test::metric_value(after, "vlrt_batch_size_count"), batches0 + 1);
  EXPECT_GT(test::metric_value(after, R"(vlrt_request_duration_seconds_count{endpoint="/v1/detect"})"),
            test::metric_value(before, R"(vlrt_request_duration_seconds_count{endpoint="/v1/detect"})"));
  EXPECT_EQ(test::metric_value(after, "vlrt_queue_duration_seconds_count"),
            std::max(0.0, test::metric_value(before, "vlrt_queue_duration_seconds_count")) + 1);
  EXPECT_EQ(test::metric_value(after, "vlrt_queue_depth"), 0);
  EXPECT_GT(test::metric_value(after, R"(vlrt_memory_planned_bytes{device="cpu"})"), 0) << after;
  EXPECT_GT(test::metric_value(after, R"(vlrt_memory_in_use_bytes{device="cpu"})"), 0) << after;
  EXPECT_GT(test::metric_value(after, R"(vlrt_memory_budget_bytes{device="cpu"})"), 0) << after;
  EXPECT_GT(test::metric_value(after, "process_resident_memory_bytes"), 0);
  EXPECT_TRUE(contains(after, "vlrt_model_info{model=\"demo\",path=\"")) << after;
  EXPECT_TRUE(contains(after, "# TYPE vlrt_request_duration_seconds histogram"));
  EXPECT_TRUE(contains(after, "vlrt_model_load_seconds{model=\"demo\"} "));
}

TEST(ServeBatching, GroupsBySizeAndPromptUpToTheCap) {
  serve::ServeOptions o;
  o.max_queue_delay_ms = 400;  // long enough for every concurrent request to arrive
  test::TestServer s(o);
  // Two image sizes (different model input sizes) x two prompts, four requests each.
  struct Sent {
    int w, h;
    std::string prompt;
    json reply;
  };
  std::vector<Sent> sent;
  for (int size = 0; size < 2; size++)
    for (const char* prompt : {"dog .", "cat ."})
      for (int k = 0; k < 4; k++) sent.push_back({size ? 96 : 64, 64, prompt, {}});
  std::vector<std::thread> threads;
  for (auto& x : sent)
    threads.emplace_back([&s, &x] {
      auto c = s.client();
      x.reply = body_json(post_detect(c, test::png_bytes(x.w, x.h), x.prompt));
    });
  for (auto& t : threads) t.join();
  for (auto& x : sent) EXPECT_EQ(x.reply["batch_size"], 4) << x.w << " " << x.prompt << " " << x.reply.dump();

  serve::ServeOptions capped = o;
  capped.max_batch = 2;
  test::TestServer s2(capped);
  std::vector<json> replies(4);
  threads.clear();
  for (auto& r : replies)
    threads.emplace_back([&s2, &r] {
      auto c = s2.client();
      r = body_json(post_detect(c, test::png_bytes(64, 64), "dog ."));
    });
  for (auto& t : threads) t.join();
  for (auto& r : replies) EXPECT_EQ(r["batch_size"], 2) << r.dump();
}

TEST(ServeOverload, FullQueueIs503AtOnceAndTimeoutIs504) {
  serve::ServeOptions o;
  o.max_queue = 2;
  o.max_queue_delay_ms = 1500;  // the first requests wait for companions that never come
  o.timeout_ms = 800;
  test::TestServer s(o);
  std::string png = test::png_bytes(64, 48);
  std::vector<std::pair<int, std::string>> waiting(2);
  std::vector<std::thread> threads;
  for (auto& w : waiting)
    threads.emplace_back([&] {
      auto c = s.client();
      w = error_of(post_detect(c, png, "dog ."));
    });
  while (s.server->metrics().value("vlrt_queue_depth") < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto c = s.client();
  auto t0 = std::chrono::steady_clock::now();
  auto full = post_detect(c, png, "dog .");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 503);
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  EXPECT_TRUE(contains(error_of(full).second, "the queue is full (2 requests waiting)")) << full->body;
  EXPECT_LT(ms, 500) << "a full queue answers at once";
  for (auto& t : threads) t.join();
  for (auto& [status, msg] : waiting) {
    EXPECT_EQ(status, 504) << msg;
    EXPECT_TRUE(contains(msg, "request timeout of 800 ms")) << msg;
  }
  EXPECT_EQ(s.server->stats().timed_out, 2u);
  EXPECT_EQ(post_detect(c, png, "dog .")->status, 504) << "still answering";
}

TEST(ServeLoadtest, RunsBoundedAndRefusesOtherHosts) {
  test::TestServer s;
  serve::LoadOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(s.port);
  o.image = test::png_bytes(64, 48);
  o.clients = 4;
  o.requests = 5;
  serve::LoadReport r = serve::run_load(o);
  EXPECT_EQ(r.sent, 20);
  EXPECT_EQ(r.statuses[200], 20);
  EXPECT_EQ(r.failed, 0);
  EXPECT_GT(r.throughput(), 0);
  EXPECT_LE(r.percentile(50), r.percentile(99));
  EXPECT_GT(r.rss_after, 0);
  o.url = "http://10.1.2.3:8080";
  EXPECT_THROW(serve::run_load(o), Error);
  o.url = "http://example.com";
  EXPECT_THROW(serve::run_load(o), Error);
  EXPECT_TRUE(serve::is_loopback_host("127.0.0.5"));
  EXPECT_TRUE(serve::is_loopback_host("::1"));
  EXPECT_FALSE(serve::is_loopback_host("128.0.0.1"));
}

// A soak: clients send until the duration ends; each window reports its own responses, latency and
// the server's memory, and the drift from the first to the last. A rate caps what is sent.
TEST(ServeLoadtest, DurationRunsReportWindowsAndRateCapsTheSchedule) {
  test::TestServer s;
  serve::LoadOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(s.port);
  o.image = test::png_bytes(64, 48);
  o.clients = 2;
  o.requests = 1;  // no limit with a duration
  o.duration = 1;
  o.window = 0.5;
  serve::LoadReport r = serve::run_load(o);
  EXPECT_GT(r.sent, 2);
  EXPECT_EQ(r.failed, 0);
  ASSERT_EQ(r.windows.size(), 2u);
  int64_t answered = 0;
  for (auto& w : r.windows) {
    EXPECT_GT(w.statuses[200], 0);
    EXPECT_GT(w.p99_ms, 0);
    EXPECT_GE(w.p99_ms, w.p50_ms);
    EXPECT_GT(w.server_rss, 0);
    answered += w.responses;
  }
  EXPECT_EQ(answered, r.sent);
  EXPECT_EQ(r.windows[1].start_s, 0.5);
  EXPECT_EQ(r.windows[1].end_s, 1);
  serve::SoakDrift d = serve::soak_drift(r);
  ASSERT_TRUE(d.first && d.last);
  EXPECT_EQ(d.last, &r.windows[1]);
  EXPECT_NE(serve::format_report(r).find("drift, window 0-0.5 s to 0.5-1 s: p99 "), std::string::npos);

  o.rate = 10;  // 10 requests due within 1 s
  r = serve::run_load(o);
  EXPECT_LE(r.sent, 10);
  EXPECT_GT(r.sent, 0);
}

}  // namespace vlrt

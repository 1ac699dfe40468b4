// The Triton side of vlrt serve over HTTP: request bodies recorded from tritonclient
// (tools/make_triton_requests.py) with the binary data extension in and out, BYTES inputs
// through the pipeline, statistics, Triton's metric names, the model repository (index,
// load, unload) and its errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "serve/request.h"
#include "serve_util.h"

namespace vlrt {

using nlohmann::json;
using test::body_json;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A repository with the small check model as "base" and a truncated model as "broken".
std::string make_repository() {
  std::string dir = test::temp_dir("triton_repository");
  std::filesystem::create_directories(dir + "/base/1");
  std::filesystem::create_directories(dir + "/broken/1");
  std::filesystem::copy_file(test::source_path("tests/fixtures/check/base.onnx"), dir + "/base/1/model.onnx");
  write_file_atomically(dir + "/base/config.pbtxt", "name: \"base\"\nplatform: \"onnxruntime_onnx\"\n");
  std::string base = read_file(dir + "/base/1/model.onnx");
  write_file_atomically(dir + "/broken/1/model.onnx", base.substr(0, base.size() / 2));
  return dir;
}

class ServeTriton : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve::ServeOptions o;
    o.model_repository = make_repository();
    server_ = new test::TestServer(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  httplib::Client client() { return server_->client(); }
  static test::TestServer* server_;
};
test::TestServer* ServeTriton::server_ = nullptr;

// A recorded body and its Inference-Header-Content-Length.
std::pair<std::string, size_t> recorded(const std::string& name) {
  json sizes = json::parse(read_file(test::source_path("tests/fixtures/serve/requests.json")));
  return {read_file(test::source_path("tests/fixtures/serve/" + name)),
          sizes[name]["json_length"].get<size_t>()};
}

httplib::Result post_binary(httplib::Client& c, const std::string& path, const std::string& body,
                            size_t json_length) {
  return c.Post(path, {{"Inference-Header-Content-Length", std::to_string(json_length)}}, body,
                "application/octet-stream");
}

// A binary response: its JSON header and each output's bytes.
struct BinaryReply {
  json header;
  std::map<std::string, std::string> data;
};

BinaryReply split_reply(const httplib::Result& r) {
  BinaryReply out;
  size_t n = std::stoul(r->get_header_value("Inference-Header-Content-Length"));
  out.header = json::parse(r->body.substr(0, n));
  size_t at = n;
  for (auto& o : out.header["outputs"]) {
    size_t size = o["parameters"]["binary_data_size"].get<size_t>();
    out.data[o["name"]] = r->body.substr(at, size);
    at += size;
  }
  EXPECT_EQ(at, r->body.size());
  return out;
}

std::pair<int, std::string> error_of(const httplib::Result& r) {
  if (!r) return {-1, "no response"};
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("error")) return {r->status, "not a JSON error: " + r->body};
  return {r->status, j["error"].get<std::string>()};
}

double metric(httplib::Client& c, const std::string& series) {
  return test::metric_value(c.Get("/metrics")->body, series);
}

}  // namespace

TEST_F(ServeTriton, BinaryTensorDataInAndOut) {
  auto c = client();
  auto [body, json_length] = recorded("tensor_binary.bin");
  auto r = post_binary(c, "/v2/models/base/infer", body, json_length);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");
  BinaryReply reply = split_reply(r);
  EXPECT_EQ(reply.header["model_name"], "base");
  EXPECT_EQ(reply.header["id"], "t1");
  EXPECT_EQ(reply.header["outputs"][0]["shape"], json({1, 4}));
  EXPECT_EQ(reply.header["outputs"][0]["datatype"], "FP32");
  ASSERT_EQ(reply.data["y"].size(), 16u);

  Session session(load_model(test::source_path("tests/fixtures/check/base.onnx")));
  Tensor expected = session.run(serve::parse_infer_request(body, json_length).inputs).at("y");
  const float* got = reinterpret_cast<const float*>(reply.data["y"].data());
  for (int i = 0; i < 4; i++) EXPECT_EQ(got[i], expected.data<float>()[i]) << i;

  // The same request with the output asked for as JSON: no binary part.
  json header = json::parse(body.substr(0, json_length));
  header["outputs"][0]["parameters"]["binary_data"] = false;
  std::string h = header.dump();
  auto plain = post_binary(c, "/v2/models/base/infer", h + body.substr(json_length), h.size());
  ASSERT_EQ(plain->status, 200) << plain->body;
  EXPECT_FALSE(plain->has_header("Inference-Header-Content-Length"));
  EXPECT_NEAR(json::parse(plain->body)["outputs"][0]["data"][3].get<double>(), expected.data<float>()[3],
              1e-6);
}

TEST_F(ServeTriton, BytesImageAndPromptGoThroughThePipeline) {
  auto c = client();
  auto [body, json_length] = recorded("detect_bytes.bin");
  auto r = post_binary(c, "/v2/models/demo/infer", body, json_length);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  BinaryReply reply = split_reply(r);
  EXPECT_EQ(reply.header["id"], "d1");

  serve::InferRequest request = serve::parse_infer_request(body, json_length);
  const std::string& image_bytes = request.bytes_inputs.at("image").elements[0];
  const std::string& prompt = request.bytes_inputs.at("prompt").elements[0];
  auto detector = test::demo_detector();
  vision::Image img = vision::decode_image(image_bytes, "image");
  auto expected = detector->detect({&img}, detector->encode(prompt))[0];
  ASSERT_GT(expected.size(), 0u);
  size_t n = expected.size();
  ASSERT_EQ(reply.data["scores"].size(), 4 * n);
  ASSERT_EQ(reply.data["boxes"].size(), 16 * n);
  const float* scores = reinterpret_cast<const float*>(reply.data["scores"].data());
  const float* boxes = reinterpret_cast<const float*>(reply.data["boxes"].data());
  const std::string& labels = reply.data["labels"];
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    EXPECT_NEAR(scores[i], expected[i].score, 1e-5);
    EXPECT_NEAR(boxes[4 * i], expected[i].x1, 0.01);
    EXPECT_NEAR(boxes[4 * i + 3], expected[i].y2, 0.01);
    uint32_t len = 0;
    std::memcpy(&len, labels.data() + at, 4);
    EXPECT_EQ(labels.substr(at + 4, len), expected[i].label);
    at += 4 + len;
  }
  EXPECT_EQ(at, labels.size());

  // The prompt as JSON, the image as binary data, outputs as JSON, a threshold as a parameter.
  std::string len(4, '\0');
  uint32_t size = uint32_t(image_bytes.size());
  std::memcpy(len.data(), &size, 4);
  json j = {{"inputs",
             {{{"name", "prompt"}, {"shape", {1}}, {"datatype", "BYTES"}, {"data", {prompt}}},
              {{"name", "image"},
               {"shape", {1}},
               {"datatype", "BYTES"},
               {"parameters", {{"binary_data_size", image_bytes.size() + 4}}}}}},
            {"parameters", {{"box_threshold", 0.99}}}};
  std::string h = j.dump();
  auto strict = post_binary(c, "/v2/models/demo/infer", h + len + image_bytes, h.size());
  ASSERT_EQ(strict->status, 200) << strict->body;
  json out = json::parse(strict->body);
  EXPECT_EQ(out["outputs"][2]["name"], "labels");
  EXPECT_EQ(out["outputs"][2]["datatype"], "BYTES");
  EXPECT_LT(out["outputs"][1]["shape"][0].get<int>(), int(n)) << "box_threshold 0.99 keeps fewer";
}

TEST_F(ServeTriton, BadBinaryRequestsAreNamed400s) {
  auto c = client();
  auto [body, json_length] = recorded("tensor_binary.bin");
  auto expect = [&](const httplib::Result& r, int status, const std::string& part) {
    auto [s, msg] = error_of(r);
    EXPECT_EQ(s, status) << msg;
    EXPECT_TRUE(contains(msg, part)) << msg;
  };
  expect(post_binary(c, "/v2/models/base/infer", body, body.size() + 1), 400,
         "Inference-Header-Content-Length is 1194 but the body has only 1193 bytes");
  expect(post_binary(c, "/v2/models/base/infer", body.substr(0, body.size() - 4), json_length), 400,
         "binary_data_size 1024 runs past the end of the body");
  expect(post_binary(c, "/v2/models/base/infer", body + "xx", json_length), 400,
         "2 bytes after the JSON header that no input's binary_data_size accounts for");
  json header = json::parse(body.substr(0, json_length));
  header["inputs"][0]["shape"] = {1, 4, 8, 4};
  std::string h = header.dump();
  expect(post_binary(c, "/v2/models/base/infer", h + body.substr(json_length), h.size()), 400,
         "binary_data_size is 1024 bytes but shape [1,4,8,4] of FP32 needs 512");
  c.set_default_headers({});
  auto bad_header = c.Post("/v2/models/base/infer", {{"Inference-Header-Content-Length", "-3"}}, body,
                           "application/octet-stream");
  expect(bad_header, 400, "expected the JSON header's size in bytes");
  expect(c.Post("/v2/models/base/infer",
                R"({"inputs":[{"name":"image","shape":[1],"datatype":"BYTES","data":["x"]}]})",
                "application/json"),
         400, "model 'base' takes tensors; BYTES inputs ('image') are for the pipeline's model 'demo'");
  expect(c.Post("/v2/models/demo/infer",
                R"({"inputs":[{"name":"image","shape":[2],"datatype":"BYTES","data":["x","y"]}]})",
                "application/json"),
         400, "input 'image' has 2 elements");
}

TEST_F(ServeTriton, ServerMetadataConfigAndStatistics) {
  auto c = client();
  json server = body_json(c.Get("/v2"));
  EXPECT_EQ(server["extensions"],
            json({"binary_tensor_data", "statistics", "model_configuration", "model_repository"}));
  json config = body_json(c.Get("/v2/models/base/config"));
  EXPECT_EQ(config["name"], "base");
  EXPECT_EQ(config["max_batch_size"], 0);
  EXPECT_EQ(config["input"][0], json({{"name", "x"}, {"data_type", "TYPE_FP32"}, {"dims", {1, 4, 8, 8}}}));
  EXPECT_EQ(body_json(c.Get("/v2/models/base/versions/1"))["versions"], json({"1"}));
  EXPECT_EQ(c.Get("/v2/models/base/versions/2")->status, 404);

  auto stats = [&] { return body_json(c.Get("/v2/models/base/stats"))["model_stats"][0]; };
  json before = stats();
  EXPECT_EQ(before["name"], "base");
  std::string series = "{model=\"base\",version=\"1\"}";
  double success = metric(c, "nv_inference_request_success" + series);
  double failure = metric(c, "nv_inference_request_failure" + series);
  double exec = metric(c, "nv_inference_exec_count" + series);
  double compute_us = metric(c, "nv_inference_compute_infer_duration_us" + series);
  ASSERT_GE(success, 0) << "the series shows from the model's load on";

  auto [body, json_length] = recorded("tensor_binary.bin");
  ASSERT_EQ(post_binary(c, "/v2/models/base/infer", body, json_length)->status, 200);
  ASSERT_EQ(c.Post("/v2/models/base/infer", R"({"inputs":[]})", "application/json")->status, 400);

  json after = stats();
  auto count = [](const json& s, const char* k) { return s["inference_stats"][k]["count"].get<uint64_t>(); };
  EXPECT_EQ(count(after, "success"), count(before, "success") + 1);
  EXPECT_EQ(count(after, "fail"), count(before, "fail") + 1);
  EXPECT_EQ(count(after, "queue"), count(before, "queue") + 1);
  EXPECT_EQ(count(after, "compute_infer"), count(before, "compute_infer") + 1);
  EXPECT_GT(after["inference_stats"]["compute_infer"]["ns"].get<uint64_t>(),
            before["inference_stats"]["compute_infer"]["ns"].get<uint64_t>());
  EXPECT_EQ(after["execution_count"].get<uint64_t>(), before["execution_count"].get<uint64_t>() + 1);
  EXPECT_GT(after["last_inference"].get<uint64_t>(), 0u);
  EXPECT_EQ(metric(c, "nv_inference_request_success" + series), success + 1);
  EXPECT_EQ(metric(c, "nv_inference_request_failure" + series), failure + 1);
  EXPECT_EQ(metric(c, "nv_inference_exec_count" + series), exec + 1);
  EXPECT_GT(metric(c, "nv_inference_compute_infer_duration_us" + series), compute_us);
  EXPECT_GE(metric(c, "nv_inference_count{model=\"demo\",version=\"1\"}"), 0);

  json all = body_json(c.Get("/v2/models/stats"))["model_stats"];
  ASSERT_EQ(all.size(), 2u);  // base and demo; broken did not load
  EXPECT_EQ(error_of(c.Get("/v2/models/nothing/stats")).first, 404);
}

TEST_F(ServeTriton, RepositoryIndexLoadUnload) {
  auto c = client();
  json index = body_json(c.Post("/v2/repository/index", "", "application/json"));
  ASSERT_EQ(index.size(), 2u) << index.dump();
  EXPECT_EQ(index[0], json({{"name", "base"}, {"version", "1"}, {"state", "READY"}}));
  EXPECT_EQ(index[1]["name"], "broken");
  EXPECT_EQ(index[1]["state"], "UNAVAILABLE");
  EXPECT_TRUE(contains(index[1]["reason"].get<std::string>(), "broken/1/model.onnx")) << index[1];

  auto [status, msg] = error_of(c.Post("/v2/repository/models/broken/load", "{}", "application/json"));
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(contains(msg, "model 'broken' failed to load from ") && contains(msg, "broken/1/model.onnx"))
      << msg;
  std::tie(status, msg) = error_of(c.Post("/v2/repository/models/nothing/load", "{}", "application/json"));
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(contains(msg, "no model 'nothing' in the repository") && contains(msg, "it has base, broken"))
      << msg;
  std::tie(status, msg) = error_of(c.Post("/v2/repository/models/demo/unload", "{}", "application/json"));
  EXPECT_EQ(status, 400);

  ASSERT_EQ(c.Post("/v2/repository/models/base/unload", R"({"parameters":{"unload_dependents":false}})",
                   "application/json")
                ->status,
            200);
  EXPECT_EQ(c.Get("/v2/models/base/ready")->status, 503);
  std::tie(status, msg) = error_of(c.Post("/v2/models/base/infer", R"({"inputs":[]})", "application/json"));
  EXPECT_EQ(status, 400);
  EXPECT_TRUE(contains(msg, "model 'base' is not loaded (unloaded)")) << msg;
  EXPECT_EQ(body_json(c.Post("/v2/repository/index", "", "application/json"))[0]["state"], "UNAVAILABLE");

  ASSERT_EQ(c.Post("/v2/repository/models/base/load", "{}", "application/json")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/base/ready")->status, 200);
  auto [body, json_length] = recorded("tensor_binary.bin");
  EXPECT_EQ(post_binary(c, "/v2/models/base/infer", body, json_length)->status, 200);
}

TEST(ServeTritonRepository, ConfigOfAnotherNameIsRefusedNamingTheFile) {
  std::string dir = test::temp_dir("triton_misnamed");
  std::filesystem::create_directories(dir + "/m/1");
  std::filesystem::copy_file(test::source_path("tests/fixtures/check/base.onnx"), dir + "/m/1/model.onnx");
  write_file_atomically(dir + "/m/config.pbtxt", "name: \"other\"\n");
  serve::ModelRepository repo(dir, {});
  try {
    repo.load("m");
    FAIL() << "loaded";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_TRUE(contains(e.what(), "m/config.pbtxt names the model 'other' but its folder is 'm'"))
        << e.what();
  }
  EXPECT_THROW(serve::ModelRepository(dir + "/absent", {}), Error);
}

}  // namespace vlrt

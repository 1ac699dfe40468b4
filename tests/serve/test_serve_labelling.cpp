// The labelling tools' protocols on a server for the demo model: request bodies recorded as the
// tools send them (tests/fixtures/serve/labelling, tools/make_labelling_requests.py) are
// answered with the demo image's boxes, the ones /v1/detect gives for the same prompt.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>

#include "serve/label_studio.h"
#include "serve_util.h"

namespace vlrt {

namespace {

using nlohmann::json;

std::string demo_data_uri() { return "data:image/png;base64," + base64_encode(test::demo_png()); }

// A fixture with the demo image put in place of its placeholder.
json request_fixture(const std::string& name) {
  std::string text = read_file(test::source_path("tests/fixtures/serve/labelling/" + name));
  const std::string placeholder = "{DEMO_PNG_DATA_URI}";
  for (size_t at; (at = text.find(placeholder)) != std::string::npos;)
    text.replace(at, placeholder.size(), demo_data_uri());
  return json::parse(text);
}

class ServeLabelling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new test::TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  httplib::Client client() { return server_->client(); }
  json post(const std::string& path, const json& body, int expected_status = 200) {
    auto c = client();
    auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, expected_status) << r->body;
    return json::parse(r->body);
  }
  // /v1/detect's detections of the demo image for PROMPT at box threshold BOX (none: the model's).
  json detect(const std::string& prompt, std::optional<double> box = {}) {
    json body = {{"image", base64_encode(test::demo_png())}, {"prompt", prompt}};
    if (box) body["box_threshold"] = *box;
    return post("/v1/detect", body)["detections"];
  }
  static test::TestServer* server_;
};

test::TestServer* ServeLabelling::server_ = nullptr;

TEST_F(ServeLabelling, XAnyLabelingListsTheServedModel) {
  auto c = client();
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["success"], true);
  ASSERT_TRUE(j["data"].contains("demo")) << j;
  const json& m = j["data"]["demo"];
  EXPECT_TRUE(m["display_name"].is_string());
  std::set<std::string> widgets;
  for (auto& w : m["widgets"]) widgets.insert(w["name"].get<std::string>());
  EXPECT_TRUE(widgets.count("edit_text") && widgets.count("button_send") && widgets.count("edit_conf")) << m;
  EXPECT_TRUE(m["params"]["box_threshold"].is_number()) << m;
}

TEST_F(ServeLabelling, XAnyLabelingPredictGivesTheDetectionsAsRectangles) {
  json request = request_fixture("xanylabeling_predict.json");
  json j = post("/v1/predict", request);
  ASSERT_EQ(j["success"], true) << j;
  const json& shapes = j["data"]["shapes"];
  json expected = detect(request["params"]["text_prompt"], request["params"]["conf_threshold"]);
  ASSERT_GE(expected.size(), 4u);
  ASSERT_EQ(shapes.size(), expected.size());
  for (size_t i = 0; i < shapes.size(); i++) {
    const json& s = shapes[i];
    const json& b = expected[i]["box"];
    EXPECT_EQ(s["shape_type"], "rectangle");
    EXPECT_EQ(s["label"], expected[i]["label"]);
    EXPECT_NEAR(s["score"].get<double>(), expected[i]["score"].get<double>(), 1e-5);  // /v1/detect rounds
    // clockwise from the top left: (x1,y1) (x2,y1) (x2,y2) (x1,y2)
    json points = {{b[0], b[1]}, {b[2], b[1]}, {b[2], b[3]}, {b[0], b[3]}};
    ASSERT_EQ(s["points"].size(), 4u);
    for (size_t p = 0; p < 4; p++)
      for (size_t k = 0; k < 2; k++)
        EXPECT_NEAR(s["points"][p][k].get<double>(), points[p][k].get<double>(), 0.01) << i << " " << p;
  }
  // the demo's objects are among them
  json demo = json::parse(read_file(test::source_path("assets/demo.json")));
  for (auto& object : demo["objects"]) {
    bool found = false;
    for (auto& s : shapes) found = found || s["label"] == object["label"];
    EXPECT_TRUE(found) << object["label"];
  }
}

TEST_F(ServeLabelling, XAnyLabelingErrorsAreProtocolFailures) {
  json request = request_fixture("xanylabeling_predict.json");
  auto failure = [&](json body) {
    json j = post("/v1/predict", body);
    EXPECT_EQ(j["success"], false) << j;
    return std::pair{j["error"]["code"].get<std::string>(), j["error"]["message"].get<std::string>()};
  };
  json other = request;
  other["model"] = "yolo11n";
  auto [code, msg] = failure(other);
  EXPECT_EQ(code, "MODEL_NOT_FOUND");
  EXPECT_NE(msg.find("this server serves 'demo'"), std::string::npos) << msg;

  json bad_uri = request;
  bad_uri["image"] = "data:image/png;base64,***";
  std::tie(code, msg) = failure(bad_uri);
  EXPECT_EQ(code, "INVALID_IMAGE");
  EXPECT_NE(msg.find("'image' is not valid base64"), std::string::npos) << msg;

  json not_image = request;
  not_image["image"] = "data:image/png;base64," + base64_encode("hello, not a picture");
  std::tie(code, msg) = failure(not_image);
  EXPECT_EQ(code, "INVALID_IMAGE");
  EXPECT_NE(msg.find("not an image"), std::string::npos) << msg;

  json no_prompt = request;
  no_prompt["params"].erase("text_prompt");
  std::tie(code, msg) = failure(no_prompt);
  EXPECT_EQ(code, "INVALID_PARAMS");
  EXPECT_NE(msg.find("--ls-prompt"), std::string::npos) << msg;

  json bad_conf = request;
  bad_conf["params"]["conf_threshold"] = 2;
  std::tie(code, msg) = failure(bad_conf);
  EXPECT_EQ(code, "INVALID_PARAMS");
  EXPECT_NE(msg.find("params.conf_threshold is 2"), std::string::npos) << msg;

  auto c = client();
  auto r = c.Post("/v1/predict", "{not json", "application/json");
  ASSERT_TRUE(r);
  json j = json::parse(r->body);
  EXPECT_EQ(j["success"], false);
  EXPECT_EQ(j["error"]["code"], "INVALID_REQUEST");
}

TEST_F(ServeLabelling, LabelStudioHealthAndSetup) {
  auto c = client();
  for (const char* path : {"/health", "/"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["status"], "UP") << path;
  }
  json j = post("/setup", request_fixture("label_studio_setup.json"));
  EXPECT_EQ(j["model_version"], "demo");
}

// Regions in percent of the image, labelled with the config's label values (title case in the
// config, lower case in the model's phrases), the prompt made of those values.
TEST_F(ServeLabelling, LabelStudioPredictGivesRectangleLabelsInPercent) {
  json request = request_fixture("label_studio_predict.json");
  json j = post("/predict", request);
  ASSERT_EQ(j["results"].size(), 1u) << j;
  const json& prediction = j["results"][0];
  EXPECT_EQ(prediction["model_version"], "demo");
  EXPECT_FALSE(prediction.contains("error")) << prediction;
  const json& regions = prediction["result"];
  json demo = json::parse(read_file(test::source_path("assets/demo.json")));
  double width = demo["width"], height = demo["height"];
  json expected = detect(demo["prompt"]);
  ASSERT_GE(expected.size(), 4u);
  ASSERT_EQ(regions.size(), expected.size()) << regions;
  double total = 0, tolerance = 0.005;  // /v1/detect's boxes are rounded to 0.01 px
  for (size_t i = 0; i < regions.size(); i++) {
    const json& r = regions[i];
    const json& box = expected[i]["box"];
    EXPECT_EQ(r["type"], "rectanglelabels");
    EXPECT_EQ(r["from_name"], "label");
    EXPECT_EQ(r["to_name"], "image");
    EXPECT_EQ(r["original_width"], width);
    EXPECT_EQ(r["original_height"], height);
    const json& v = r["value"];
    std::string phrase = expected[i]["label"];
    std::string title = phrase;
    for (size_t k = 0; k < title.size(); k++)
      if (k == 0 || title[k - 1] == ' ') title[k] = char(std::toupper(title[k]));
    EXPECT_EQ(v["rectanglelabels"], json::array({title}));
    EXPECT_EQ(v["rotation"], 0);
    EXPECT_NEAR(v["x"].get<double>(), 100 * box[0].get<double>() / width, tolerance);
    EXPECT_NEAR(v["y"].get<double>(), 100 * box[1].get<double>() / height, tolerance);
    EXPECT_NEAR(v["width"].get<double>(), 100 * (box[2].get<double>() - box[0].get<double>()) / width,
                tolerance);
    EXPECT_NEAR(v["height"].get<double>(), 100 * (box[3].get<double>() - box[1].get<double>()) / height,
                tolerance);
    EXPECT_NEAR(r["score"].get<double>(), expected[i]["score"].get<double>(), 1e-5);
    total += r["score"].get<double>();
  }
  EXPECT_NEAR(prediction["score"].get<double>(), total / double(regions.size()), 1e-6);
}

TEST(ServeLabelConfig, ReadsTheRectangleLabelsAndTheirImage) {
  serve::LabelConfig config = serve::parse_label_config(
      "<View><!-- <RectangleLabels name=\"old\"> --><Header value=\"Boxes &amp; labels\"/>"
      "<Image name='photo' value='$url'/><RectangleLabels name=\"boxes\" toName=\"photo\">"
      "<Label value=\"Cat &amp; Dog\"/><Label value='Car'/></RectangleLabels>"
      "<PolygonLabels name=\"poly\" toName=\"photo\"><Label value=\"Road\"/></PolygonLabels></View>");
  EXPECT_EQ(config.from_name, "boxes");
  EXPECT_EQ(config.to_name, "photo");
  EXPECT_EQ(config.image_key, "url");
  EXPECT_EQ(config.labels, (std::vector<std::string>{"Cat & Dog", "Car"}));
}

TEST_F(ServeLabelling, LabelStudioErrors) {
  json request = request_fixture("label_studio_predict.json");
  auto error = [&](const std::string& path, const json& body) {
    json j = post(path, body, 400);
    return j["error"].get<std::string>();
  };
  json no_tasks = request;
  no_tasks.erase("tasks");
  std::string msg = error("/predict", no_tasks);
  EXPECT_NE(msg.find("missing field 'tasks'"), std::string::npos) << msg;

  json setup = request_fixture("label_studio_setup.json");
  setup["schema"] =
      "<View><Image name=\"image\" value=\"$image\"/><Choices name=\"c\" toName=\"image\">"
      "<Choice value=\"A\"/></Choices></View>";
  msg = error("/setup", setup);
  EXPECT_NE(msg.find("the label config has no <RectangleLabels>"), std::string::npos) << msg;
  json no_rectangles = request;
  no_rectangles["label_config"] = setup["schema"];
  msg = error("/predict", no_rectangles);
  EXPECT_NE(msg.find("no <RectangleLabels>"), std::string::npos) << msg;

  // A task whose image cannot be had gets its error; the others their regions. (A project set up
  // without Label Studio's address: /data/ URLs cannot be downloaded.)
  json project = request_fixture("label_studio_setup.json");
  project["hostname"] = "";
  post("/setup", project);
  json tasks = request;
  json good = request["tasks"][0];
  json bad_uri = good, missing_file = good, served = good, no_image = good;
  bad_uri["data"]["image"] = "data:image/png;base64,@@";
  missing_file["data"]["image"] = "/tmp/nowhere.png";
  served["data"]["image"] = "/data/upload/1/demo.png";
  no_image["data"].erase("image");
  tasks["tasks"] = {bad_uri, good, missing_file, served, no_image};
  json j = post("/predict", tasks);
  ASSERT_EQ(j["results"].size(), 5u);
  auto task_error = [&](size_t i) { return j["results"][i].value("error", std::string()); };
  EXPECT_NE(task_error(0).find("the image data URI is not valid base64"), std::string::npos) << task_error(0);
  EXPECT_EQ(task_error(1), "");
  EXPECT_GE(j["results"][1]["result"].size(), 4u);
  EXPECT_NE(task_error(2).find("--ls-root"), std::string::npos) << task_error(2);
  EXPECT_NE(task_error(3).find("--ls-url"), std::string::npos) << task_error(3);
  EXPECT_NE(task_error(4).find("the task has no data.image"), std::string::npos) << task_error(4);
  for (size_t i : {0, 2, 3, 4}) EXPECT_TRUE(j["results"][i]["result"].empty()) << i;
}

// Files named by tasks are read under --ls-root only: an upload path, a plain relative path, and
// nothing outside it.
TEST(ServeLabellingFiles, TasksNameFilesUnderTheRoot) {
  std::string root = testing::TempDir() + "vlrt_ls_root";
  std::filesystem::create_directories(root + "/upload/1");
  write_file_atomically(root + "/upload/1/demo.png", test::demo_png());
  serve::ServeOptions o;
  o.labelling.ls_root = root;
  o.labelling.prompt = "yellow heart . black ring .";
  test::TestServer server(o);
  auto c = server.client();
  json request = request_fixture("label_studio_predict.json");
  json task = request["tasks"][0];
  json upload = task, relative = task, outside = task;
  upload["data"]["image"] = "/data/upload/1/demo.png";
  relative["data"]["image"] = "upload/1/demo.png";
  outside["data"]["image"] = "../../etc/passwd";
  request["tasks"] = {upload, relative, outside};
  auto r = c.Post("/predict", request.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  for (size_t i : {0, 1}) {
    std::set<std::string> labels;
    for (auto& region : j["results"][i]["result"]) labels.insert(region["value"]["rectanglelabels"][0]);
    EXPECT_EQ(labels, (std::set<std::string>{"Yellow Heart", "Black Ring"})) << j["results"][i];
  }
  std::string err = j["results"][2].value("error", "");
  EXPECT_NE(err.find("is outside --ls-root"), std::string::npos) << err;
  std::filesystem::remove_all(root);
}

}  // namespace

}  // namespace vlrt

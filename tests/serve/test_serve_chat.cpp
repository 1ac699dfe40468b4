// `vlrt serve` for a VLM folder: OpenAI's chat API on the tiny Qwen2-VL fixture, checked
// against transformers' greedy tokens (tests/fixtures/vlm/qwen2-vl/reference.json).
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "io/base64.h"
#include "io/files.h"
#include "serve/server.h"
#include "serve_util.h"

namespace vlrt::test {
namespace {

using nlohmann::json;

std::string fixture(const std::string& name) {
  return std::string(VLRT_SOURCE_DIR) + "/tests/fixtures/vlm/qwen2-vl/" + name;
}

const json& reference() {
  static const json r = json::parse(read_file(fixture("reference.json")));
  return r;
}

std::string data_uri(const std::string& file) {
  return "data:image/png;base64," + base64_encode(read_file(fixture(file)));
}

// One server for the suite: loading the folder is the slow part.
TestServer& chat_server() {
  static TestServer s = [] {
    serve::ServeOptions o;
    o.model_name = "tiny-vl";
    return TestServer(
        std::make_unique<serve::Server>(std::make_unique<vlm::Chat>(fixture(""), vlm::ChatOptions{}),
                                        fixture(""), on_any_port(o), 0.01),
        30);
  }();
  return s;
}

// The first reference sample (one image and a question) as a request body.
json sample_request(const json& sample) {
  json content = json::array();
  for (auto& i : sample["images"])
    content.push_back({{"type", "image_url"},
                       {"image_url", {{"url", data_uri(reference()["images"][i.get<size_t>()]["file"])}}}});
  content.push_back({{"type", "text"}, {"text", sample["prompt"]}});
  return {{"model", "tiny-vl"}, {"messages", {{{"role", "user"}, {"content", content}}}}, {"temperature", 0}};
}

// The reference's greedy tokens as text, special tokens left out as the answer leaves them.
std::string reference_text(const json& sample) {
  static const text::ByteLevelBpe tokenizer = text::ByteLevelBpe::load(fixture("tokenizer.json"));
  return tokenizer.decode(sample["generated"].get<std::vector<int64_t>>(), true);
}

TEST(ServeChat, AnswerIsTheReferenceGreedyText) {
  const json& sample = reference()["samples"][0];
  auto res =
      chat_server().client().Post("/v1/chat/completions", sample_request(sample).dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json j = json::parse(res->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "tiny-vl");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], reference_text(sample));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");  // 20 tokens, generation_config's max_new_tokens
  EXPECT_EQ(j["usage"]["prompt_tokens"], sample["input_ids"].size());
  EXPECT_EQ(j["usage"]["completion_tokens"], 20);
  EXPECT_EQ(j["usage"]["total_tokens"], sample["input_ids"].size() + 20);
}

TEST(ServeChat, StreamedChunksConcatenateToTheAnswer) {
  const json& sample = reference()["samples"][6];  // two images
  json body = sample_request(sample);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto res = chat_server().client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  std::string text, finish;
  int chunks = 0;
  bool done = false, usage = false;
  size_t pos = 0;
  while (pos < res->body.size()) {
    size_t end = res->body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos) << "an event without its blank line";
    std::string event = res->body.substr(pos, end - pos);
    pos = end + 2;
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << event;
    std::string data = event.substr(6);
    if (data == "[DONE]") {
      done = true;
      EXPECT_EQ(pos, res->body.size()) << "events after [DONE]";
      continue;
    }
    json chunk = json::parse(data);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    if (chunk.contains("usage")) {
      usage = true;
      EXPECT_EQ(chunk["usage"]["completion_tokens"], 20);
      continue;
    }
    chunks++;
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(usage);
  EXPECT_GT(chunks, 2);
  EXPECT_EQ(text, reference_text(sample));
  EXPECT_EQ(finish, "length");
}

TEST(ServeChat, ModelsListsTheServedModel) {
  auto res = chat_server().client().Get("/v1/models");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json j = json::parse(res->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "tiny-vl");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["owned_by"], "vlrt");
  EXPECT_EQ(chat_server().client().Get("/v2/health/ready")->status, 200);
}

TEST(ServeChat, MaxTokensStopsTheAnswer) {
  json body = sample_request(reference()["samples"][0]);
  body["max_tokens"] = 3;
  auto res = chat_server().client().Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json j = json::parse(res->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

// Each malformed request is answered 400 with a message naming what is wrong.
TEST(ServeChat, MalformedRequestsAre400NamingTheField) {
  json good = sample_request(reference()["samples"][0]);
  auto with = [&](const std::function<void(json&)>& change) {
    json b = good;
    change(b);
    return b.dump();
  };
  std::string long_text;
  for (int i = 0; i < 3000; i++)
    long_text += "word" + std::to_string(i) + " ";  // past the 2048-token context
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "JSON"},
      {with([](json& b) { b.erase("messages"); }), "messages"},
      {with([](json& b) { b["messages"] = json::array(); }), "messages"},
      {with([](json& b) { b["messages"][0]["role"] = "robot"; }), "messages[0].role"},
      {with([](json& b) { b["messages"][0]["content"] = 5; }), "messages[0].content"},
      {with([](json& b) { b["messages"][0]["content"][0]["type"] = "audio"; }),
       "messages[0].content[0].type"},
      {with(
           [](json& b) { b["messages"][0]["content"][0]["image_url"]["url"] = "https://example.com/a.png"; }),
       "fetches nothing"},
      {with(
           [](json& b) { b["messages"][0]["content"][0]["image_url"]["url"] = "data:image/png;base64,@@@"; }),
       "messages[0].content[0].image_url.url"},
      {with([](json& b) {
         b["messages"][0]["content"][0]["image_url"]["url"] =
             "data:image/png;base64," + base64_encode("not an image");
       }),
       "messages[0].content[0].image_url.url"},
      {with([&](json& b) { b["messages"][0]["content"][1]["text"] = long_text; }), "context"},
      {with([](json& b) { b["temperature"] = -1; }), "temperature"},
      {with([](json& b) { b["temperature"] = "hot"; }), "temperature"},
      {with([](json& b) { b["top_p"] = 0; }), "top_p"},
      {with([](json& b) { b["max_tokens"] = 0; }), "max_tokens"},
      {with([](json& b) { b["n"] = 2; }), "'n'"},
      {with([](json& b) { b["stream"] = "yes"; }), "stream"},
      {with([](json& b) { b["stop"] = "two words"; }), "stop"},
  };
  for (auto& [body, named] : cases) {
    auto res = chat_server().client().Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << named << ": " << res->body;
    EXPECT_NE(json::parse(res->body)["error"]["message"].get<std::string>().find(named), std::string::npos)
        << named << ": " << res->body;
  }
}

}  // namespace
}  // namespace vlrt::test

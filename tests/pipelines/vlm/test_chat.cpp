// vlrt chat on the committed tiny Qwen2-VL and Qwen2.5-VL folders: transformers' greedy tokens
// under every placement, the KV cache as planned, and each bad input refused with a message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/files.h"
#include "load/onnx_loader.h"
#include "load/onnx_writer.h"
#include "pipelines/vlm/chat.h"

namespace vlrt::vlm {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::run_cli;
using test::source_path;

std::string fixture(const std::string& variant) { return source_path("tests/fixtures/vlm/" + variant); }

nlohmann::json reference(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/reference.json")); }

struct Turn {
  std::vector<text::ChatMessage> messages;
  std::vector<vision::Image> images;
};

// A reference sample as one user message: its images, then its prompt.
Turn turn_of(const std::string& dir, const nlohmann::json& ref, const nlohmann::json& sample) {
  Turn t;
  text::ChatMessage user{"user", {}};
  for (int i : sample.at("images")) {
    t.images.push_back(vision::load_image(dir + "/" + ref.at("images").at(size_t(i)).at("file").get<std::string>()));
    user.content.push_back({text::ChatPart::Kind::kImage, ""});
  }
  user.content.push_back({text::ChatPart::Kind::kText, sample.at("prompt").get<std::string>()});
  t.messages.push_back(user);
  return t;
}

ChatOptions on(const std::string& vision_devices, const std::vector<Device>& text_devices,
               std::map<std::string, size_t> caps = {}, int64_t context = 0) {
  ChatOptions o;
  o.vision.threads = o.text.threads = 1;  // tiny models: no thread pool to wake for every node
  o.vision.plan.devices = {parse_device(vision_devices)};
  o.text.plan.devices = text_devices;
  o.text.plan.memory_caps = std::move(caps);
  o.context = context;
  return o;
}

// Every sample's greedy tokens equal transformers' generate(); transfers run as planned.
void expect_reference_tokens(const std::string& variant, const ChatOptions& options, bool expect_split = false) {
  std::string dir = fixture(variant);
  nlohmann::json ref = reference(dir);
  Chat chat(dir, options);
  GenerateOptions g;
  g.max_new_tokens = ref.at("max_new_tokens").get<int64_t>();
  for (auto& sample : ref.at("samples")) {
    Turn t = turn_of(dir, ref, sample);
    Answer a = chat.generate(t.messages, t.images, g);
    EXPECT_EQ(a.tokens, sample.at("generated").get<std::vector<int64_t>>()) << variant << ": " << sample.at("prompt");
    EXPECT_EQ(a.stats.prompt_tokens, int64_t(sample.at("input_ids").size()));
    EXPECT_EQ(a.stats.transfers_planned, a.stats.transfers_executed);
    if (expect_split) {
      EXPECT_EQ(a.stats.placement.at("decoder").size(), 2u) << "the decoder is split over two devices";
    }
  }
}

TEST(VlmChat, GreedyTokensEqualTransformersOnCpu) {
  for (const char* variant : {"qwen2-vl", "qwen2.5-vl"}) expect_reference_tokens(variant, on("cpu", {Device{}}));
}

TEST(VlmChat, VisionOnAnotherDeviceAndDecoderSplitByACap) {
  Device cpu1 = parse_device("cpu:1");
  for (const char* variant : {"qwen2-vl", "qwen2.5-vl"}) {
    expect_reference_tokens(variant, on("cpu:1", {Device{}}));
    // A cap of 60% of what the decoder and its cache need on one device (less with the reference
    // kernels, which prepare nothing) splits it.
    CacheDevice whole = Chat(fixture(variant), on("cpu", {Device{}}, {}, 160)).plan_cache(1, 160).devices.at(0);
    size_t cap = (whole.cache_bytes + whole.decoder_bytes) * 6 / 10;
    expect_reference_tokens(variant, on("cpu:1", {Device{}, cpu1}, {{"cpu", cap}}, 160), true);
  }
}

TEST(VlmChat, KvCacheAllocatedAsPlanned) {
  std::string dir = fixture("qwen2-vl");
  nlohmann::json ref = reference(dir);
  for (int64_t context : {64, 512}) {
    Chat chat(dir, on("cpu", {Device{}}, {}, context));
    CachePlan plan = chat.plan_cache(1, context);
    ASSERT_EQ(plan.devices.size(), 1u);
    // 2 layers x (key + value) x 2 KV heads x 8 dims x 4 bytes per token.
    EXPECT_EQ(plan.bytes_per_token, size_t(2 * 2 * 2 * 8 * 4));
    EXPECT_EQ(plan.devices[0].cache_bytes, plan.bytes_per_token * size_t(context));
    Turn t = turn_of(dir, ref, ref.at("samples").at(0));
    GenerateOptions g;
    g.max_new_tokens = 5;
    Answer a = chat.generate(t.messages, t.images, g);
    EXPECT_EQ(a.stats.cache_bytes, plan.devices[0].cache_bytes);
    EXPECT_EQ(a.stats.planned_cache_bytes, a.stats.cache_bytes);
  }
}

TEST(VlmChat, StopsAtTheEndOfTheContext) {
  std::string dir = fixture("qwen2-vl");
  nlohmann::json ref = reference(dir);
  const nlohmann::json& sample = ref.at("samples").at(0);
  int64_t prompt = int64_t(sample.at("input_ids").size());
  Chat chat(dir, on("cpu", {Device{}}, {}, prompt + 4));
  Turn t = turn_of(dir, ref, sample);
  Answer a = chat.generate(t.messages, t.images, GenerateOptions{});
  EXPECT_EQ(a.stats.stop, "context");
  EXPECT_EQ(a.tokens.size(), 5u) << "4 tokens fill the context; the 5th is sampled from the last logits";
}

TEST(VlmChat, RefusesAPromptLongerThanTheContext) {
  std::string dir = fixture("qwen2-vl");
  nlohmann::json ref = reference(dir);
  Chat chat(dir, on("cpu", {Device{}}, {}, 32));
  Turn t = turn_of(dir, ref, ref.at("samples").at(0));
  std::string err = error_of([&] { chat.generate(t.messages, t.images, GenerateOptions{}); });
  EXPECT_NE(err.find("leaves no room in a context of 32 tokens"), std::string::npos) << err;
}

TEST(VlmChat, RefusesACacheThatDoesNotFitBeforeRunning) {
  std::string err = error_of([&] { Chat(fixture("qwen2-vl"), on("cpu", {Device{}}, {{"cpu", 64 * 1024}}, 2048)); });
  EXPECT_NE(err.find("does not fit"), std::string::npos) << err;
  EXPECT_NE(err.find("KV cache"), std::string::npos) << err;
}

// A copy of the fixture folder with `change` applied.
std::string broken_folder(const std::string& name, const std::function<void(const std::string&)>& change) {
  std::string dir = test::temp_dir("vlm_" + name);
  fs::copy(fixture("qwen2-vl"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  change(dir);
  return dir;
}

TEST(VlmChat, NamesWhatAFolderLacks) {
  std::string dir = broken_folder("missing", [](const std::string& d) {
    fs::remove(d + "/decoder.onnx");
    fs::remove(d + "/generation_config.json");
  });
  std::string err = error_of([&] { Chat(dir, ChatOptions{}); });
  EXPECT_NE(err.find("lacks decoder.onnx, generation_config.json"), std::string::npos) << err;
}

TEST(VlmChat, RefusesADecoderWithoutKvInputs) {
  std::string dir = broken_folder("nokv", [](const std::string& d) {
    fs::copy_file(d + "/embedding.onnx", d + "/decoder.onnx", fs::copy_options::overwrite_existing);
  });
  std::string err = error_of([&] { Chat(dir, ChatOptions{}); });
  EXPECT_NE(err.find("VLM decoder contract"), std::string::npos) << err;
  EXPECT_NE(err.find("no KV-cache inputs"), std::string::npos) << err;
  EXPECT_NE(err.find("missing input 'past_key_values.0.key'"), std::string::npos) << err;
}

TEST(VlmChat, RefusesATokenizerOfAnotherModel) {
  std::string dir = broken_folder("ids", [](const std::string& d) {
    nlohmann::json c = nlohmann::json::parse(read_file(d + "/config.json"));
    c["image_token_id"] = 5;
    write_file_atomically(d + "/config.json", c.dump());
  });
  std::string err = error_of([&] { Chat(dir, ChatOptions{}); });
  EXPECT_NE(err.find("do not belong together"), std::string::npos) << err;
}

// A vision.onnx that returns one embedding too few: the turn stops naming the image.
TEST(VlmChat, AVisionModelReturningTooFewEmbeddingsIsNamed) {
  std::string dir = broken_folder("short_vision", [](const std::string& d) {
    Model m = load_onnx(d + "/vision.onnx");
    Graph& g = m.graph;
    for (Node& n : g.nodes)
      for (std::string& out : n.outputs)
        if (out == "image_embeds") out = "image_embeds_all";
    g.initializers["drop_first"] = Tensor::from_vector<int64_t>({1}, {1});
    g.initializers["to_end"] = Tensor::from_vector<int64_t>({INT64_MAX}, {1});
    g.nodes.push_back(make_node("drop_one", "Slice", {"image_embeds_all", "drop_first", "to_end"}, {"image_embeds"}));
    write_onnx(m, d + "/vision.onnx");
  });
  nlohmann::json ref = reference(dir);
  Chat chat(dir, on("cpu", {Device{}}));
  Turn t = turn_of(dir, ref, ref.at("samples").at(0));
  std::string err = error_of([&] { chat.generate(t.messages, t.images, GenerateOptions{}); });
  EXPECT_NE(err.find("vision.onnx returned float32["), std::string::npos) << err;
  EXPECT_NE(err.find("for image 1 of 1"), std::string::npos) << err;
  EXPECT_NE(err.find("image embeddings"), std::string::npos) << err;
}

TEST(VlmChatCli, AnswersWithTheReferenceTokensAndTimings) {
  std::string dir = fixture("qwen2.5-vl");
  nlohmann::json ref = reference(dir);
  const nlohmann::json& sample = ref.at("samples").at(6);  // both images
  std::string out = test::temp_dir("vlm_cli") + "/answer.json";
  auto r = run_cli("chat " + dir + " --image " + dir + "/image1.png --image " + dir + "/image2.png -p '" +
                   sample.at("prompt").get<std::string>() + "' --max-new-tokens 20 --vision-devices cpu:1 --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("first token after"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("vision on cpu:1"), std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(j.at("tokens"), sample.at("generated"));
  EXPECT_EQ(j.at("transfers_planned"), j.at("transfers_executed"));
}

TEST(VlmChatCli, PlanShowsTheKvCacheAndWhatFits) {
  auto r = run_cli("plan " + fixture("qwen2-vl") + " --context 512");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("KV cache: 256 B per token and sequence, 128.0 KiB for the context"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resident inputs (KV cache) 128.0 KiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("longest context at batch 1: 2048"), std::string::npos) << r.output;
  // Split over two devices, the cache moves with the layers: the uncapped one takes the rest.
  auto split = run_cli("plan " + fixture("qwen2-vl") + " --context 160 --devices cpu,cpu:1 --memory cpu=250KiB --json");
  ASSERT_EQ(split.exit_code, 0) << split.output;
  nlohmann::json j = nlohmann::json::parse(split.output);
  EXPECT_EQ(j.at("kv_cache").at("devices").size(), 2u);
  EXPECT_EQ(j.at("kv_cache").at("longest_context"), 2048);
  // On one capped device the cap bounds the context.
  auto capped = run_cli("plan " + fixture("qwen2-vl") + " --context 160 --devices cpu --memory cpu=400KiB --json");
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  int64_t longest = nlohmann::json::parse(capped.output).at("kv_cache").at("longest_context").get<int64_t>();
  EXPECT_GE(longest, 160);
  EXPECT_LT(longest, 2048);
}

TEST(VlmChatCli, BadInputsExitWithAMessage) {
  std::string dir = fixture("qwen2-vl");
  auto big = run_cli("chat " + dir + " --image " + dir + "/image1.png -p hi --max-image-pixels 1000");
  EXPECT_NE(big.exit_code, 0);
  EXPECT_NE(big.output.find("1000"), std::string::npos) << big.output;
  auto not_image = run_cli("chat " + dir + " --image " + dir + "/config.json -p hi");
  EXPECT_NE(not_image.exit_code, 0);
  EXPECT_NE(not_image.output.find("config.json"), std::string::npos) << not_image.output;
  auto no_folder = run_cli("chat " + dir + "/nowhere -p hi");
  EXPECT_NE(no_folder.exit_code, 0);
  EXPECT_NE(no_folder.output.find("is not a directory"), std::string::npos) << no_folder.output;
}

}  // namespace
}  // namespace vlrt::vlm

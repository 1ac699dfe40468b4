// Qwen2-VL's chat template against what its processor renders (tests/fixtures/vlm/bpe_vectors.json,
// made by tools/make_bpe_vectors.py), and the expansion of image placeholders.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/error.h"
#include "text/chat_template.h"

namespace vlrt::text {

namespace {

const std::string kTokenizer = test::source_path("tests/fixtures/vlm/tokenizer/tokenizer.json");

const nlohmann::json& chat_cases() {
  static const nlohmann::json j =
      nlohmann::json::parse(std::ifstream(test::source_path("tests/fixtures/vlm/bpe_vectors.json")))["chat"];
  return j;
}

const ByteLevelBpe& tokenizer() {
  static const ByteLevelBpe t = ByteLevelBpe::load(kTokenizer);
  return t;
}

std::vector<ChatMessage> messages_of(const nlohmann::json& j) {
  std::vector<ChatMessage> messages;
  for (const auto& m : j) {
    if (m["content"].is_string()) {
      messages.push_back(ChatMessage::of_text(m["role"], m["content"]));
      continue;
    }
    ChatMessage message{m["role"], {}};
    for (const auto& part : m["content"]) {
      if (part["type"] == "image")
        message.content.push_back({ChatPart::Kind::kImage, ""});
      else
        message.content.push_back({ChatPart::Kind::kText, part["text"]});
    }
    messages.push_back(message);
  }
  return messages;
}

}  // namespace

TEST(ChatTemplate, RendersAsTheProcessor) {
  ChatTemplate chat(tokenizer());
  ASSERT_GE(chat_cases().size(), 5u);
  for (const auto& c : chat_cases())
    EXPECT_EQ(chat.render(messages_of(c["messages"]), c["add_generation_prompt"]), c["text"].get<std::string>())
        << c["messages"].dump();
}

TEST(ChatTemplate, ExpandsImagePadsAsTheProcessor) {
  ChatTemplate chat(tokenizer());
  size_t with_images = 0;
  for (const auto& c : chat_cases()) {
    if (!c.contains("image_grid_thw")) continue;
    std::vector<int64_t> tokens;
    for (const auto& g : c["image_grid_thw"]) tokens.push_back(image_token_count(g[0], g[1], g[2]));
    std::vector<int64_t> ids = tokenizer().encode(c["text"].get<std::string>());
    EXPECT_EQ(chat.expand_image_pads(ids, tokens), c["input_ids"].get<std::vector<int64_t>>()) << c["text"].dump();
    with_images += tokens.size() == 2;
  }
  EXPECT_GT(with_images, 0u) << "a case with two images";
}

TEST(ChatTemplate, PlaceholderAndImageCountsMustAgree) {
  ChatTemplate chat(tokenizer());
  std::vector<int64_t> ids = {1, chat.image_pad_id(), 2};
  std::string error = test::error_of([&] { chat.expand_image_pads(ids, {4, 4}); });
  EXPECT_NE(error.find("1 image placeholders (<|image_pad|>) for 2 images"), std::string::npos) << error;
  EXPECT_NE(test::error_of([] { image_token_count(1, 3, 3); }).find("does not merge"), std::string::npos);
}

TEST(ChatTemplate, TokenizerWithoutATemplateTokenIsNamed) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kTokenizer));
  auto& added = j["added_tokens"];
  added.erase(std::remove_if(added.begin(), added.end(), [](const auto& a) { return a["content"] == "<|image_pad|>"; }),
              added.end());
  std::string path = test::temp_dir("chat_no_image_pad") + "/tokenizer.json";
  std::ofstream(path) << j.dump();
  ByteLevelBpe lacking = ByteLevelBpe::load(path);
  std::string error = test::error_of([&] { ChatTemplate chat(lacking); });
  EXPECT_NE(error.find(path + ": the chat template needs the special token <|image_pad|>"), std::string::npos) << error;
}

}  // namespace vlrt::text

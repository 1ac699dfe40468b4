// The ChatML chat template: messages cut from the input (a line per message: its first byte picks
// the role, a 0x01 byte inside stands for an image part), rendered, tokenized, and the image pads
// expanded with token counts taken from the input.
#include "fuzz_util.h"
#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vlrt::text;
  static const ByteLevelBpe bpe =
      ByteLevelBpe::load(vlrt::fuzz::source_path("tests/fixtures/vlm/tokenizer/tokenizer.json"));
  static const ChatTemplate chat_template(bpe);
  static const char* roles[] = {"system", "user", "assistant", "tool"};
  std::string_view input = vlrt::fuzz::bytes_of(data, size);
  std::vector<ChatMessage> messages;
  std::vector<int64_t> tokens_per_image;
  while (!input.empty()) {
    size_t end = std::min(input.find('\n'), input.size());
    std::string_view line = input.substr(0, end);
    input.remove_prefix(std::min(end + 1, input.size()));
    ChatMessage m{roles[line.empty() ? 0 : uint8_t(line[0]) % 4], {}};
    if (!line.empty()) line.remove_prefix(1);
    for (size_t image; (image = line.find('\x01')) != std::string_view::npos; line.remove_prefix(image + 1)) {
      m.content.push_back({ChatPart::Kind::kText, std::string(line.substr(0, image))});
      m.content.push_back({ChatPart::Kind::kImage, ""});
      tokens_per_image.push_back(image % 7);
    }
    m.content.push_back({ChatPart::Kind::kText, std::string(line)});
    messages.push_back(std::move(m));
  }
  try {
    std::string text = chat_template.render(messages, size % 2 == 0);
    (void)chat_template.expand_image_pads(bpe.encode(text), tokens_per_image);
  } catch (const vlrt::Error&) {
  }
  return 0;
}

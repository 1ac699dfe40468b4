// The OpenAI chat completion request (POST /v1/chat/completions): the JSON body, its messages and
// content parts, images as base64 data URIs (decoded with a low pixel limit), the sampling fields
// and stop strings, checked against the committed tokenizer and a context of 256 tokens.
#include "fuzz_util.h"
#include "serve/openai_chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vlrt;
  static const text::ByteLevelBpe bpe =
      text::ByteLevelBpe::load(fuzz::source_path("tests/fixtures/vlm/tokenizer/tokenizer.json"));
  static const text::ChatTemplate chat_template(bpe);
  static const vlm::GenerationDefaults generation{{bpe.encode("<|im_end|>", true)}, {}, 16};
  static const serve::ChatRequestModel model{
      generation, bpe,
      [](const std::vector<text::ChatMessage>& messages, const std::vector<vision::Image>& images) {
        std::vector<int64_t> ids = bpe.encode(chat_template.render(messages, true), true);
        return int64_t(ids.size() + 4 * images.size());
      },
      256};
  try {
    (void)serve::parse_chat_completion(fuzz::bytes_of(data, size), model, 1 << 16);
  } catch (const Error&) {
  }
  return 0;
}

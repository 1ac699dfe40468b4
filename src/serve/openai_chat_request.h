// The request body of the OpenAI-compatible chat API (POST /v1/chat/completions), parsed and
// checked against the served model. Apart from the server (openai_chat.h), so that it can be
// tested and fuzzed without loading a model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "pipelines/vlm/chat.h"
#include "pipelines/vlm/model_folder.h"
#include "text/byte_level_bpe.h"
#include "text/chat_template.h"
#include "vision/image.h"

namespace vlrt::serve {

// A chat completion request, parsed and checked.
struct ChatCompletionRequest {
  std::string model;  // as the client named it; the answer names the served model
  std::vector<text::ChatMessage> messages;
  std::vector<vision::Image> images;  // the image_url parts, in order
  vlm::GenerateOptions generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

// What checking a request needs of the served model: its generation defaults, its tokenizer (for
// the stop strings), how many tokens a conversation's prompt takes and its context.
struct ChatRequestModel {
  const vlm::GenerationDefaults& generation;
  const text::ByteLevelBpe& tokenizer;
  std::function<int64_t(const std::vector<text::ChatMessage>&, const std::vector<vision::Image>&)> prompt_tokens;
  int64_t context = 0;
};

// Parses an OpenAI chat completion body; RequestError 400 naming the field for every malformed
// part. Fields: messages (role system/user/assistant; content a string or an array of
// {"type":"text","text"} and {"type":"image_url","image_url":{"url":"data:...;base64,..."}}
// parts; http(s) URLs are refused, the server fetches nothing), max_tokens or
// max_completion_tokens, temperature (0: greedy; > 0: sampling at that temperature), top_p,
// seed, stop (strings that are each one token of the tokenizer, added to the model's stop
// tokens), n (1 only), stream, stream_options.include_usage. Absent fields keep the model's
// generation_config.json values. Unknown fields are ignored, as OpenAI's optional ones are.
ChatCompletionRequest parse_chat_completion(std::string_view body, const ChatRequestModel& model,
                                            int64_t max_image_pixels);

}  // namespace vlrt::serve

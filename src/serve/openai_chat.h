// The OpenAI-compatible chat API of `vlrt serve` for a VLM folder, as llama.cpp's server and
// vLLM serve it: POST /v1/chat/completions (images as data URIs in image_url parts, answered as
// one chat.completion or, with "stream": true, as server-sent chat.completion.chunk events
// ending in "data: [DONE]") and GET /v1/models.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "pipelines/vlm/chat.h"
#include "serve/openai_chat_request.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace vlrt::serve {

// Checks a request against the served chat model (parse_chat_completion of
// openai_chat_request.h).
ChatCompletionRequest parse_chat_completion(std::string_view body, const vlm::Chat& chat, int64_t max_image_pixels);

// "stop" when the model ended its answer, "length" when max_tokens or the context did.
std::string finish_reason(const vlm::TurnStats& stats);

// The responses' JSON: chat.completion, one chat.completion.chunk, the model list.
nlohmann::json chat_completion_json(const std::string& id, int64_t created, const std::string& model,
                                    const vlm::Answer& answer);
nlohmann::json chat_chunk_json(const std::string& id, int64_t created, const std::string& model,
                               const nlohmann::json& delta, const nlohmann::json& finish_reason);
nlohmann::json usage_json(const vlm::TurnStats& stats);
nlohmann::json model_list_json(const std::string& name, int64_t created);

// The chat model behind the server. One generation runs at a time; requests wait for theirs in
// the order they arrived.
class ChatService {
 public:
  ChatService(std::unique_ptr<vlm::Chat> chat, std::string name, int64_t max_image_pixels);

  const std::string& name() const { return name_; }
  vlm::Chat& chat() { return *chat_; }

  // POST /v1/chat/completions. Everything the client sent is checked (400s) before the
  // response starts, so a stream that starts answers with 200.
  void completions(const httplib::Request& req, httplib::Response& res);
  // GET /v1/models.
  nlohmann::json models() const;

 private:
  // Waits for the request's turn, then generates.
  vlm::Answer generate(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text);
  std::string next_id();

  std::unique_ptr<vlm::Chat> chat_;
  std::string name_;
  int64_t max_image_pixels_;
  int64_t created_;  // the load time, as the models' "created"
  std::mutex mu_;
  std::condition_variable turn_;
  uint64_t next_ticket_ = 0, serving_ = 0;  // under mu_
  uint64_t ids_ = 0;                        // under mu_
};

}  // namespace vlrt::serve

#include "serve/openai_chat.h"

#include <httplib.h>

#include <chrono>

#include "pipelines/pipeline.h"

namespace vlrt::serve {

using nlohmann::json;

namespace {

// Thrown from the stream's text callback when the client has gone: the generation stops.
struct ClientGone {};

}  // namespace

ChatCompletionRequest parse_chat_completion(std::string_view body, const vlm::Chat& chat, int64_t max_image_pixels) {
  ChatRequestModel model{chat.folder().generation, chat.tokenizer(),
                         [&chat](const std::vector<text::ChatMessage>& messages,
                                 const std::vector<vision::Image>& images) { return chat.prompt_tokens(messages, images); },
                         chat.context()};
  return parse_chat_completion(body, model, max_image_pixels);
}

std::string finish_reason(const vlm::TurnStats& stats) { return stats.stop == "stop token" ? "stop" : "length"; }

json usage_json(const vlm::TurnStats& stats) {
  return {{"prompt_tokens", stats.prompt_tokens},
          {"completion_tokens", stats.generated_tokens},
          {"total_tokens", stats.prompt_tokens + stats.generated_tokens}};
}

json chat_completion_json(const std::string& id, int64_t created, const std::string& model, const vlm::Answer& answer) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", answer.text}}},
             {"logprobs", nullptr},
             {"finish_reason", finish_reason(answer.stats)}}}},
          {"usage", usage_json(answer.stats)}};
}

json chat_chunk_json(const std::string& id, int64_t created, const std::string& model, const json& delta,
                     const json& finish_reason) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model},
          {"choices", {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}}}};
}

json model_list_json(const std::string& name, int64_t created) {
  return {{"object", "list"},
          {"data", {{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "vlrt"}}}}};
}

ChatService::ChatService(std::unique_ptr<vlm::Chat> chat, std::string name, int64_t max_image_pixels)
    : chat_(std::move(chat)),
      name_(std::move(name)),
      max_image_pixels_(max_image_pixels),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

json ChatService::models() const { return model_list_json(name_, created_); }

std::string ChatService::next_id() {
  std::lock_guard<std::mutex> lk(mu_);
  return cat("chatcmpl-", created_, "-", ++ids_);
}

vlm::Answer ChatService::generate(const ChatCompletionRequest& request,
                                  const std::function<void(std::string_view)>& on_text) {
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t ticket = next_ticket_++;
  turn_.wait(lk, [&] { return serving_ == ticket; });
  lk.unlock();
  struct NextTurn {  // the next request's turn, however this one ends
    ChatService& s;
    ~NextTurn() {
      std::lock_guard<std::mutex> g(s.mu_);
      s.serving_++;
      s.turn_.notify_all();
    }
  } next{*this};
  return chat_->generate(request.messages, request.images, request.generate, on_text);
}

void ChatService::completions(const httplib::Request& req, httplib::Response& res) {
  auto request = std::make_shared<ChatCompletionRequest>(parse_chat_completion(req.body, *chat_, max_image_pixels_));
  std::string id = next_id();
  int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (!request->stream) {
    vlm::Answer answer;
    try {
      answer = generate(*request, {});
    } catch (const RequestError&) {
      throw;
    } catch (const Error& e) {
      refuse(500, "generation failed: ", e.what());
    }
    res.status = 200;
    res.set_content(chat_completion_json(id, created, name_, answer).dump(-1, ' ', false, json::error_handler_t::replace),
                    "application/json");
    return;
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, request, id, created](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& event) {
          std::string line =
              "data: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
          if (!sink.write(line.data(), line.size())) throw ClientGone{};
        };
        try {
          send(chat_chunk_json(id, created, name_, {{"role", "assistant"}, {"content", ""}}, nullptr));
          vlm::Answer answer = generate(*request, [&](std::string_view piece) {
            send(chat_chunk_json(id, created, name_, {{"content", std::string(piece)}}, nullptr));
          });
          json last = chat_chunk_json(id, created, name_, json::object(), finish_reason(answer.stats));
          send(last);
          if (request->include_usage) {
            json usage = chat_chunk_json(id, created, name_, json::object(), nullptr);
            usage["choices"] = json::array();
            usage["usage"] = usage_json(answer.stats);
            send(usage);
          }
        } catch (const ClientGone&) {
          return false;
        } catch (const std::exception& e) {
          // The stream has started with 200: the error is its last event.
          try {
            send({{"error", {{"message", cat("generation failed: ", e.what())}, {"type", "server_error"}}}});
          } catch (const ClientGone&) {
            return false;
          }
        }
        static const std::string done = "data: [DONE]\n\n";
        if (!sink.write(done.data(), done.size())) return false;
        sink.done();
        return true;
      });
}

}  // namespace vlrt::serve

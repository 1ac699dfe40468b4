// A VLM folder ready to answer: the vision encoder on its devices, the embedding and the
// decoder on theirs, the tokenizer and the chat template; generate() runs one turn (images
// encoded, image embeddings scattered into the prompt's embeddings after a planned transfer,
// prefill, then decode steps with the planned KV cache) and streams the answer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exec/session.h"
#include "pipelines/vlm/image_patches.h"
#include "pipelines/vlm/kv_cache.h"
#include "pipelines/vlm/model_folder.h"
#include "text/byte_level_bpe.h"
#include "text/chat_template.h"
#include "vision/image.h"

namespace vlrt::vlm {

struct ChatOptions {
  SessionOptions vision;  // the vision encoder's devices, memory caps and threads
  SessionOptions text;    // the embedding's and the decoder's
  // Tokens a turn holds (prompt and answer): the KV cache's size, planned at load.
  // 0: max_position_embeddings, at most kDefaultContext.
  int64_t context = 0;
  bool verify_hash = true;
};

inline constexpr int64_t kDefaultContext = 4096;

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t max_new_tokens = 0;        // 0: generation_config.json's
  std::vector<int64_t> stop_tokens;  // empty: generation_config.json's
};

// Where a device's share of the KV cache stands against its budget.
struct CacheDevice {
  Device device;
  int64_t layers = 0;
  size_t cache_bytes = 0;    // its layers' keys and values for the batch and context
  size_t decoder_bytes = 0;  // the decoder's weights, activations and prepared state there
  size_t budget = 0;         // its --memory cap, else its capacity
  bool fits() const { return cache_bytes + decoder_bytes <= budget; }
};

struct CachePlan {
  int64_t batch = 0, context = 0;
  size_t bytes_per_token = 0;  // one sequence, all layers
  std::vector<CacheDevice> devices;
  bool fits() const;
};

struct TurnStats {
  int64_t images = 0, image_tokens = 0, prompt_tokens = 0, generated_tokens = 0, context = 0;
  double vision_ms = 0, prefill_ms = 0, decode_ms = 0;
  double first_token_ms = 0;  // from the start of the turn to the first generated token
  size_t cache_bytes = 0;          // the KV cache's buffers, as allocated
  size_t planned_cache_bytes = 0;  // as planned at load
  size_t transfers_planned = 0, transfers_executed = 0;
  // Per model ("vision", "embedding", "decoder"): the devices its last plan ran on and their
  // node counts.
  std::map<std::string, std::vector<std::pair<std::string, size_t>>> placement;
  std::string stop;  // "stop token", "max_new_tokens" or "context"
};

struct Answer {
  std::vector<int64_t> tokens;  // generated, the stop token excluded
  std::string text;
  TurnStats stats;
};

class Chat {
 public:
  // Loads and checks the folder and plans the decoder with its KV cache for the context;
  // fails before anything runs when they do not fit the text devices.
  Chat(const std::string& dir, ChatOptions options);
  int64_t context() const { return context_; }

  const ModelFolder& folder() const { return folder_; }
  const text::ByteLevelBpe& tokenizer() const { return tokenizer_; }
  Session& vision() { return *vision_; }
  Session& embedding() { return *embedding_; }
  Session& decoder() { return *decoder_; }

  // One turn: the messages (their images in `images`, in order) rendered with the chat
  // template and a generation prompt; `on_text` gets the answer's text as it completes.
  Answer generate(const std::vector<text::ChatMessage>& messages, const std::vector<vision::Image>& images,
                  const GenerateOptions& options, const std::function<void(std::string_view)>& on_text = {});

  // The tokens the turn's prompt takes (the images' tokens included), as generate() counts
  // them; fails as generate() would on an image it cannot take (a side shorter than 28 pixels).
  int64_t prompt_tokens(const std::vector<text::ChatMessage>& messages, const std::vector<vision::Image>& images) const;

  // The KV cache of `batch` sequences of `context` tokens on the decoder's devices, beside the
  // decoder's own planned memory there (its decode step with the whole context as past; the
  // cache counted on the device that reads each layer's part).
  CachePlan plan_cache(int64_t batch, int64_t context);
  // The longest context (at `batch`) and the largest batch (at `context`) whose cache and
  // decoder fit every device's budget; 0 when none does.
  int64_t longest_context(int64_t batch);
  int64_t largest_batch(int64_t context);
  // The decoder's inputs for a decode step over `past` cached tokens.
  std::map<std::string, std::pair<DType, Shape>> decode_signature(int64_t batch, int64_t past) const;

 private:
  // The vision encoder's embeddings of the patches (one zero row when there are none).
  Tensor encode_images(const ImagePatches& patches, TurnStats& stats);
  // One decoder step (a prefill or a decode step), its new positions appended to the cache.
  TensorMap run_decoder(KvCache& cache, Tensor inputs_embeds, Tensor attention_mask, Tensor position_ids,
                        bool prefill, TurnStats& stats);
  // The text devices' plan options with the cache of `batch` x `context` tokens as resident inputs.
  PlanOptions decoder_plan_options(int64_t batch, int64_t context) const;
  // The prompt's ids, each image's <|image_pad|> expanded to its count of image tokens.
  std::vector<int64_t> prompt_ids(const std::vector<text::ChatMessage>& messages,
                                  const std::vector<int64_t>& image_tokens) const;

  ModelFolder folder_;
  ChatOptions options_;
  int64_t context_ = 0;
  size_t planned_cache_bytes_ = 0;
  text::ByteLevelBpe tokenizer_;
  text::ChatTemplate template_;
  std::unique_ptr<Session> vision_, embedding_, decoder_;
};

// Each decoder layer's cache device in a plan of the decoder (where its past key is read).
std::vector<Device> cache_devices(const Plan& plan, int64_t layers);

}  // namespace vlrt::vlm

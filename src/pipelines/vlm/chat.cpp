#include "pipelines/vlm/chat.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "integrity/load_model.h"
#include "pipelines/vlm/decoder_outputs.h"
#include "pipelines/vlm/image_patches.h"
#include "pipelines/vlm/rope_index.h"

namespace vlrt::vlm {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::unique_ptr<Session> open_session(const std::string& path, const ChatOptions& o, const SessionOptions& s) {
  return std::make_unique<Session>(load_model(path, LoadOptions{o.verify_hash}), s);
}

// The decoder's inputs of one step over the cache's views (or an empty past for a prefill).
TensorMap decoder_inputs(const TextConfig& text, KvCache& cache, Tensor inputs_embeds, Tensor attention_mask,
                         Tensor position_ids, bool prefill) {
  TensorMap in{{"inputs_embeds", std::move(inputs_embeds)},
               {"attention_mask", std::move(attention_mask)},
               {"position_ids", std::move(position_ids)}};
  for (int64_t l = 0; l < text.layers; l++) {
    if (prefill) {
      Shape empty{cache.batch(), text.kv_heads, 0, text.head_dim};
      in[past_key_name(l)] = Tensor(DType::f32, empty);
      in[past_value_name(l)] = Tensor(DType::f32, empty);
    } else {
      in[past_key_name(l)] = cache.past_key(l);
      in[past_value_name(l)] = cache.past_value(l);
    }
  }
  return in;
}

// The logits of the last position of row 0: [B,S,V] -> V floats.
std::span<const float> last_logits(const Tensor& logits) {
  int64_t vocab = logits.dim(2);
  return {logits.data<float>() + (logits.dim(1) - 1) * vocab, size_t(vocab)};
}

Tensor ids_tensor(const std::vector<int64_t>& ids) { return Tensor::from_vector<int64_t>(ids, {1, int64_t(ids.size())}); }

// Runs a session, counting the transfers its plan for `inputs` moves and noting where it ran.
TensorMap run_counted(const char* model, Session& session, const TensorMap& inputs, TurnStats& stats) {
  size_t before = session.executor().transfers_executed();
  const Plan& plan = session.plan(signature_of(inputs));
  stats.transfers_planned += plan.transfers.size();
  auto& placed = stats.placement[model];
  placed.clear();
  for (const DevicePlan& d : plan.devices)
    if (d.nodes > 0) placed.emplace_back(d.device.str(), d.nodes);
  TensorMap out = session.run(inputs);
  stats.transfers_executed += session.executor().transfers_executed() - before;
  return out;
}

}  // namespace

bool CachePlan::fits() const {
  return std::all_of(devices.begin(), devices.end(), [](const CacheDevice& d) { return d.fits(); });
}

Chat::Chat(const std::string& dir, ChatOptions options)
    : folder_(read_model_folder(dir)),
      options_(std::move(options)),
      tokenizer_(text::ByteLevelBpe::load(folder_.tokenizer())),
      template_(tokenizer_) {
  const TextConfig& t = folder_.text;
  context_ = options_.context > 0 ? options_.context : std::min(t.max_positions, kDefaultContext);
  if (context_ > t.max_positions)
    fail("a context of ", context_, " tokens is longer than the model's ", t.max_positions,
         " (max_position_embeddings in ", folder_.path("config.json"), ")");
  for (auto [name, id] : {std::pair{"<|image_pad|>", folder_.tokens.image_pad},
                          std::pair{"<|vision_start|>", folder_.tokens.vision_start},
                          std::pair{"<|vision_end|>", folder_.tokens.vision_end}})
    if (tokenizer_.find(name) != id)
      fail(folder_.tokenizer(), " gives ", name, " the id ", tokenizer_.find(name), " but ", folder_.path("config.json"),
           " says ", id, "; the tokenizer and the model do not belong together");
  vision_ = open_session(folder_.vision_model(), options_, options_.vision);
  check_vision_contract(vision_->model(), folder_);
  embedding_ = open_session(folder_.embedding_model(), options_, options_.text);
  check_embedding_contract(embedding_->model());
  SessionOptions decoder_options = options_.text;
  decoder_options.plan = decoder_plan_options(1, context_);
  Model decoder = load_model(folder_.decoder_model(), LoadOptions{options_.verify_hash});
  check_decoder_contract(decoder, folder_);
  keep_new_positions(decoder, folder_.text.layers);
  decoder_ = std::make_unique<Session>(std::move(decoder), decoder_options);
  CachePlan cp = plan_cache(1, context_);
  for (const CacheDevice& d : cp.devices) planned_cache_bytes_ += d.cache_bytes;
  for (const CacheDevice& d : cp.devices)
    if (!d.fits())
      fail("the KV cache for a context of ", context_, " tokens needs ", d.cache_bytes, " bytes on ", d.device.str(),
           " beside the decoder's ", d.decoder_bytes, ", but ", d.budget,
           " bytes are available there; lower --context or give the decoder more devices (--text-devices)");
}

std::map<std::string, std::pair<DType, Shape>> Chat::decode_signature(int64_t batch, int64_t past) const {
  const TextConfig& t = folder_.text;
  std::map<std::string, std::pair<DType, Shape>> sig{{"inputs_embeds", {DType::f32, {batch, 1, t.hidden}}},
                                                     {"attention_mask", {DType::i64, {batch, past + 1}}},
                                                     {"position_ids", {DType::i64, {3, batch, 1}}}};
  for (int64_t l = 0; l < t.layers; l++)
    for (auto& name : {past_key_name(l), past_value_name(l)})
      sig[name] = {DType::f32, {batch, t.kv_heads, past, t.head_dim}};
  return sig;
}

PlanOptions Chat::decoder_plan_options(int64_t batch, int64_t context) const {
  const TextConfig& t = folder_.text;
  PlanOptions o = options_.text.plan;
  size_t bytes = KvCacheShape{t.layers, t.kv_heads, t.head_dim}.bytes_per_token() / size_t(2 * t.layers) *
                 size_t(batch * context);
  for (int64_t l = 0; l < t.layers; l++) o.resident_inputs[past_key_name(l)] = o.resident_inputs[past_value_name(l)] = bytes;
  return o;
}

std::vector<Device> cache_devices(const Plan& plan, int64_t layers) {
  std::vector<Device> out;
  for (int64_t l = 0; l < layers; l++) {
    auto it = plan.resident_devices.find(past_key_name(l));
    out.push_back(it == plan.resident_devices.end() ? Device{} : it->second);
  }
  return out;
}

CachePlan Chat::plan_cache(int64_t batch, int64_t context) {
  const TextConfig& t = folder_.text;
  CachePlan cp{batch, context, KvCacheShape{t.layers, t.kv_heads, t.head_dim}.bytes_per_token(), {}};
  Plan plan = decoder_->plan_with(decode_signature(batch, context), decoder_plan_options(batch, context));
  std::vector<Device> where = cache_devices(plan, t.layers);
  for (const DevicePlan& dp : plan.devices) {
    CacheDevice d{dp.device};
    d.layers = std::count(where.begin(), where.end(), dp.device);
    d.cache_bytes = dp.resident_bytes;
    d.decoder_bytes = dp.total_bytes() - dp.resident_bytes;
    auto cap = options_.text.plan.memory_caps.find(dp.device.str());
    d.budget = cap != options_.text.plan.memory_caps.end() ? cap->second
                                                           : decoder_->executor().backend(dp.device).memory_capacity();
    cp.devices.push_back(d);
  }
  return cp;
}

namespace {

// The largest n in [1, limit] for which fits(n) holds (fits is monotone), 0 when none.
template <class F>
int64_t largest_fitting(int64_t limit, F fits) {
  auto ok = [&](int64_t n) {
    try {
      return fits(n);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error&) {  // a plan that cannot be made within the caps
      return false;
    }
  };
  if (!ok(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (hi <= limit && ok(hi)) lo = hi, hi *= 2;
  if (hi > limit) {
    if (ok(limit)) return limit;
    hi = limit;
  }
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

int64_t Chat::longest_context(int64_t batch) {
  return largest_fitting(folder_.text.max_positions, [&](int64_t c) { return plan_cache(batch, c).fits(); });
}

int64_t Chat::largest_batch(int64_t context) {
  return largest_fitting(1024, [&](int64_t b) { return plan_cache(b, context).fits(); });
}

std::vector<int64_t> Chat::prompt_ids(const std::vector<text::ChatMessage>& messages,
                                     const std::vector<int64_t>& image_tokens) const {
  return template_.expand_image_pads(tokenizer_.encode(template_.render(messages, true)), image_tokens);
}

int64_t Chat::prompt_tokens(const std::vector<text::ChatMessage>& messages,
                            const std::vector<vision::Image>& images) const {
  std::vector<int64_t> image_tokens;
  for (auto& img : images) {
    Grid g = image_grid(img, folder_.patches);
    image_tokens.push_back(text::image_token_count(g.t, g.h, g.w, folder_.vision.merge_size));
  }
  return int64_t(prompt_ids(messages, image_tokens).size());
}

// vision.onnx runs once per image. Its attention never crosses images, so this gives the
// embeddings one run over every image would; the attention bias is one image's [Np,Np] rather
// than all images', and a tower may treat its input as one image (the demo VLM's CNN puts the
// patches back together).
Tensor Chat::encode_images(const ImagePatches& patches, TurnStats& stats) {
  if (patches.grids.empty()) return Tensor::zeros(DType::f32, {1, folder_.text.hidden});  // no row is read
  const Tensor& pixels = patches.pixel_values;
  const size_t row_bytes = pixels.nbytes() / size_t(pixels.dim(0));
  std::vector<Tensor> embeds;
  int64_t first_patch = 0, rows = 0;
  for (size_t i = 0; i < patches.grids.size(); i++) {
    const Grid& g = patches.grids[i];
    VisionIndices vi = vision_indices({g}, folder_.vision);
    TensorMap in{{"pixel_values", Tensor(DType::f32, {g.patches(), pixels.dim(1)}, pixels.buffer(),
                                         pixels.offset() + size_t(first_patch) * row_bytes)},
                 {"rotary_pos_ids", vi.rotary_pos_ids},
                 {"attention_bias", vi.attention_bias}};
    if (folder_.variant == Variant::qwen2_5_vl) {
      in["window_index"] = vi.window_index;
      in["reverse_window_index"] = vi.reverse_window_index;
      in["window_attention_bias"] = vi.window_attention_bias;
    }
    Tensor e = run_counted("vision", *vision_, in, stats).at("image_embeds");
    int64_t want = text::image_token_count(g.t, g.h, g.w, folder_.vision.merge_size);
    if (e.rank() != 2 || e.dim(0) != want)
      fail(folder_.vision_model(), " returned ", e.describe(), " for image ", i + 1, " of ", patches.grids.size(),
           " (", g.t, "x", g.h, "x", g.w, " patches), which needs ", want, " image embeddings");
    first_patch += g.patches();
    rows += e.dim(0);
    embeds.push_back(std::move(e));
  }
  if (embeds.size() == 1) return embeds[0];
  const int64_t width = embeds[0].dim(1);
  Tensor all(DType::f32, {rows, width});
  char* dst = static_cast<char*>(all.raw());
  for (const Tensor& e : embeds) {
    if (e.dim(1) != width)
      fail(folder_.vision_model(), " returned embeddings of width ", e.dim(1), " and ", width, " for two images");
    std::memcpy(dst, e.raw(), e.nbytes());
    dst += e.nbytes();
  }
  return all;
}

TensorMap Chat::run_decoder(KvCache& cache, Tensor inputs_embeds, Tensor attention_mask, Tensor position_ids,
                            bool prefill, TurnStats& stats) {
  const TextConfig& t = folder_.text;
  TensorMap out = run_counted("decoder", *decoder_,
                              decoder_inputs(t, cache, std::move(inputs_embeds), std::move(attention_mask),
                                             std::move(position_ids), prefill),
                              stats);
  for (int64_t l = 0; l < t.layers; l++) cache.append(l, out.at(present_key_name(l)), out.at(present_value_name(l)));
  return out;
}

Answer Chat::generate(const std::vector<text::ChatMessage>& messages, const std::vector<vision::Image>& images,
                      const GenerateOptions& options, const std::function<void(std::string_view)>& on_text) {
  Clock::time_point start = Clock::now();
  Answer answer;
  TurnStats& stats = answer.stats;
  const TextConfig& t = folder_.text;
  GenerationDefaults defaults = folder_.generation;
  int64_t max_new = options.max_new_tokens > 0 ? options.max_new_tokens : defaults.max_new_tokens;
  const std::vector<int64_t>& stop = options.stop_tokens.empty() ? defaults.stop_tokens : options.stop_tokens;
  Sampler sampler(options.sampling);

  // Images to patches and the prompt to ids: everything the cache's size depends on.
  std::vector<const vision::Image*> image_ptrs;
  for (auto& img : images) image_ptrs.push_back(&img);
  ImagePatches patches;
  std::vector<int64_t> pad_counts;
  if (!images.empty()) {
    patches = image_patches(image_ptrs, folder_.patches);
    int64_t merge = folder_.vision.merge_size;
    for (auto& g : patches.grids) pad_counts.push_back(text::image_token_count(g.t, g.h, g.w, merge));
  }
  std::vector<int64_t> ids = prompt_ids(messages, pad_counts);
  stats.images = int64_t(images.size());
  for (int64_t c : pad_counts) stats.image_tokens += c;
  stats.prompt_tokens = int64_t(ids.size());

  stats.context = context_;
  if (stats.prompt_tokens >= context_)
    fail("the prompt is ", stats.prompt_tokens, " tokens (", stats.image_tokens, " of them for ", stats.images,
         " images), which leaves no room in a context of ", context_,
         " tokens; shorten it, use fewer or smaller images, or raise --context");

  // The vision encoder, then its embeddings scattered into the prompt's on the text devices.
  Clock::time_point vision_start = Clock::now();
  Tensor image_embeds = encode_images(patches, stats);
  stats.vision_ms = ms_since(vision_start);

  // Prefill.
  Clock::time_point prefill_start = Clock::now();
  KvCache cache({t.layers, t.kv_heads, t.head_dim}, 1, stats.context);
  stats.cache_bytes = cache.bytes();
  stats.planned_cache_bytes = planned_cache_bytes_;
  Tensor input_ids = ids_tensor(ids);
  RopeConfig rc{folder_.tokens.image_pad, -1, folder_.tokens.vision_start, int(folder_.vision.merge_size)};
  RopeIndex rope = rope_index(input_ids, Tensor(), patches.grids, rc);
  Tensor embeds = run_counted("embedding", *embedding_, {{"input_ids", input_ids}, {"image_embeds", image_embeds}}, stats).at("inputs_embeds");
  std::vector<int64_t> ones(ids.size(), 1);
  TensorMap out = run_decoder(cache, embeds, ids_tensor(ones), rope.position_ids, true, stats);
  cache.advance_prefill({ones});
  stats.prefill_ms = ms_since(prefill_start);

  // Decode: one token at a time until a stop token, max_new_tokens or the context's end.
  std::vector<int64_t> sequence = ids;
  text::StreamDecoder stream(tokenizer_, true);
  Tensor no_image = Tensor::zeros(DType::f32, {1, t.hidden});
  Clock::time_point decode_start = Clock::now();
  for (;;) {
    int64_t next = sampler.next(last_logits(out.at("logits")), sequence);
    if (answer.tokens.empty()) stats.first_token_ms = ms_since(start);
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) {
      stats.stop = "stop token";
      break;
    }
    answer.tokens.push_back(next);
    sequence.push_back(next);
    std::string piece = stream.push(next);
    answer.text += piece;
    if (on_text && !piece.empty()) on_text(piece);
    if (int64_t(answer.tokens.size()) >= max_new) {
      stats.stop = "max_new_tokens";
      break;
    }
    if (cache.length() >= cache.context()) {
      stats.stop = "context";
      break;
    }
    Tensor step = run_counted("embedding", *embedding_, {{"input_ids", ids_tensor({next})}, {"image_embeds", no_image}}, stats)
                      .at("inputs_embeds");
    Tensor positions = decode_position_ids(rope.deltas, cache.length());
    out = run_decoder(cache, step, cache.decode_mask(), positions, false, stats);
    cache.advance_decode();
  }
  std::string rest = stream.finish();
  answer.text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  stats.generated_tokens = int64_t(answer.tokens.size());
  stats.decode_ms = ms_since(decode_start);
  return answer;
}

}  // namespace vlrt::vlm

#include "pipelines/vlm/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace vlrt::vlm {

void check_sampling(const SamplingOptions& o) {
  if (!(o.temperature > 0.0f) || !std::isfinite(o.temperature))
    fail("temperature must be a positive number, got ", o.temperature);
  if (o.top_k < 0) fail("top-k must be 0 (off) or positive, got ", o.top_k);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) fail("top-p must be in (0, 1], got ", o.top_p);
  if (!(o.repetition_penalty > 0.0f) || !std::isfinite(o.repetition_penalty))
    fail("repetition penalty must be a positive number, got ", o.repetition_penalty);
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  check_sampling(options);
}

namespace {

constexpr float kRemoved = -std::numeric_limits<float>::infinity();

// transformers' RepetitionPenaltyLogitsProcessor: each token seen once or more is divided by
// the penalty when its score is positive and multiplied by it otherwise.
void penalize_repetitions(std::vector<float>& scores, std::span<const int64_t> sequence, float penalty) {
  if (penalty == 1.0f) return;
  std::vector<bool> seen(scores.size(), false);
  for (int64_t id : sequence) {
    if (id < 0 || size_t(id) >= scores.size() || seen[size_t(id)]) continue;
    seen[size_t(id)] = true;
    float& s = scores[size_t(id)];
    s = s < 0 ? s * penalty : s / penalty;
  }
}

// TopKLogitsWarper: scores below the k-th largest are removed (ties at the k-th stay).
void keep_top_k(std::vector<float>& scores, int64_t k) {
  if (k <= 0 || size_t(k) >= scores.size()) return;
  std::vector<float> sorted = scores;
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  float kth = sorted[size_t(k - 1)];
  for (float& s : scores)
    if (s < kth) s = kRemoved;
}

// TopPLogitsWarper: sorted ascending, the tokens whose cumulative probability is at most
// 1 - p are removed; the most likely token always stays.
void keep_top_p(std::vector<float>& scores, float p) {
  if (p >= 1.0f) return;
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  float max = scores[order.back()];
  double total = 0;
  for (float s : scores) total += s == kRemoved ? 0.0 : std::exp(double(s - max));
  double cumulative = 0;
  for (size_t i = 0; i + 1 < order.size(); i++) {
    float& s = scores[order[i]];
    cumulative += s == kRemoved ? 0.0 : std::exp(double(s - max)) / total;
    if (cumulative <= 1.0 - p) s = kRemoved;
  }
}

}  // namespace

int64_t Sampler::next(std::span<const float> logits, std::span<const int64_t> sequence) {
  if (logits.empty()) fail("the model returned no logits for the last position");
  scores_.assign(logits.begin(), logits.end());
  penalize_repetitions(scores_, sequence, options_.repetition_penalty);
  if (!options_.sample) return int64_t(std::max_element(scores_.begin(), scores_.end()) - scores_.begin());
  for (float& s : scores_) s /= options_.temperature;
  keep_top_k(scores_, options_.top_k);
  keep_top_p(scores_, options_.top_p);
  float max = *std::max_element(scores_.begin(), scores_.end());
  std::vector<double> weights(scores_.size());
  for (size_t i = 0; i < scores_.size(); i++) weights[i] = scores_[i] == kRemoved ? 0.0 : std::exp(double(scores_[i] - max));
  std::discrete_distribution<int64_t> draw(weights.begin(), weights.end());
  return draw(rng_);
}

}  // namespace vlrt::vlm

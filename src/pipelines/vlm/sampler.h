// Picks the next token from a step's logits as transformers' generate() does: the repetition
// penalty over every token of the sequence so far, then (sampling) temperature, top-k and
// top-p, and a draw from the softmax; greedy takes the largest logit after the penalty.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace vlrt::vlm {

struct SamplingOptions {
  bool sample = false;            // false: greedy
  float temperature = 1.0f;       // > 0
  int64_t top_k = 0;              // 0: off
  float top_p = 1.0f;             // (0, 1]; 1: off
  float repetition_penalty = 1.0f;  // 1: off
  uint64_t seed = 0;
};

// Fails naming the option when one is out of range.
void check_sampling(const SamplingOptions& options);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);

  // The next token given the logits of the last position and the tokens so far (prompt and
  // generated ones).
  int64_t next(std::span<const float> logits, std::span<const int64_t> sequence);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<float> scores_;
};

}  // namespace vlrt::vlm

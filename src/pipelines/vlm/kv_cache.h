// The decoder's key/value cache: runtime memory sized before the first token and never
// grown. Each layer's key and value live in one buffer holding the whole context; a step's
// `past` is a view of it and only the step's new positions are copied in from `present`.
//
// The decoder is run with a past length from a few buckets (64, 128, ... up to the
// context), not the exact cache length, so a whole answer needs a handful of plans instead
// of one per token: the unused positions of a bucket are masked out by attention_mask (the
// rotary embedding is applied before keys are cached, so where a key sits in the cache does
// not change attention). Within a bucket the view is [B, kv_heads, bucket, head_dim],
// contiguous; moving to a larger bucket spreads the rows out in place. The decoder returns
// only the new positions of `present` (keep_new_positions in decoder_outputs.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vlrt::vlm {

struct KvCacheShape {
  int64_t layers = 0, kv_heads = 0, head_dim = 0;
  DType dtype = DType::f32;

  // Bytes one token of one sequence takes over all layers (keys and values).
  size_t bytes_per_token() const;
};

// The past lengths the decoder is run with: 64, 128, 256, ... and finally the context itself.
std::vector<int64_t> cache_buckets(int64_t context);
// The smallest of them that holds `tokens` positions (the context when none does).
int64_t bucket_for(int64_t context, int64_t tokens);

class KvCache {
 public:
  // One zeroed host buffer per layer and per key/value, each for the whole context.
  KvCache(const KvCacheShape& shape, int64_t batch, int64_t context);

  const KvCacheShape& shape() const { return shape_; }
  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }
  // Filled positions (the same for every row: rows are padded on the left).
  int64_t length() const { return length_; }
  // The bucket the next decode step runs with: the smallest that holds length() + 1 tokens.
  int64_t bucket() const { return bucket_; }
  // Bytes its buffers hold (what was allocated, to compare with what was planned).
  size_t bytes() const;

  // The past inputs of a decode step: [B, kv_heads, bucket(), head_dim] views, positions past
  // length() zero.
  Tensor past_key(int64_t layer);
  Tensor past_value(int64_t layer);
  // The decode step's attention_mask [B, bucket() + 1]: each row's mask over the filled
  // positions (the prefill's mask, 1 for every token since), zeros up to the bucket, then 1
  // for the new token.
  Tensor decode_mask() const;

  // Copies the positions a step added, [B, kv_heads, n, head_dim]: a prefill's n tokens into
  // the empty cache, or a decode step's one token after the cached ones.
  void append(int64_t layer, const Tensor& present_key, const Tensor& present_value);
  // After every layer is appended: counts the step's tokens (a prefill's mask rows give its
  // length and padding; a decode step adds one token per row) and moves to a larger bucket
  // when the next token would not fit. Fails when the context is full.
  void advance_prefill(const std::vector<std::vector<int64_t>>& mask_rows);
  void advance_decode();

 private:
  bool prefilled() const { return !mask_.empty(); }
  void spread_to(int64_t bucket);
  Tensor view(const std::shared_ptr<Buffer>& buffer) const;
  void copy_positions(Buffer& dst, const Tensor& present) const;

  KvCacheShape shape_;
  int64_t batch_, context_;
  int64_t length_ = 0, bucket_ = 0;
  std::vector<std::shared_ptr<Buffer>> keys_, values_;
  std::vector<std::vector<int64_t>> mask_;  // per row, per filled position
};

}  // namespace vlrt::vlm

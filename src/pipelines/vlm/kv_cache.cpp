#include "pipelines/vlm/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace vlrt::vlm {

size_t KvCacheShape::bytes_per_token() const {
  return size_t(2 * layers * kv_heads * head_dim) * dtype_size(dtype);
}

std::vector<int64_t> cache_buckets(int64_t context) {
  std::vector<int64_t> buckets;
  for (int64_t b = 64; b < context; b *= 2) buckets.push_back(b);
  buckets.push_back(context);
  return buckets;
}

// The smallest bucket that holds `tokens` positions.
int64_t bucket_for(int64_t context, int64_t tokens) {
  for (int64_t b : cache_buckets(context))
    if (b >= tokens) return b;
  return context;
}

KvCache::KvCache(const KvCacheShape& shape, int64_t batch, int64_t context)
    : shape_(shape), batch_(batch), context_(context) {
  VLRT_CHECK(shape.layers > 0 && shape.kv_heads > 0 && shape.head_dim > 0, "a KV cache needs layers, heads and a head size");
  VLRT_CHECK(batch > 0 && context > 0, "a KV cache needs a batch and a context of at least 1, got ", batch, " and ",
        context);
  size_t per_buffer = shape.bytes_per_token() / size_t(2 * shape.layers) * size_t(batch * context);
  for (int64_t l = 0; l < shape.layers; l++) {
    for (auto* list : {&keys_, &values_}) {
      list->push_back(host_alloc(per_buffer));
      std::memset(list->back()->data, 0, per_buffer);
    }
  }
  bucket_ = cache_buckets(context).front();
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (auto* list : {&keys_, &values_})
    for (auto& buffer : *list) total += buffer->bytes;
  return total;
}

Tensor KvCache::view(const std::shared_ptr<Buffer>& buffer) const {
  return Tensor(shape_.dtype, {batch_, shape_.kv_heads, bucket_, shape_.head_dim}, buffer, 0);
}

Tensor KvCache::past_key(int64_t layer) { return view(keys_.at(size_t(layer))); }
Tensor KvCache::past_value(int64_t layer) { return view(values_.at(size_t(layer))); }

Tensor KvCache::decode_mask() const {
  Tensor mask(DType::i64, {batch_, bucket_ + 1});
  int64_t* m = mask.data<int64_t>();
  std::fill(m, m + mask.numel(), 0);
  for (int64_t r = 0; r < batch_; r++) {
    std::copy(mask_[size_t(r)].begin(), mask_[size_t(r)].end(), m + r * (bucket_ + 1));
    m[r * (bucket_ + 1) + bucket_] = 1;
  }
  return mask;
}

// Every [B, kv_heads] block of `present`'s positions to the cache's positions
// [length_, length_ + n) in the current bucket layout.
void KvCache::copy_positions(Buffer& dst, const Tensor& present) const {
  size_t position_bytes = size_t(shape_.head_dim) * dtype_size(shape_.dtype);
  int64_t n = present.dim(2);
  const char* src = static_cast<const char*>(present.raw());
  char* out = static_cast<char*>(dst.data);
  for (int64_t block = 0; block < batch_ * shape_.kv_heads; block++)
    std::memcpy(out + size_t(block * bucket_ + length_) * position_bytes, src + size_t(block * n) * position_bytes,
                size_t(n) * position_bytes);
}

void KvCache::append(int64_t layer, const Tensor& key, const Tensor& value) {
  for (const Tensor* t : {&key, &value}) {
    VLRT_CHECK(t->dtype() == shape_.dtype && t->rank() == 4 && t->dim(0) == batch_ && t->dim(1) == shape_.kv_heads &&
                   t->dim(3) == shape_.head_dim,
               "the decoder's present key/value of layer ", layer, " is ", dtype_name(t->dtype()),
               shape_str(t->shape()), ", expected ", dtype_name(shape_.dtype), "[", batch_, ",", shape_.kv_heads, ",N,",
               shape_.head_dim, "]");
  }
  int64_t n = key.dim(2);
  if (prefilled()) {
    VLRT_CHECK(n == 1, "the decoder returned ", n, " new positions in present for one token");
    VLRT_CHECK(length_ < context_, "the context of ", context_, " tokens is full");
  } else {
    VLRT_CHECK(n <= context_, "a prompt of ", n, " tokens does not fit a context of ", context_);
    spread_to(std::max(bucket_, bucket_for(context_, n)));
  }
  copy_positions(*keys_.at(size_t(layer)), key);
  copy_positions(*values_.at(size_t(layer)), value);
}

void KvCache::advance_prefill(const std::vector<std::vector<int64_t>>& mask_rows) {
  VLRT_CHECK(!prefilled() && int64_t(mask_rows.size()) == batch_, "a prefill needs an empty cache and a mask row per sequence");
  for (auto& row : mask_rows) VLRT_CHECK(row.size() == mask_rows.front().size(), "the prefill's mask rows differ in length");
  mask_ = mask_rows;
  length_ = int64_t(mask_rows.front().size());
  spread_to(std::max(bucket_, bucket_for(context_, length_ + 1)));
}

void KvCache::advance_decode() {
  VLRT_CHECK(prefilled(), "a decode step before the prefill");
  for (auto& row : mask_) row.push_back(1);
  length_++;
  spread_to(std::max(bucket_, bucket_for(context_, length_ + 1)));
}

// Moves every [position, head_dim] block from the current bucket's stride to the new one's,
// last block first (new offsets are never below old ones), and zeroes the positions the
// blocks left behind.
void KvCache::spread_to(int64_t bucket) {
  if (bucket == bucket_) return;
  size_t position_bytes = size_t(shape_.head_dim) * dtype_size(shape_.dtype);
  for (auto* list : {&keys_, &values_}) {
    for (auto& buffer : *list) {
      char* data = static_cast<char*>(buffer->data);
      for (int64_t block = batch_ * shape_.kv_heads - 1; block >= 0; block--) {
        char* dst = data + size_t(block * bucket) * position_bytes;
        std::memmove(dst, data + size_t(block * bucket_) * position_bytes, size_t(bucket_) * position_bytes);
        std::memset(dst + size_t(bucket_) * position_bytes, 0, size_t(bucket - bucket_) * position_bytes);
      }
    }
  }
  bucket_ = bucket;
}

}  // namespace vlrt::vlm

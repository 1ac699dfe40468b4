#include <gtest/gtest.h>

#include "core/error.h"
#include "pipelines/vlm/kv_cache.h"

namespace vlrt::vlm {
namespace {

// A present tensor [B, H, n, D] whose element at (b, h, p, d) is value(b, h, p, d).
template <class F>
Tensor present(int64_t b, int64_t h, int64_t n, int64_t d, F value) {
  Tensor t(DType::f32, {b, h, n, d});
  float* x = t.data<float>();
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < h; j++)
      for (int64_t p = 0; p < n; p++)
        for (int64_t k = 0; k < d; k++) *x++ = value(i, j, p, k);
  return t;
}

float at(const Tensor& t, int64_t b, int64_t h, int64_t p, int64_t d) {
  return t.data<float>()[((b * t.dim(1) + h) * t.dim(2) + p) * t.dim(3) + d];
}

TEST(KvCache, BucketsDoubleUpToTheContext) {
  EXPECT_EQ(cache_buckets(64), (std::vector<int64_t>{64}));
  EXPECT_EQ(cache_buckets(300), (std::vector<int64_t>{64, 128, 256, 300}));
  EXPECT_EQ(cache_buckets(10), (std::vector<int64_t>{10}));
  EXPECT_EQ(bucket_for(300, 65), 128);
  EXPECT_EQ(bucket_for(300, 257), 300);
}

TEST(KvCache, HoldsTheWholeContextFromTheStart) {
  KvCacheShape shape{2, 3, 4};
  EXPECT_EQ(shape.bytes_per_token(), size_t(2 * 2 * 3 * 4 * 4));
  KvCache cache(shape, 2, 512);
  EXPECT_EQ(cache.bytes(), shape.bytes_per_token() * 2 * 512);
}

// A prefill of 70 tokens, then decode steps across the 128 bucket: every token's key stays
// at its position, whatever bucket the views have.
TEST(KvCache, PrefillThenDecodeAcrossBuckets) {
  const int64_t B = 2, H = 2, D = 3;
  KvCache cache({1, H, D}, B, 200);
  auto code = [](int64_t b, int64_t h, int64_t token, int64_t d) { return float(b * 100000 + h * 10000 + token * 10 + d); };
  cache.append(0, present(B, H, 70, D, code), present(B, H, 70, D, code));
  std::vector<std::vector<int64_t>> mask(B, std::vector<int64_t>(70, 1));
  mask[1][0] = 0;  // left padding in row 1
  cache.advance_prefill(mask);
  EXPECT_EQ(cache.length(), 70);
  EXPECT_EQ(cache.bucket(), 128);
  for (int64_t token = 70; token < 140; token++) {
    int64_t bucket = cache.bucket();
    Tensor past = cache.past_key(0);
    ASSERT_EQ(past.shape(), (Shape{B, H, bucket, D}));
    EXPECT_EQ(at(past, 1, 1, token - 1, 2), code(1, 1, token - 1, 2));
    EXPECT_EQ(at(past, 0, 1, token, 0), 0.0f) << "positions past the length are zero";
    Tensor m = cache.decode_mask();
    ASSERT_EQ(m.shape(), (Shape{B, bucket + 1}));
    EXPECT_EQ(m.data<int64_t>()[bucket + 1], 0) << "row 1's padding stays masked";
    EXPECT_EQ(m.data<int64_t>()[bucket], 1);
    EXPECT_EQ(m.data<int64_t>()[token], 0);
    EXPECT_EQ(m.data<int64_t>()[token - 1], 1);
    // The decoder's new position: the token's key and value.
    auto step = [&](int64_t b, int64_t h, int64_t, int64_t d) { return code(b, h, token, d); };
    cache.append(0, present(B, H, 1, D, step), present(B, H, 1, D, step));
    cache.advance_decode();
  }
  EXPECT_EQ(cache.bucket(), 200);
  Tensor past = cache.past_value(0);
  for (int64_t token : {0, 69, 70, 127, 128, 139}) EXPECT_EQ(at(past, 1, 0, token, 1), code(1, 0, token, 1));
}

TEST(KvCache, RefusesWhatDoesNotFit) {
  KvCache cache({1, 1, 1}, 1, 4);
  auto zero = [](int64_t, int64_t, int64_t, int64_t) { return 0.0f; };
  EXPECT_THROW(cache.append(0, present(1, 1, 5, 1, zero), present(1, 1, 5, 1, zero)), Error);
  EXPECT_THROW(cache.append(0, present(1, 2, 3, 1, zero), present(1, 2, 3, 1, zero)), Error);
  cache.append(0, present(1, 1, 4, 1, zero), present(1, 1, 4, 1, zero));
  cache.advance_prefill({{1, 1, 1, 1}});
  try {
    cache.append(0, present(1, 1, 1, 1, zero), present(1, 1, 1, 1, zero));
    FAIL() << "a full context took another token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context of 4 tokens is full"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vlrt::vlm

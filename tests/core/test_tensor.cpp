#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/precision.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ops/shape_util.h"

namespace vlrt {

TEST(Tensor, ShapeAndView) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(-1), 3);
  Tensor v = t.reshaped({3, 2});
  EXPECT_EQ(v.data<float>()[5], 6.0f);
  EXPECT_THROW(t.reshaped({4, 2}), Error);
  EXPECT_THROW(t.data<int64_t>(), Error);
}

TEST(Tensor, ElementCountOfEmptyAndOverflowingShapes) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({3, 0, int64_t(1) << 62, 1000}), 0);  // empty, however large the others
  EXPECT_THROW(shape_numel({int64_t(1) << 40, int64_t(1) << 30}), Error);
}

TEST(Precision, RoundsToHalfTypes) {
  float v[3] = {1.f + 1.f / 512, 70000.f, 0.1f};
  float b[3] = {v[0], v[1], v[2]};
  round_to_precision(v, 3, Precision::fp16);
  EXPECT_EQ(v[0], 1.f + 1.f / 512);  // fp16 keeps 10 fraction bits
  EXPECT_TRUE(std::isinf(v[1]));     // beyond fp16's range
  EXPECT_NEAR(v[2], 0.1f, 1e-4);
  round_to_precision(b, 3, Precision::bf16);
  EXPECT_EQ(b[0], 1.f);  // bf16 keeps 7: rounds to even
  EXPECT_EQ(b[1], 70144.f);
  float same = 0.3f;
  round_to_precision(&same, 1, Precision::fp32);
  EXPECT_EQ(same, 0.3f);
}

TEST(Half, RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f}) {
    float back = half_to_float(float_to_half(f));
    EXPECT_NEAR(back, f, std::abs(f) * 1e-3 + 1e-8) << f;
  }
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
}

TEST(Broadcast, OnnxRules) {
  EXPECT_EQ(broadcast_shapes({2, 3, 4, 5}, {5}), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({1, 4, 5}, {2, 3, 1, 1}), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {3}), (Shape{3}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  EXPECT_THROW(broadcast_shapes({1, 900, 4}, {1, 900, 256}), Error);
}

TEST(ThreadPool, CoversRangeOnce) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  for (int rep = 0; rep < 20; rep++)
    pool.parallel_for(1000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; i++) hits[i]++;
    });
  for (int h : hits) EXPECT_EQ(h, 20);
}

}  // namespace vlrt

namespace vlrt {

TEST(ThreadPool, ManyJobsOfChangingSizeFromTwoCallersEachRunOnce) {
  // Back-to-back jobs (spinning workers pick them up), sizes that give a worker a chunk in
  // one job and none in the next, sleeps that let the workers fall asleep in between, and a
  // second thread calling at the same time (its calls run inline).
  ThreadPool pool(4);
  auto caller = [&pool](int seed, std::atomic<int64_t>& errors) {
    std::vector<int> hits(64);
    for (int rep = 0; rep < 3000; rep++) {
      int64_t n = 1 + (rep * 7 + seed) % 64;
      std::fill(hits.begin(), hits.end(), 0);
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) hits[size_t(i)]++;
      });
      for (int64_t i = 0; i < 64; i++) errors += hits[size_t(i)] != (i < n ? 1 : 0);
      if (rep % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  std::atomic<int64_t> errors_a{0}, errors_b{0};
  std::thread other(caller, 3, std::ref(errors_b));
  caller(0, errors_a);
  other.join();
  EXPECT_EQ(errors_a.load(), 0);
  EXPECT_EQ(errors_b.load(), 0);
}

TEST(ThreadPool, ExceptionInAChunkReachesTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t b, int64_t) {
                                   if (b > 0) fail("bad index in chunk");
                                 }),
               Error);
  // Still usable afterwards, and nested calls run inline.
  std::vector<int> hits(10, 0);
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) pool.parallel_for(1, [&](int64_t, int64_t) { hits[i]++; });
  });
  for (int h : hits) EXPECT_EQ(h, 1);
}

}  // namespace vlrt

namespace vlrt {

// A buffer that can be refilled gives its memory back on evict() and gets its contents back
// on the next access; one that cannot refuses to be evicted.
TEST(Buffer, EvictedContentsAreRefilledOnTheNextAccess) {
  Tensor t(DType::f32, {4, 5});
  for (int i = 0; i < 20; i++) t.data<float>()[i] = float(i) * 0.5f;
  EXPECT_FALSE(t.buffer()->evict());
  int refills = 0;
  t.buffer()->refill = [&refills](void* dst) {
    refills++;
    for (int i = 0; i < 20; i++) static_cast<float*>(dst)[i] = float(i) * 0.5f;
  };
  Tensor view = t.reshaped({20});  // shares the buffer
  EXPECT_TRUE(t.buffer()->evict());
  EXPECT_TRUE(view.buffer()->evicted());
  EXPECT_EQ(view.data<float>()[7], 3.5f);
  EXPECT_EQ(t.data<float>()[19], 9.5f);
  EXPECT_EQ(refills, 1);
  EXPECT_FALSE(t.buffer()->evicted());
}

}  // namespace vlrt

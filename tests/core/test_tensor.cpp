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

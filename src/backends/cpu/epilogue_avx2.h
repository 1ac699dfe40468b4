// The fused activations on one __m256 for vlrt's own AVX2 convolution kernels (the Winograd and
// the direct convolution; prepare_util.h says which they take). Include only from files built
// for AVX2.
#pragma once

#include <immintrin.h>

#include "backends/cpu/vector_math.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

inline __m256 avx2_activate(const FusedActivation& a, __m256 x) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  switch (a.kind) {
    case FusedActivation::relu: return _mm256_max_ps(x, zero);
    case FusedActivation::clip: return _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(a.alpha)), _mm256_set1_ps(a.beta));
    case FusedActivation::leaky_relu:
      return _mm256_blendv_ps(_mm256_mul_ps(x, _mm256_set1_ps(a.alpha)), x, _mm256_cmp_ps(x, zero, _CMP_GE_OQ));
    case FusedActivation::hard_sigmoid:
      return _mm256_min_ps(
          _mm256_max_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(a.alpha), _mm256_set1_ps(a.beta)), zero), one);
    case FusedActivation::hard_swish: {
      __m256 gate = _mm256_fmadd_ps(x, _mm256_set1_ps(1.f / 6), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(x, _mm256_min_ps(_mm256_max_ps(gate, zero), one));
    }
    case FusedActivation::sigmoid:
    case FusedActivation::silu: {  // the fused epilogue's sigmoid (vector_math.h), one half at a time
      f32x4 lo = (f32x4)_mm256_castps256_ps128(x), hi = (f32x4)_mm256_extractf128_ps(x, 1);
      lo = sigmoid_f32x4(lo);
      hi = sigmoid_f32x4(hi);
      __m256 s = _mm256_insertf128_ps(_mm256_castps128_ps256((__m128)lo), (__m128)hi, 1);
      return a.kind == FusedActivation::silu ? _mm256_mul_ps(x, s) : s;
    }
    case FusedActivation::quantize_dequantize: {  // contrib_semantics.h's quantize_dequantize
      __m256 r = _mm256_round_ps(_mm256_div_ps(x, _mm256_set1_ps(a.alpha)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(a.beta)), _mm256_set1_ps(a.gamma));  // NaN: low
      return _mm256_mul_ps(_mm256_add_ps(r, zero), _mm256_set1_ps(a.alpha));
    }
    default: return x;
  }
}

// The lanes of the last channel block that hold real channels (`real` of 8), as a mask that
// zeroes the padding channels.
inline __m256 avx2_block_mask(int64_t real) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(real)), lanes));
}

// Calls body(activation) with the activation as a function of one __m256 whose kind is known
// at compile time for none and Relu (the common ones), so that a loop in body does not choose
// the activation per vector.
template <typename Body>
inline void avx2_with_activation(const FusedActivation& a, Body&& body) {
  switch (a.kind) {
    case FusedActivation::none: return body([](__m256 x) { return x; });
    case FusedActivation::relu: return body([](__m256 x) { return _mm256_max_ps(x, _mm256_setzero_ps()); });
    default: return body([&a](__m256 x) { return avx2_activate(a, x); });
  }
}

// The epilogue of one block of 8 channels at one pixel, act(pre(y + bias) + z): bias the
// block's 8 values, z (null: none) the residual at the pixel; of the 8 channels the first `real`
// are real, the others set to zero. Act: avx2_with_activation's function.
template <class Act>
struct Avx2BlockEpilogue {
  Avx2BlockEpilogue(const float* bias, int64_t real, const FusedActivation& pre, Act act)
      : b(_mm256_loadu_ps(bias)),
        mask(avx2_block_mask(real)),
        masked(real < 8),
        has_pre(pre.kind != FusedActivation::none),
        pre(pre),
        act(act) {}

  __m256 operator()(__m256 y, const float* z) const {
    __m256 v = _mm256_add_ps(y, b);
    if (has_pre) v = avx2_activate(pre, v);
    if (z) v = _mm256_add_ps(v, _mm256_loadu_ps(z));
    v = act(v);
    return masked ? _mm256_and_ps(v, mask) : v;
  }

  __m256 b, mask;
  bool masked, has_pre;
  const FusedActivation& pre;
  Act act;
};

// That epilogue in place over `pixels` pixels of one block at y (z: the residual at the same
// pixels, or null).
inline void avx2_epilogue_block(float* y, const float* z, int64_t pixels, const float* bias, int64_t real,
                                const FusedActivation& a, const FusedActivation& pre) {
  avx2_with_activation(a, [&](auto act) {
    const Avx2BlockEpilogue<decltype(act)> epilogue(bias, real, pre, act);
    for (int64_t p = 0; p < pixels; p++)
      _mm256_storeu_ps(y + p * 8, epilogue(_mm256_loadu_ps(y + p * 8), z ? z + p * 8 : nullptr));
  });
}

}  // namespace vlrt

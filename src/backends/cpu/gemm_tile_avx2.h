// The 6x16 float32 register tile of vlrt's own matrix products on AVX2 (the Winograd
// convolution's 36 products, the packed MatMul). Include only from files built for AVX2.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/panel_prefetch.h"
#include "core/dtype.h"

namespace vlrt {

// 16 values of a panel row as two vectors of float32: float32 as stored; float16 (F16C) and
// bfloat16 (the upper half of a float32) widened, which is exact.
inline void load_row16(const float* b, __m256& lo, __m256& hi) {
  lo = _mm256_loadu_ps(b);
  hi = _mm256_loadu_ps(b + 8);
}
inline void load_row16(const half_t* b, __m256& lo, __m256& hi) {
  lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 8)));
}
inline void load_row16(const bf16_t* b, __m256& lo, __m256& hi) {
  auto widen = [](const bf16_t* p) {
    __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  };
  lo = widen(b);
  hi = widen(b + 8);
}

// acc += a * b with acc kept in its register: written as _mm256_fmadd_ps, GCC may put a sum in
// the broadcast's register and move it back every step (it did in the direct convolution's tile,
// two more instructions per step).
inline void fma_in_place(__m256& acc, __m256 a, __m256 b) {
  __asm__("vfmadd231ps %[b], %[a], %[acc]" : [acc] "+x"(acc) : [a] "x"(a), [b] "x"(b));
}

// C[r][0..16) = sum_c A[r][c] B[c][0..16) for Rows rows of A (lda apart) and a panel of B
// (k rows of 16 values of type W, contiguous), stored ldc apart; with Accumulate, added to what
// C holds. Each step also asks for the next row of `prefetch`'s share (panel_prefetch.h). The
// accumulators are named one by one: as an array GCC keeps a copy of them in memory and stores it
// every step.
template <int Rows, bool Accumulate = false, class W = float>
inline void gemm_tile(const float* a, int64_t lda, const W* b, int64_t k, float* c, int64_t ldc,
                      packed::PanelPrefetch prefetch = {}) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if constexpr (Accumulate) {
#define VLRT_LOAD(r)                               \
  if constexpr (Rows > r) {                        \
    c##r##0 = _mm256_loadu_ps(c + r * ldc);        \
    c##r##1 = _mm256_loadu_ps(c + r * ldc + 8);    \
  }
    VLRT_LOAD(0) VLRT_LOAD(1) VLRT_LOAD(2) VLRT_LOAD(3) VLRT_LOAD(4) VLRT_LOAD(5)
#undef VLRT_LOAD
  }
  for (int64_t p = 0; p < k; p++) {
    prefetch.step_once();
    __m256 b0, b1, x;
    load_row16(b + p * 16, b0, b1);
#define VLRT_ROW(r)                           \
  if constexpr (Rows > r) {                   \
    x = _mm256_broadcast_ss(a + r * lda + p); \
    fma_in_place(c##r##0, x, b0);             \
    fma_in_place(c##r##1, x, b1);             \
  }
    VLRT_ROW(0) VLRT_ROW(1) VLRT_ROW(2) VLRT_ROW(3) VLRT_ROW(4) VLRT_ROW(5)
#undef VLRT_ROW
  }
#define VLRT_STORE(r)                              \
  if constexpr (Rows > r) {                        \
    _mm256_storeu_ps(c + r * ldc, c##r##0);        \
    _mm256_storeu_ps(c + r * ldc + 8, c##r##1);    \
  }
  VLRT_STORE(0) VLRT_STORE(1) VLRT_STORE(2) VLRT_STORE(3) VLRT_STORE(4) VLRT_STORE(5)
#undef VLRT_STORE
}

template <bool Accumulate = false, class W = float>
inline void gemm_tile(int rows, const float* a, int64_t lda, const W* b, int64_t k, float* c, int64_t ldc,
                      packed::PanelPrefetch prefetch = {}) {
  switch (rows) {
    case 6:
      return gemm_tile<6, Accumulate, W>(a, lda, b, k, c, ldc, prefetch);
    case 5:
      return gemm_tile<5, Accumulate, W>(a, lda, b, k, c, ldc, prefetch);
    case 4:
      return gemm_tile<4, Accumulate, W>(a, lda, b, k, c, ldc, prefetch);
    case 3:
      return gemm_tile<3, Accumulate, W>(a, lda, b, k, c, ldc, prefetch);
    case 2:
      return gemm_tile<2, Accumulate, W>(a, lda, b, k, c, ldc, prefetch);
    default:
      return gemm_tile<1, Accumulate, W>(a, lda, b, k, c, ldc, prefetch);
  }
}

}  // namespace vlrt

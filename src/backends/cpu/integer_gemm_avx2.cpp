// The AVX2 tile of integer_gemm (compiled with its own -march: CMakeLists.txt).
#include "backends/cpu/integer_gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

namespace vlrt {

namespace {

// The tile for its first R rows: the rows past m of A's last strip are not computed (a product of
// 32 rows has a strip of 2). Up to twelve named accumulators, stored once after the loop: kept in
// registers (an array indexed by the row at the end made the compiler keep them on the stack, a
// store and a load per step).
template <int R>
void tile_rows(int64_t kp, const int32_t* a, const int16_t* b, int32_t* c, int64_t ldc, int cols,
               bool accumulate) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
          c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < kp; p++) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    __m256i ar = _mm256_set1_epi32(a[0]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(ar, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(ar, b1));
    if constexpr (R > 1) {
      ar = _mm256_set1_epi32(a[1]);
      c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(ar, b0));
      c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(ar, b1));
    }
    if constexpr (R > 2) {
      ar = _mm256_set1_epi32(a[2]);
      c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(ar, b0));
      c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(ar, b1));
    }
    if constexpr (R > 3) {
      ar = _mm256_set1_epi32(a[3]);
      c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(ar, b0));
      c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(ar, b1));
    }
    if constexpr (R > 4) {
      ar = _mm256_set1_epi32(a[4]);
      c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(ar, b0));
      c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(ar, b1));
    }
    if constexpr (R > 5) {
      ar = _mm256_set1_epi32(a[5]);
      c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(ar, b0));
      c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(ar, b1));
    }
    a += 6;
    b += 32;
  }
  alignas(32) int32_t tile[6][16];
  const __m256i sums[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int r = 0; r < R; r++) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile[r]), sums[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile[r] + 8), sums[r][1]);
  }
  for (int r = 0; r < R; r++) {
    int32_t* row = c + r * ldc;
    if (cols == 16) {
      __m256i* out = reinterpret_cast<__m256i*>(row);
      __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(tile[r]));
      __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(tile[r] + 8));
      if (accumulate) {
        lo = _mm256_add_epi32(lo, _mm256_loadu_si256(out));
        hi = _mm256_add_epi32(hi, _mm256_loadu_si256(out + 1));
      }
      _mm256_storeu_si256(out, lo);
      _mm256_storeu_si256(out + 1, hi);
      continue;
    }
    for (int j = 0; j < cols; j++)
      row[j] = accumulate ? int32_t(uint32_t(row[j]) + uint32_t(tile[r][j])) : tile[r][j];  // wraps
  }
}

}  // namespace

void integer_gemm_tile_avx2(int64_t kp, const int32_t* a, const int16_t* b, int32_t* c, int64_t ldc, int rows,
                            int cols, bool accumulate) {
  switch (rows) {
    case 1:
      return tile_rows<1>(kp, a, b, c, ldc, cols, accumulate);
    case 2:
      return tile_rows<2>(kp, a, b, c, ldc, cols, accumulate);
    case 3:
      return tile_rows<3>(kp, a, b, c, ldc, cols, accumulate);
    case 4:
      return tile_rows<4>(kp, a, b, c, ldc, cols, accumulate);
    case 5:
      return tile_rows<5>(kp, a, b, c, ldc, cols, accumulate);
    default:
      return tile_rows<6>(kp, a, b, c, ldc, cols, accumulate);
  }
}

}  // namespace vlrt
#endif

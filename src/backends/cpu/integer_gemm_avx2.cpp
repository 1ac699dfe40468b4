// The AVX2 tile of integer_gemm (compiled with its own -march: CMakeLists.txt).
#include "backends/cpu/integer_gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

namespace vlrt {

void integer_gemm_tile_avx2(int64_t kp, const int32_t* a, const int16_t* b, int32_t* c, int64_t ldc, int rows,
                            int cols, bool accumulate) {
  __m256i acc[6][2];
  for (int r = 0; r < 6; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t p = 0; p < kp; p++) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    for (int r = 0; r < 6; r++) {
      __m256i ar = _mm256_set1_epi32(a[r]);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(ar, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(ar, b1));
    }
    a += 6;
    b += 32;
  }
  for (int r = 0; r < rows; r++) {
    int32_t* row = c + r * ldc;
    if (cols == 16) {
      __m256i* out = reinterpret_cast<__m256i*>(row);
      if (accumulate) {
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_loadu_si256(out));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_loadu_si256(out + 1));
      }
      _mm256_storeu_si256(out, acc[r][0]);
      _mm256_storeu_si256(out + 1, acc[r][1]);
      continue;
    }
    alignas(32) int32_t tile[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile + 8), acc[r][1]);
    for (int j = 0; j < cols; j++) row[j] = accumulate ? int32_t(uint32_t(row[j]) + uint32_t(tile[j])) : tile[j];  // wraps
  }
}

}  // namespace vlrt
#endif

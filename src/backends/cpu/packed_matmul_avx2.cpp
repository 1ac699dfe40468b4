// The packed MatMul's loop on AVX2 (packed_matmul.h).
#include "backends/cpu/packed_matmul.h"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "backends/cpu/gemm_tile_avx2.h"

namespace vlrt::packed {

void products(const float* a, int64_t m, int64_t k, const float* panels, int64_t n, float* y, int64_t begin,
              int64_t end) {
  const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  alignas(32) float tail[6 * 16];
  for (int64_t job = begin; job < end; job++) {
    int64_t p = job / row_blocks, r0 = job % row_blocks * kRowBlock, r1 = std::min(m, r0 + kRowBlock);
    int64_t cols = std::min<int64_t>(16, n - p * 16);
    const float* b = panels + p * k * 16;
    for (int64_t r = r0; r < r1; r += 6) {
      int rows = int(std::min<int64_t>(6, r1 - r));
      float* c = y + r * n + p * 16;
      if (cols == 16) {
        gemm_tile(rows, a + r * k, k, b, k, c, n);
      } else {  // the last panel: its padding columns go to a scratch tile
        gemm_tile(rows, a + r * k, k, b, k, tail, 16);
        for (int i = 0; i < rows; i++) std::memcpy(c + i * n, tail + i * 16, size_t(cols) * sizeof(float));
      }
    }
  }
}

}  // namespace vlrt::packed

#endif  // __x86_64__

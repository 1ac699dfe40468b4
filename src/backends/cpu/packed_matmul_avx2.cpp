// The packed MatMul's loop on AVX2 (packed_matmul.h).
#include "backends/cpu/packed_matmul.h"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backends/cpu/gemm_tile_avx2.h"
#include "ops/shape_util.h"

namespace vlrt::packed {

template <class W>
void products(const float* a, int64_t k, const W* panels, int64_t n, float* y, const ProductJobs& jobs,
              int64_t begin, int64_t end, const FinishBlock* finish) {
  alignas(32) float tail[6 * 16];
  alignas(64) float widened[kDepthBlock * 16];
  for (int64_t job = begin; job < end; job++) {
    int64_t p, r0, r1;
    jobs.at(job, p, r0, r1);
    int64_t cols = std::min<int64_t>(16, n - p * 16);
    // K in blocks whose slice of the panel stays in L1 while every row tile of the job reads it.
    for (int64_t k0 = 0; k0 < k; k0 += kDepthBlock) {
      int64_t depth = std::min(kDepthBlock, k - k0);
      const W* b = panels + (p * k + k0) * 16;
      // The job's rows in tiles of up to 6 split evenly (32 as 6 6 5 5 5 5, not 6 6 6 6 6 2: a
      // tile of 2 rows loads as much of B as one of 6).
      const EvenTiles split(r1 - r0, 6);
      // A half-precision slice that several row tiles read is widened once, into L1 (for one or
      // two tiles the tile widens as it loads).
      const bool widen = !std::is_same_v<W, float> && split.tiles > 2;
      if (widen)
        for (int64_t i = 0; i < depth; i++) {
          __m256 lo, hi;
          load_row16(b + i * 16, lo, hi);
          _mm256_store_ps(widened + i * 16, lo);
          _mm256_store_ps(widened + i * 16 + 8, hi);
        }
      // The tiles also fetch the slice that comes next, as on AVX-512 (panel_prefetch.h).
      const bool fetch_next = jobs.prefetch_next(p, k0, depth, k);
      auto tile = [&](int rows, const float* a_rows, const auto* slice, float* c, int64_t ldc,
                      PanelPrefetch prefetch) {
        if (k0 == 0)
          gemm_tile(rows, a_rows, k, slice, depth, c, ldc, prefetch);
        else
          gemm_tile<true>(rows, a_rows, k, slice, depth, c, ldc, prefetch);
      };
      for (int64_t t = 0, r = r0; t < split.tiles; t++) {
        const auto prefetch =
            fetch_next ? PanelPrefetch::share(b + depth * 16, depth, t, split.tiles) : PanelPrefetch{};
        int rows = int(split.size(t));
        const float* a_rows = a + r * k + k0;
        float* c = y + r * n + p * 16;
        if (cols < 16) {  // the last panel: its padding columns go through a scratch tile
          for (int i = 0; i < rows; i++) std::memcpy(tail + i * 16, c + i * n, size_t(cols) * sizeof(float));
          c = tail;
        }
        int64_t ldc = cols < 16 ? 16 : n;
        if (widen)
          tile(rows, a_rows, widened, c, ldc, prefetch);
        else
          tile(rows, a_rows, b, c, ldc, prefetch);
        if (cols < 16)
          for (int i = 0; i < rows; i++) std::memcpy(y + (r + i) * n + p * 16, tail + i * 16, size_t(cols) * sizeof(float));
        r += rows;
      }
    }
    if (finish) (*finish)(r0, r1, p * 16, p * 16 + cols);
  }
}

template void products(const float*, int64_t, const float*, int64_t, float*, const ProductJobs&, int64_t, int64_t,
                       const FinishBlock*);
template void products(const float*, int64_t, const half_t*, int64_t, float*, const ProductJobs&, int64_t, int64_t,
                       const FinishBlock*);
template void products(const float*, int64_t, const bf16_t*, int64_t, float*, const ProductJobs&, int64_t, int64_t,
                       const FinishBlock*);

}  // namespace vlrt::packed

#endif  // __x86_64__

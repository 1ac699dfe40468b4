// The packed MatMul's loop on AVX-512 (packed_matmul.h), for float32 panels: one panel row of
// 16 columns is one register, and each multiply-add takes its A value as an embedded
// broadcast, so a step of an 8-row tile is one load and 8 instructions (the AVX2 tile: two
// loads, 6 broadcasts and 12 multiply-adds for 6 rows). Tiles of 12 rows ran vit_b_16 10%
// slower than the AVX2 tile on a Zen 4 (GCC keeps their 12 row addresses partly in vector
// registers); 8 rows was level there and 6% faster on bert_base, 8% on a [384,768]x[768,3072].
#include "backends/cpu/packed_matmul.h"
#include "backends/cpu/panel_prefetch.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "ops/shape_util.h"

namespace vlrt::packed {

namespace {

constexpr int kTileRows = 8;

// acc += broadcast(*a) * b, the broadcast read by the multiply-add itself. As an intrinsic GCC
// may load the broadcast into a register first, or move a sum between registers.
inline void fma_broadcast(__m512& acc, const float* a, __m512 b) {
  __asm__("vfmadd231ps %[a]%{1to16%}, %[b], %[acc]" : [acc] "+v"(acc) : [b] "v"(b), [a] "m"(*a));
}

// C[r][cols] (+)= sum_p A[r][p] B[p][0..16) for Rows rows of A (lda apart) and a slice of a
// panel (depth rows of 16 floats, 64-byte aligned); `mask` keeps the columns a last panel has.
// Each step also asks for the next row of `prefetch`'s share. The accumulators are named one by
// one so that each stays in its register.
template <int Rows, bool Accumulate>
void tile(const float* a, int64_t lda, const float* b, int64_t depth, float* c, int64_t ldc, __mmask16 mask,
          PanelPrefetch prefetch) {
  static_assert(Rows <= kTileRows, "the tile names kTileRows accumulators");
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
#define VLRT_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
  if constexpr (Accumulate) {
#define VLRT_LOAD(r) \
  if constexpr (Rows > r) c##r = _mm512_maskz_loadu_ps(mask, c + r * ldc);
    VLRT_ROWS(VLRT_LOAD)
#undef VLRT_LOAD
  }
  for (int64_t p = 0; p < depth; p++) {
    prefetch.step_once();
    const __m512 bp = _mm512_load_ps(b + p * 16);
#define VLRT_STEP(r) \
  if constexpr (Rows > r) fma_broadcast(c##r, a + r * lda + p, bp);
    VLRT_ROWS(VLRT_STEP)
#undef VLRT_STEP
  }
#define VLRT_STORE(r) \
  if constexpr (Rows > r) _mm512_mask_storeu_ps(c + r * ldc, mask, c##r);
  VLRT_ROWS(VLRT_STORE)
#undef VLRT_STORE
#undef VLRT_ROWS
}

template <bool Accumulate, int Rows = kTileRows>
void tile_of(int rows, const float* a, int64_t lda, const float* b, int64_t depth, float* c, int64_t ldc,
             __mmask16 mask, PanelPrefetch prefetch) {
  if constexpr (Rows > 1) {
    if (rows < Rows) return tile_of<Accumulate, Rows - 1>(rows, a, lda, b, depth, c, ldc, mask, prefetch);
  }
  tile<Rows, Accumulate>(a, lda, b, depth, c, ldc, mask, prefetch);
}

}  // namespace

void products_avx512(const float* a, int64_t k, const float* panels, int64_t n, float* y,
                     const ProductJobs& jobs, int64_t begin, int64_t end, const FinishBlock* finish) {
  for (int64_t job = begin; job < end; job++) {
    int64_t p, r0, r1;
    jobs.at(job, p, r0, r1);
    const int64_t cols = std::min<int64_t>(16, n - p * 16);
    const __mmask16 mask = __mmask16((1u << cols) - 1);
    // The job's rows in tiles of up to 8 split evenly (20 as 7 7 6).
    const EvenTiles split(r1 - r0, kTileRows);
    // K in blocks whose slice of the panel stays in L1 while every row tile of the job reads it.
    for (int64_t k0 = 0; k0 < k; k0 += kDepthBlock) {
      const int64_t depth = std::min(kDepthBlock, k - k0);
      const float* b = panels + (p * k + k0) * 16;
      // The tiles also fetch the slice that comes next (the panel's next depth block, or the next
      // panel's first when the next job reads it): panel_prefetch.h.
      const bool fetch_next = jobs.prefetch_next(p, k0, depth, k);
      for (int64_t t = 0, r = r0; t < split.tiles; t++) {
        const int rows = int(split.size(t));
        float* c = y + r * n + p * 16;
        const auto prefetch =
            fetch_next ? PanelPrefetch::share(b + depth * 16, depth, t, split.tiles) : PanelPrefetch{};
        if (k0 == 0)
          tile_of<false>(rows, a + r * k + k0, k, b, depth, c, n, mask, prefetch);
        else
          tile_of<true>(rows, a + r * k + k0, k, b, depth, c, n, mask, prefetch);
        r += rows;
      }
    }
    if (finish) (*finish)(r0, r1, p * 16, p * 16 + cols);
  }
}

}  // namespace vlrt::packed

#endif  // __x86_64__

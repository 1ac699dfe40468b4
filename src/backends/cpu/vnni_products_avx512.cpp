// The VNNI product's loop (vnni_products.h): a tile of 8 rows of A by one panel (16 columns), one
// register of int32 sums per row; each step takes one row of the panel (4 values of k for each of its
// 16 columns) and, per row of A, 4 bytes of A broadcast to every column, and adds their 4 products
// to each sum (vpdpbusd: uint8 times int8, exact in 32 bits).
#include "backends/cpu/vnni_products.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/packed_matmul.h"
#include "backends/cpu/panel_prefetch.h"
#include "ops/shape_util.h"

namespace vlrt::packed {

namespace {

constexpr int kTileRows = 8;

inline __m512i broadcast_quad(const uint8_t* a) {
  int32_t v;
  std::memcpy(&v, a, sizeof v);
  return _mm512_set1_epi32(v);
}

// c[r][0..16) (+)= the quads' products for Rows rows of A (lda apart) and `quads` rows of a panel;
// c holds 16 sums per row. Each step also asks for the next row of `prefetch`'s share.
template <int Rows, bool Accumulate>
void tile(const uint8_t* a, int64_t lda, const int8_t* b, int64_t quads, int32_t* c, PanelPrefetch prefetch) {
  static_assert(Rows <= kTileRows, "the tile names kTileRows accumulators");
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
#define VLRT_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
  if constexpr (Accumulate) {
#define VLRT_LOAD(r) \
  if constexpr (Rows > r) c##r = _mm512_loadu_si512(c + r * 16);
    VLRT_ROWS(VLRT_LOAD)
#undef VLRT_LOAD
  }
  for (int64_t q = 0; q < quads; q++) {
    prefetch.step_once();
    const __m512i bq = _mm512_load_si512(b + q * 64);
#define VLRT_STEP(r) \
  if constexpr (Rows > r) c##r = _mm512_dpbusd_epi32(c##r, broadcast_quad(a + r * lda + 4 * q), bq);
    VLRT_ROWS(VLRT_STEP)
#undef VLRT_STEP
  }
#define VLRT_STORE(r) \
  if constexpr (Rows > r) _mm512_storeu_si512(c + r * 16, c##r);
  VLRT_ROWS(VLRT_STORE)
#undef VLRT_STORE
#undef VLRT_ROWS
}

template <bool Accumulate, int Rows = kTileRows>
void tile_of(int rows, const uint8_t* a, int64_t lda, const int8_t* b, int64_t quads, int32_t* c,
             PanelPrefetch prefetch) {
  if constexpr (Rows > 1) {
    if (rows < Rows) return tile_of<Accumulate, Rows - 1>(rows, a, lda, b, quads, c, prefetch);
  }
  tile<Rows, Accumulate>(a, lda, b, quads, c, prefetch);
}

// The epilogue (vnni_products.h) on rows [r0, r1) of the panel's columns from c0: sums holds
// sum A B, 16 per row; sum (A - a_zp) B = sum A B - a_zp * (the column's sum of B), wrapping.
void finish(int64_t r0, int64_t r1, int64_t c0, int32_t a_zp, const VnniPanels& b, const int32_t* sums,
            const VnniEpilogue& e) {
  const int64_t n = b.n, cols = std::min<int64_t>(16, n - c0);
  const __mmask16 mask = __mmask16((1u << cols) - 1);
  const __m512i sums_of_b = _mm512_maskz_loadu_epi32(mask, b.column_sums.data() + c0);
  const __m512i zero_offset = _mm512_mullo_epi32(_mm512_set1_epi32(a_zp), sums_of_b);
  const __m512i column_offsets =
      e.column_offsets ? _mm512_maskz_loadu_epi32(mask, e.column_offsets + c0) : _mm512_setzero_si512();
  const __m512 scale = e.scale ? _mm512_maskz_loadu_ps(mask, e.scale + c0) : _mm512_setzero_ps();
  const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(mask, e.bias + c0) : _mm512_setzero_ps();
  for (int64_t r = r0; r < r1; r++) {
    __m512i s = _mm512_sub_epi32(_mm512_loadu_si512(sums + (r - r0) * 16), zero_offset);
    if (e.column_offsets)
      s = _mm512_add_epi32(s, _mm512_mullo_epi32(column_offsets, _mm512_set1_epi32(int32_t(e.row_sums[r]))));
    if (e.int_out) {
      _mm512_mask_storeu_epi32(e.int_out + r * n + c0, mask, s);
      continue;
    }
    // Two roundings, as the reference kernels' separate Mul and Add (the file is built without
    // contracting them into one multiply-add).
    __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(s), scale);
    if (e.bias) y = _mm512_add_ps(y, bias);
    for (const VnniEpilogue::Output& o : e.outputs) {
      const int64_t lo = std::max(c0, o.first), hi = std::min(c0 + cols, o.first + o.columns);
      if (lo >= hi) continue;
      // Lanes [lo - c0, hi - c0) to the output's columns from lo - o.first.
      __m512 part = y;
      if (lo > c0) {  // an output that starts inside this panel: its lanes moved to the front
        const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        part = _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(lo - c0))), y);
      }
      _mm512_mask_storeu_ps(o.data + r * o.columns + (lo - o.first), __mmask16((1u << (hi - lo)) - 1), part);
    }
  }
}

}  // namespace

void vnni_products_avx512(const uint8_t* a, int64_t lda, int32_t a_zp, const VnniPanels& b,
                          const ProductJobs& jobs, int64_t begin, int64_t end, const VnniEpilogue& epilogue) {
  const int64_t quads = b.quads();
  // Rows of 64 bytes as 16 int32: what PanelPrefetch counts in.
  const int32_t* rows = reinterpret_cast<const int32_t*>(b.data.data());
  thread_local std::vector<int32_t> t_sums;
  for (int64_t job = begin; job < end; job++) {
    int64_t p, r0, r1;
    jobs.at(job, p, r0, r1);
    if (t_sums.size() < size_t((r1 - r0) * 16)) t_sums.resize(size_t((r1 - r0) * 16));
    int32_t* sums = t_sums.data();
    const EvenTiles split(r1 - r0, kTileRows);
    for (int64_t q0 = 0; q0 < quads; q0 += kDepthBlock) {
      const int64_t depth = std::min(kDepthBlock, quads - q0);
      const int32_t* slice = rows + (p * quads + q0) * 16;
      const bool fetch_next = jobs.prefetch_next(p, q0, depth, quads);
      for (int64_t t = 0, r = 0; t < split.tiles; t++) {
        const int count = int(split.size(t));
        const auto prefetch =
            fetch_next ? PanelPrefetch::share(slice + depth * 16, depth, t, split.tiles) : PanelPrefetch{};
        const uint8_t* a_rows = a + (r0 + r) * lda + 4 * q0;
        const int8_t* panel = reinterpret_cast<const int8_t*>(slice);
        if (q0 == 0)
          tile_of<false>(count, a_rows, lda, panel, depth, sums + r * 16, prefetch);
        else
          tile_of<true>(count, a_rows, lda, panel, depth, sums + r * 16, prefetch);
        r += count;
      }
    }
    finish(r0, r1, p * 16, a_zp, b, sums, epilogue);
  }
}

}  // namespace vlrt::packed

#endif  // __x86_64__

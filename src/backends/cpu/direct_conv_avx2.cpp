// The direct convolution's loops on AVX2 (direct_conv.h): one __m256 is 8 channels of a block at
// one pixel.
#include "backends/cpu/direct_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/epilogue_avx2.h"
#include "backends/cpu/gemm_tile_avx2.h"
#include "ops/shape_util.h"

namespace vlrt::direct {

namespace {

// Where one job's 16 output channels go: two blocks of Y (the second null past the last block).
// The tiles keep their sums there; the epilogue follows once the depth is done.
struct Out {
  float *y0, *y1;

  void keep(int64_t px, __m256 v0, __m256 v1) const {
    _mm256_storeu_ps(y0 + px * 8, v0);
    if (y1) _mm256_storeu_ps(y1 + px * 8, v1);
  }
  void load(int64_t px, __m256& v0, __m256& v1) const {
    v0 = _mm256_loadu_ps(y0 + px * 8);
    v1 = y1 ? _mm256_loadu_ps(y1 + px * 8) : _mm256_setzero_ps();
  }
};

// Depth steps a tile runs through before the next tile: 16 KiB of a panel of 8-channel steps, so
// that the panel's slice stays in L1 while the job's tiles read it.
constexpr int64_t kDepthGroups = 32;

// Rows output pixels from px on (the top-left taps of their windows at `origins`) by 16
// channels: each step of the depth broadcasts `lanes` channels (8 when Full) of each pixel
// against the panel's lanes x 16 weights, adding to the sums in Y unless these steps begin the
// depth (`first`). Each step also asks for the next row of `prefetch`'s share (panel_prefetch.h).
// The accumulators are named one by one (see gemm_tile_avx2.h).
template <int Rows, bool Full, class W>
void tile(const float* const* origins, const int64_t* offsets, int64_t groups, int lanes, const W* w,
          const Out& o, int64_t px, bool first, packed::PanelPrefetch prefetch) {
  if constexpr (Full) lanes = 8;
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (!first) {
#define VLRT_LOAD(r) \
  if constexpr (Rows > r) o.load(px + r, c##r##0, c##r##1);
    VLRT_LOAD(0) VLRT_LOAD(1) VLRT_LOAD(2) VLRT_LOAD(3) VLRT_LOAD(4) VLRT_LOAD(5)
#undef VLRT_LOAD
  }
  const float *o0 = origins[0], *o1 = origins[Rows > 1 ? 1 : 0], *o2 = origins[Rows > 2 ? 2 : 0],
              *o3 = origins[Rows > 3 ? 3 : 0], *o4 = origins[Rows > 4 ? 4 : 0], *o5 = origins[Rows > 5 ? 5 : 0];
  for (int64_t s = 0; s < groups; s++, w += lanes * 16) {
    const int64_t off = offsets[s];
    const float *a0 = o0 + off, *a1 = o1 + off, *a2 = o2 + off, *a3 = o3 + off, *a4 = o4 + off, *a5 = o5 + off;
    for (int i = 0; i < lanes; i++) {
      prefetch.step_once();
      __m256 b0, b1, x;
      load_row16(w + i * 16, b0, b1);
#define VLRT_ROW(r)                    \
  if constexpr (Rows > r) {            \
    x = _mm256_broadcast_ss(a##r + i); \
    fma_in_place(c##r##0, x, b0);      \
    fma_in_place(c##r##1, x, b1);      \
  }
      VLRT_ROW(0)
      VLRT_ROW(1) VLRT_ROW(2) VLRT_ROW(3) VLRT_ROW(4) VLRT_ROW(5)
#undef VLRT_ROW
          // Keeps GCC from loading the next steps' weights early: with them in flight the 12 sums no
          // longer fit in the 16 registers and move around every step.
          __asm__ volatile("" ::
                               : "memory");
    }
  }
#define VLRT_KEEP(r) \
  if constexpr (Rows > r) o.keep(px + r, c##r##0, c##r##1);
  VLRT_KEEP(0) VLRT_KEEP(1) VLRT_KEEP(2) VLRT_KEEP(3) VLRT_KEEP(4) VLRT_KEEP(5)
#undef VLRT_KEEP
}

template <bool Full, class W>
void tile(int rows, const float* const* origins, const int64_t* offsets, int64_t groups, int lanes,
          const W* w, const Out& o, int64_t px, bool first, packed::PanelPrefetch prefetch) {
  switch (rows) {
    case 6:
      return tile<6, Full, W>(origins, offsets, groups, lanes, w, o, px, first, prefetch);
    case 5:
      return tile<5, Full, W>(origins, offsets, groups, lanes, w, o, px, first, prefetch);
    case 4:
      return tile<4, Full, W>(origins, offsets, groups, lanes, w, o, px, first, prefetch);
    case 3:
      return tile<3, Full, W>(origins, offsets, groups, lanes, w, o, px, first, prefetch);
    case 2:
      return tile<2, Full, W>(origins, offsets, groups, lanes, w, o, px, first, prefetch);
    default:
      return tile<1, Full, W>(origins, offsets, groups, lanes, w, o, px, first, prefetch);
  }
}

// r[i][j] <- r[j][i].
inline void transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace

void copy_to_blocks(const Frame& f, const float* x, float* blocked, int64_t begin, int64_t end) {
  const size_t pixel = 8 * sizeof(float);
  const int64_t blocks = f.blocks();
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / (blocks * f.hp), cb = r / f.hp % blocks, sy = r % f.hp - f.top;
    float* dst = blocked + r * f.wp * 8;
    if (sy < 0 || sy >= f.h) {
      std::memset(dst, 0, size_t(f.wp) * pixel);
      continue;
    }
    std::memset(dst, 0, size_t(f.left) * pixel);
    float* middle = dst + f.left * 8;
    if (!f.plain) {
      std::memcpy(middle, x + ((n * blocks + cb) * f.h + sy) * f.w * 8, size_t(f.w) * pixel);
    } else {  // 8 rows of channels to pixels of 8 channels, 8 pixels at a time
      static const float zeros[8] = {};
      const float* planes[8];
      for (int64_t c = 0; c < 8; c++) {
        int64_t ch = cb * 8 + c;
        planes[c] = ch < f.channels ? x + ((n * f.channels + ch) * f.h + sy) * f.w : nullptr;
      }
      int64_t i = 0;
      for (; i + 8 <= f.w; i += 8) {
        __m256 v[8];
        for (int c = 0; c < 8; c++) v[c] = _mm256_loadu_ps(planes[c] ? planes[c] + i : zeros);
        transpose8x8(v);
        for (int j = 0; j < 8; j++) _mm256_storeu_ps(middle + (i + j) * 8, v[j]);
      }
      for (; i < f.w; i++)
        for (int c = 0; c < 8; c++) middle[i * 8 + c] = planes[c] ? planes[c][i] : 0.f;
    }
    std::memset(middle + f.w * 8, 0, size_t(f.wp - f.left - f.w) * pixel);
  }
}

void copy_to_plain(const Frame& f, const float* blocked, float* plain, int64_t begin, int64_t end) {
  const int64_t blocks = f.blocks(), spatial = f.h * f.w;
  for (int64_t job = begin; job < end; job++) {
    int64_t n = job / blocks, cb = job % blocks, real = std::min<int64_t>(8, f.channels - cb * 8);
    const float* src = blocked + job * spatial * 8;
    float* planes = plain + (n * f.channels + cb * 8) * spatial;
    int64_t i = 0;
    for (; i + 8 <= spatial; i += 8) {
      __m256 v[8];
      for (int j = 0; j < 8; j++) v[j] = _mm256_loadu_ps(src + (i + j) * 8);
      transpose8x8(v);
      for (int64_t c = 0; c < real; c++) _mm256_storeu_ps(planes + c * spatial + i, v[c]);
    }
    for (; i < spatial; i++)
      for (int64_t c = 0; c < real; c++) planes[c * spatial + i] = src[i * 8 + c];
  }
}

template <class W>
void rows(const Geometry& g, const float* source, const W* filters, const int64_t* offsets, const Epilogue& e,
          float* y, int64_t begin, int64_t end) {
  const int64_t chunks = g.chunks(), pixels = g.oh * g.ow, groups = g.groups(), plane = pixels * 8,
                out_blocks = g.out_blocks(), batch = g.x.batch, wp = g.x.wp;
  const int lanes = int(g.lanes);
  for (int64_t job = begin; job < end; job++) {
    int64_t panel = job / (batch * chunks), n = job / chunks % batch, chunk = job % chunks;
    int64_t ob = panel * 2;
    Out o;
    o.y0 = y + (n * out_blocks + ob) * plane;
    o.y1 = ob + 1 < out_blocks ? o.y0 + plane : nullptr;
    const W* w = filters + panel * groups * lanes * 16;
    const float* image = source + n * g.x.blocks() * g.x.hp * wp * 8;
    // The chunk's pixels (rows after rows) in tiles of up to 6, split evenly (7 as 4 + 3, not 6 + 1).
    int64_t p0 = chunk * kChunkPixels, p1 = std::min(pixels, p0 + kChunkPixels), count = p1 - p0;
    const EvenTiles split(count, 6);
    // The tiles' windows, stepped along the pixels (no division per tile).
    const float* origins[kChunkPixels];
    for (int64_t p = p0, row = p0 / g.ow, col = p0 % g.ow; p < p1; p++) {
      origins[p - p0] = image + (row * g.sh * wp + col * g.sw) * 8;
      if (++col == g.ow) col = 0, row++;
    }
    for (int64_t s0 = 0; s0 < groups; s0 += kDepthGroups) {
      int64_t depth = std::min(kDepthGroups, groups - s0);
      const W* slice = w + s0 * lanes * 16;
      // The tiles also fetch the slice that comes next in memory where it is read next: the panel's
      // next depth block, or the next panel's first when the next job takes the next panel (one
      // chunk of pixels: the deep layers of a CNN, whose filters stream from memory).
      const int64_t steps = depth * lanes;
      const bool next_panel = chunks == 1 && batch == 1 && panel + 1 < g.panels();
      const bool fetch_next = s0 + depth < groups || next_panel;
      for (int64_t t = 0, a = p0; t < split.tiles; t++) {
        int64_t b = a + split.size(t);
        const auto prefetch = fetch_next
                                  ? packed::PanelPrefetch::share(slice + steps * 16, steps, t, split.tiles)
                                  : packed::PanelPrefetch{};
        if (lanes == 8)
          tile<true>(int(b - a), origins + (a - p0), offsets + s0, depth, lanes, slice, o, a, s0 == 0,
                     prefetch);
        else
          tile<false>(int(b - a), origins + (a - p0), offsets + s0, depth, lanes, slice, o, a, s0 == 0,
                      prefetch);
        a = b;
      }
    }
    // The epilogue over the job's pixels of each block, while they are in cache.
    for (int64_t half = 0; half < 2; half++) {
      float* out = half ? o.y1 : o.y0;
      if (!out) continue;
      int64_t block = ob + half;
      avx2_epilogue_block(out + p0 * 8, e.z ? e.z + (out - y) + p0 * 8 : nullptr, p1 - p0, e.bias + block * 8,
                          g.out_channels - block * 8, e.act, e.pre);
    }
  }
}

template void rows(const Geometry&, const float*, const float*, const int64_t*, const Epilogue&, float*,
                   int64_t, int64_t);
template void rows(const Geometry&, const float*, const half_t*, const int64_t*, const Epilogue&, float*,
                   int64_t, int64_t);
template void rows(const Geometry&, const float*, const bf16_t*, const int64_t*, const Epilogue&, float*,
                   int64_t, int64_t);

}  // namespace vlrt::direct

#endif  // __x86_64__

// The depthwise convolution's loop on AVX2 (direct_conv.h): one __m256 is the 8 channels of a
// block at one pixel, each with its own filter.
#include "backends/cpu/direct_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/epilogue_avx2.h"
#include "backends/cpu/prepare_util.h"
#include "ops/shape_util.h"

namespace vlrt::direct {

namespace {

// The source as the kernel reads it: `rows` x `cols` pixels of 8 channels per block, the output
// pixel (oy, ox)'s top-left tap at (oy * sh - top, ox * sw - left). The padded copy has top =
// left = 0 and every tap inside; X itself has the convolution's padding, whose taps are skipped.
struct Source {
  int64_t rows, cols, top, left;
};

// The taps of a tile of output pixels: per filter row that reaches the source, that source row
// (at column 0), and the source column of the first pixel's leftmost tap, which lies left of
// the source (negative) or right of it where the tile is at an edge.
struct Taps {
  const float* const* rows;
  int64_t nrows;
  const float* f;  // those filter rows' kw vectors each
  int64_t c0, cols;
};

// Pixels output pixels of one row for one block, through the epilogue, stored to out (z: the
// residual at them, or null). The windows are `sw` pixels apart; KW > 0: stride 1, dilation 1 and KW
// filter columns, where each source pixel is loaded once and multiplied into every output pixel
// whose window holds it (the filter row in registers), rather than once per tap. Edge: some
// windows cross the source's left or right edge, and their taps there (zeros) are skipped.
template <int Pixels, int KW, bool Edge, class Finish>
void tile(const Geometry& g, const Taps& t, const Finish& finish, const float* z, float* out) {
  __m256 acc[Pixels];
#pragma GCC unroll 8
  for (int p = 0; p < Pixels; p++) acc[p] = _mm256_setzero_ps();
  const float* f = t.f;
  auto inside = [&](int64_t c) { return !Edge || (c >= 0 && c < t.cols); };
  if constexpr (KW > 0) {
    for (int64_t r = 0; r < t.nrows; r++, f += KW * 8) {
      __m256 filter[KW];
#pragma GCC unroll 8
      for (int j = 0; j < KW; j++) filter[j] = _mm256_loadu_ps(f + j * 8);
      const float* row = t.rows[r];
#pragma GCC unroll 16
      for (int q = 0; q < Pixels + KW - 1; q++) {
        if (!inside(t.c0 + q)) continue;
        __m256 v = _mm256_loadu_ps(row + (t.c0 + q) * 8);
#pragma GCC unroll 8
        for (int j = 0; j < KW; j++)
          if (q - j >= 0 && q - j < Pixels) acc[q - j] = _mm256_fmadd_ps(v, filter[j], acc[q - j]);
      }
    }
  } else {
    for (int64_t r = 0; r < t.nrows; r++, f += g.kw * 8)
      for (int64_t j = 0; j < g.kw; j++) {
        __m256 filter = _mm256_loadu_ps(f + j * 8);
        const float* row = t.rows[r];
        const int64_t c = t.c0 + j * g.dw;
#pragma GCC unroll 8
        for (int p = 0; p < Pixels; p++)
          if (inside(c + p * g.sw))
            acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(row + (c + p * g.sw) * 8), filter, acc[p]);
      }
  }
#pragma GCC unroll 8
  for (int p = 0; p < Pixels; p++) _mm256_storeu_ps(out + p * 8, finish(acc[p], z ? z + p * 8 : nullptr));
}

template <int KW, bool Edge, class Finish>
void tile(int pixels, const Geometry& g, const Taps& t, const Finish& finish, const float* z, float* out) {
  switch (pixels) {
    case 8:
      return tile<8, KW, Edge>(g, t, finish, z, out);
    case 7:
      return tile<7, KW, Edge>(g, t, finish, z, out);
    case 6:
      return tile<6, KW, Edge>(g, t, finish, z, out);
    case 5:
      return tile<5, KW, Edge>(g, t, finish, z, out);
    case 4:
      return tile<4, KW, Edge>(g, t, finish, z, out);
    case 3:
      return tile<3, KW, Edge>(g, t, finish, z, out);
    case 2:
      return tile<2, KW, Edge>(g, t, finish, z, out);
    default:
      return tile<1, KW, Edge>(g, t, finish, z, out);
  }
}

// The jobs [begin, end) with KW as tile() takes it.
template <int KW>
void depthwise_jobs(const Geometry& g, const float* source, const float* filters, const Epilogue& e, float* y,
                    int64_t begin, int64_t end) {
  const Source s = g.skips_padding ? Source{g.x.h, g.x.w, g.x.top, g.x.left} : Source{g.x.hp, g.x.wp, 0, 0};
  const int64_t blocks = g.out_blocks(), taps = g.kh * g.kw, rows_per_job = g.depthwise_rows_per_job(),
                row_groups = (g.oh + rows_per_job - 1) / rows_per_job;
  // A row goes in tiles of up to 8 pixels (6 for 7 filter columns in registers) split evenly (12
  // as 6 + 6, not 8 + 4). The windows of the output columns [lo, hi) lie inside the source; a
  // tile with others skips the taps outside.
  constexpr int64_t kMaxPixels = KW == 7 ? 6 : 8;
  const int64_t lo = std::min(g.ow, ceil_div(s.left, g.sw)),
                hi = std::max(lo, std::min(g.ow, ceil_div(s.cols - (g.kw - 1) * g.dw + s.left, g.sw)));
  const EvenTiles split(g.ow, kMaxPixels);
  avx2_with_activation(e.act, [&](auto act) {
    for (int64_t job = begin; job < end; job++) {
      int64_t image_block = job / row_groups, oy0 = job % row_groups * rows_per_job,
              oy1 = std::min(g.oh, oy0 + rows_per_job), cb = image_block % blocks;
      const float* plane = source + image_block * s.rows * s.cols * 8;
      const float* w = filters + cb * taps * 8;
      const Avx2BlockEpilogue<decltype(act)> finish(e.bias + cb * 8, g.out_channels - cb * 8, e.pre, act);
      for (int64_t oy = oy0; oy < oy1; oy++) {
        // The filter rows that reach the source, and their source rows (at column 0).
        int64_t sy = oy * g.sh - s.top;
        int64_t ky0 = std::min(g.kh, std::max<int64_t>(0, ceil_div(-sy, g.dh))),
                ky1 = std::max(ky0, std::min(g.kh, ceil_div(s.rows - sy, g.dh)));
        const float* rows[kMaxDepthwiseRows];
        for (int64_t r = ky0; r < ky1; r++) rows[r - ky0] = plane + (sy + r * g.dh) * s.cols * 8;
        Taps t{rows, ky1 - ky0, w + ky0 * g.kw * 8, 0, s.cols};
        const int64_t at = (image_block * g.oh + oy) * g.ow * 8;
        for (int64_t k = 0, x = 0; k < split.tiles; k++) {
          int pixels = int(split.size(k));
          t.c0 = x * g.sw - s.left;
          const float* z = e.z ? e.z + at + x * 8 : nullptr;
          if (x < lo || x + pixels > hi)
            tile<KW, true>(pixels, g, t, finish, z, y + at + x * 8);
          else
            tile<KW, false>(pixels, g, t, finish, z, y + at + x * 8);
          x += pixels;
        }
      }
    }
  });
}

}  // namespace

void depthwise_rows(const Geometry& g, const float* source, const float* filters, const Epilogue& e, float* y,
                    int64_t begin, int64_t end) {
  if (g.sw == 1 && g.dw == 1 && g.kw == 3) return depthwise_jobs<3>(g, source, filters, e, y, begin, end);
  if (g.sw == 1 && g.dw == 1 && g.kw == 5) return depthwise_jobs<5>(g, source, filters, e, y, begin, end);
  if (g.sw == 1 && g.dw == 1 && g.kw == 7) return depthwise_jobs<7>(g, source, filters, e, y, begin, end);
  depthwise_jobs<0>(g, source, filters, e, y, begin, end);
}

}  // namespace vlrt::direct

#endif  // __x86_64__

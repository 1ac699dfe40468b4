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

// One filter row's taps, for a tile.
struct Taps {
  const float* const* rows;  // per filter row that reaches the source: where the first pixel's window starts
  int64_t nrows;
  const float* f;            // those filter rows' kw vectors each
};

// The sums of Pixels output pixels of one row for one block, stored to out (the epilogue
// follows per row). The windows are `sw` pixels apart; KW > 0: stride 1, dilation 1 and KW
// filter columns, where each source pixel is loaded once and multiplied into every output pixel
// whose window holds it (the filter row in registers), rather than once per tap.
template <int Pixels, int KW>
void tile(const Geometry& g, const Taps& t, float* out) {
  __m256 acc[Pixels];
#pragma GCC unroll 8
  for (int p = 0; p < Pixels; p++) acc[p] = _mm256_setzero_ps();
  const float* f = t.f;
  if constexpr (KW > 0) {
    for (int64_t r = 0; r < t.nrows; r++, f += KW * 8) {
      __m256 filter[KW];
#pragma GCC unroll 8
      for (int j = 0; j < KW; j++) filter[j] = _mm256_loadu_ps(f + j * 8);
      const float* row = t.rows[r];
#pragma GCC unroll 16
      for (int q = 0; q < Pixels + KW - 1; q++) {
        __m256 v = _mm256_loadu_ps(row + q * 8);
#pragma GCC unroll 8
        for (int j = 0; j < KW; j++)
          if (q - j >= 0 && q - j < Pixels) acc[q - j] = _mm256_fmadd_ps(v, filter[j], acc[q - j]);
      }
    }
  } else {
    const int64_t step = g.sw * 8, tap = g.dw * 8;
    for (int64_t r = 0; r < t.nrows; r++, f += g.kw * 8)
      for (int64_t j = 0; j < g.kw; j++) {
        __m256 filter = _mm256_loadu_ps(f + j * 8);
        const float* a = t.rows[r] + j * tap;
#pragma GCC unroll 8
        for (int p = 0; p < Pixels; p++) acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(a + p * step), filter, acc[p]);
      }
  }
#pragma GCC unroll 8
  for (int p = 0; p < Pixels; p++) _mm256_storeu_ps(out + p * 8, acc[p]);
}

template <int KW>
void tile(int pixels, const Geometry& g, const Taps& t, float* out) {
  switch (pixels) {
    case 8: return tile<8, KW>(g, t, out);
    case 7: return tile<7, KW>(g, t, out);
    case 6: return tile<6, KW>(g, t, out);
    case 5: return tile<5, KW>(g, t, out);
    case 4: return tile<4, KW>(g, t, out);
    case 3: return tile<3, KW>(g, t, out);
    case 2: return tile<2, KW>(g, t, out);
    default: return tile<1, KW>(g, t, out);
  }
}

// The jobs [begin, end) with KW as tile() takes it.
template <int KW>
void depthwise_jobs(const Geometry& g, const float* source, const float* filters, const Epilogue& e, float* y,
                    int64_t begin, int64_t end) {
  const Source s = g.skips_padding ? Source{g.x.h, g.x.w, g.x.top, g.x.left} : Source{g.x.hp, g.x.wp, 0, 0};
  const int64_t blocks = g.out_blocks(), taps = g.kh * g.kw, rows_per_job = g.depthwise_rows_per_job(),
                row_groups = (g.oh + rows_per_job - 1) / rows_per_job;
  // The output columns whose windows lie inside the source: [lo, hi), in tiles of up to 8 (6 for
  // 7 filter columns in registers) split evenly (12 as 6 + 6, not 8 + 4); the others (crossing an
  // edge) one by one, each from a zero-bordered copy of its window.
  constexpr int64_t kMaxPixels = KW == 7 ? 6 : 8;
  const int64_t lo = std::min(g.ow, ceil_div(s.left, g.sw)),
                hi = std::max(lo, std::min(g.ow, ceil_div(s.cols - (g.kw - 1) * g.dw + s.left, g.sw)));
  const EvenTiles split(hi - lo, kMaxPixels);
  const int64_t window = (g.kw - 1) * g.dw + 1;
  thread_local AlignedFloats t_window;
  float* local = grown(t_window, size_t(g.kh * window * 8));
  for (int64_t job = begin; job < end; job++) {
    int64_t image_block = job / row_groups, oy0 = job % row_groups * rows_per_job,
            oy1 = std::min(g.oh, oy0 + rows_per_job), cb = image_block % blocks;
    const float* plane = source + image_block * s.rows * s.cols * 8;
    const float* w = filters + cb * taps * 8;
    for (int64_t oy = oy0; oy < oy1; oy++) {
      // The filter rows that reach the source, and their source rows (at column 0).
      int64_t sy = oy * g.sh - s.top;
      int64_t ky0 = std::min(g.kh, std::max<int64_t>(0, ceil_div(-sy, g.dh))),
              ky1 = std::max(ky0, std::min(g.kh, ceil_div(s.rows - sy, g.dh)));
      const float *rows[kMaxDepthwiseRows], *at[kMaxDepthwiseRows];
      for (int64_t r = ky0; r < ky1; r++) rows[r - ky0] = plane + (sy + r * g.dh) * s.cols * 8;
      Taps t{at, ky1 - ky0, w + ky0 * g.kw * 8};
      float* out = y + (image_block * g.oh + oy) * g.ow * 8;
      auto edge = [&](int64_t x) {  // window columns outside the source as zeros
        int64_t sx0 = x * g.sw - s.left;
        for (int64_t r = 0; r < t.nrows; r++) {
          float* row = local + r * window * 8;
          for (int64_t c = 0; c < window; c++) {
            int64_t sx = sx0 + c;
            bool inside = c % g.dw == 0 && sx >= 0 && sx < s.cols;
            _mm256_storeu_ps(row + c * 8, inside ? _mm256_loadu_ps(rows[r] + sx * 8) : _mm256_setzero_ps());
          }
          at[r] = row;
        }
        tile<1, 0>(g, t, out + x * 8);
      };
      for (int64_t x = 0; x < lo; x++) edge(x);
      for (int64_t k = 0, x = lo; k < split.tiles; k++) {
        int pixels = int(split.size(k));
        for (int64_t r = 0; r < t.nrows; r++) at[r] = rows[r] + (x * g.sw - s.left) * 8;
        tile<KW>(pixels, g, t, out + x * 8);
        x += pixels;
      }
      for (int64_t x = hi; x < g.ow; x++) edge(x);
    }
    // The epilogue over the job's rows, while they are in cache.
    float* out = y + (image_block * g.oh + oy0) * g.ow * 8;
    avx2_epilogue_block(out, e.z ? e.z + (out - y) : nullptr, (oy1 - oy0) * g.ow, e.bias + cb * 8,
                        g.out_channels - cb * 8, e.act, e.pre);
  }
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

// The Winograd F(4x4, 3x3) loops on AVX2: one __m256 is the 8 channels of a block at one pixel.
#include "backends/cpu/winograd_kernels.h"

#include "backends/cpu/gemm_tile_avx2.h"
#include "backends/cpu/epilogue_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace vlrt::winograd {

namespace {

// B^T d for one column of a 6x6 input tile (F(4, 3) at the points 0, 1, -1, 2, -2, inf).
inline void input_points(const __m256 d[6], __m256 t[6]) {
  const __m256 two = _mm256_set1_ps(2.f), four = _mm256_set1_ps(4.f), five = _mm256_set1_ps(5.f);
  __m256 d4_minus_d2 = _mm256_sub_ps(d[4], d[2]);
  t[0] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[2], _mm256_mul_ps(four, d[0])), d[4]);
  t[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
  t[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
  t[3] = _mm256_fmadd_ps(two, _mm256_sub_ps(d[3], d[1]), d4_minus_d2);
  t[4] = _mm256_fmadd_ps(two, _mm256_sub_ps(d[1], d[3]), d4_minus_d2);
  t[5] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[3], _mm256_mul_ps(four, d[1])), d[5]);
}

// A^T m for one column of a 6x6 product tile.
inline void output_points(const __m256 m[6], __m256 o[4]) {
  const __m256 two = _mm256_set1_ps(2.f), four = _mm256_set1_ps(4.f), eight = _mm256_set1_ps(8.f);
  __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
  __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
  o[1] = _mm256_fmadd_ps(two, d34, d12);
  o[2] = _mm256_fmadd_ps(four, s34, s12);
  o[3] = _mm256_add_ps(_mm256_fmadd_ps(eight, d34, d12), m[5]);
}

}  // namespace

void input_transform(const Geometry& g, const float* x, float* v, int64_t begin, int64_t end) {
  const int64_t tiles = g.tiles(), per_image = g.tiles_h * g.tiles_w, width = g.in_width();
  for (int64_t t = begin; t < end; t++) {
    int64_t n = t / per_image, ty = t % per_image / g.tiles_w, tx = t % g.tiles_w;
    int64_t y0 = ty * 4 - 1, x0 = tx * 4 - 1;
    for (int64_t cb = 0; cb < g.in_blocks; cb++) {
      const float* plane = x + (n * g.in_blocks + cb) * g.h * g.w * 8;
      __m256 d[6][6];
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
          int64_t yy = y0 + i, xx = x0 + j;
          d[i][j] = yy >= 0 && yy < g.h && xx >= 0 && xx < g.w ? _mm256_loadu_ps(plane + (yy * g.w + xx) * 8)
                                                                 : _mm256_setzero_ps();
        }
      __m256 cols[6][6];  // cols[j] = B^T d[.][j]: rows transformed, per column
      for (int j = 0; j < 6; j++) {
        __m256 column[6] = {d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]};
        input_points(column, cols[j]);
      }
      for (int i = 0; i < 6; i++) {
        __m256 row[6] = {cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[4][i], cols[5][i]}, out[6];
        input_points(row, out);
        for (int j = 0; j < 6; j++) _mm256_storeu_ps(v + ((i * 6 + j) * tiles + t) * width + cb * 8, out[j]);
      }
    }
  }
}

void products(const Geometry& g, const float* v, const float* u, float* m, int64_t begin, int64_t end) {
  const int64_t tiles = g.tiles(), panels = g.out_panels(), chunks = g.chunks(), k = g.in_width(),
                ldm = g.out_width();
  for (int64_t job = begin; job < end; job++) {
    int64_t xi = job / (panels * chunks), panel = job / chunks % panels, chunk = job % chunks;
    int64_t t0 = chunk * kChunkTiles, t1 = std::min(tiles, t0 + kChunkTiles);
    const float* up = u + (xi * panels + panel) * k * 16;
    // With one chunk of tiles the next job reads the next panel, which follows this one in memory:
    // the tiles fetch it as they go, each its share (panel_prefetch.h; the transformed filters,
    // 4x the weights' bytes, stream from memory in a deep layer).
    const bool fetch_next = chunks == 1 && xi * panels + panel + 1 < kPoints * panels;
    const int64_t count = (t1 - t0 + 5) / 6;
    for (int64_t t = t0, i = 0; t < t1; t += 6, i++)
      gemm_tile(
          int(std::min<int64_t>(6, t1 - t)), v + (xi * tiles + t) * k, k, up, k,
          m + (xi * tiles + t) * ldm + panel * 16, ldm,
          fetch_next ? packed::PanelPrefetch::share(up + k * 16, k, i, count) : packed::PanelPrefetch{});
  }
}

void output_transform(const Geometry& g, const float* m, const Epilogue& e, float* y, int64_t begin, int64_t end) {
  const int64_t tiles = g.tiles(), per_image = g.tiles_h * g.tiles_w, ldm = g.out_width();
  const int64_t real_in_last = g.out_channels - (g.out_blocks - 1) * 8;
  const __m256 last_block_mask = avx2_block_mask(real_in_last);
  const bool has_pre = e.pre.kind != FusedActivation::none;
  for (int64_t t = begin; t < end; t++) {
    int64_t n = t / per_image, ty = t % per_image / g.tiles_w, tx = t % g.tiles_w;
    int64_t rows = std::min<int64_t>(4, g.h - ty * 4), cols = std::min<int64_t>(4, g.w - tx * 4);
    for (int64_t cb = 0; cb < g.out_blocks; cb++) {
      __m256 s[6][4];  // s[j] = A^T m[.][j]
      for (int j = 0; j < 6; j++) {
        __m256 column[6];
        for (int i = 0; i < 6; i++) column[i] = _mm256_loadu_ps(m + ((i * 6 + j) * tiles + t) * ldm + cb * 8);
        output_points(column, s[j]);
      }
      __m256 bias = _mm256_loadu_ps(e.bias + cb * 8);
      bool last = cb == g.out_blocks - 1;
      int64_t plane = (n * g.out_blocks + cb) * g.h * g.w * 8;
      for (int64_t a = 0; a < rows; a++) {
        __m256 row[6] = {s[0][a], s[1][a], s[2][a], s[3][a], s[4][a], s[5][a]}, o[4];
        output_points(row, o);
        for (int64_t b = 0; b < cols; b++) {
          int64_t at = plane + ((ty * 4 + a) * g.w + tx * 4 + b) * 8;
          __m256 val = _mm256_add_ps(o[b], bias);
          if (has_pre) val = avx2_activate(e.pre, val);
          if (e.z) val = _mm256_add_ps(val, _mm256_loadu_ps(e.z + at));
          val = avx2_activate(e.act, val);
          if (last) val = _mm256_and_ps(val, last_block_mask);
          _mm256_storeu_ps(y + at, val);
        }
      }
    }
  }
}

}  // namespace vlrt::winograd

#endif  // __x86_64__

// The depthwise convolution's loop on AVX2 (direct_conv.h): one __m256 is the 8 channels of a
// block at one pixel, each with its own filter.
#include "backends/cpu/direct_conv.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/epilogue_avx2.h"

namespace vlrt::direct {

namespace {

// Pixels output pixels of one row from `first` on, for one block: `row` is the source row of the
// top taps, `w` the block's kh x kw filter vectors.
template <int Pixels>
void depthwise_tile(const Geometry& g, const float* row, const float* w, int64_t first, __m256 acc[8]) {
  for (int p = 0; p < Pixels; p++) acc[p] = _mm256_setzero_ps();
  const int64_t step = g.sw * 8, row_step = g.dh * g.x.wp * 8, tap_step = g.dw * 8;
  const float* origin = row + first * step;
  for (int64_t i = 0; i < g.kh; i++, origin += row_step)
    for (int64_t j = 0; j < g.kw; j++) {
      __m256 f = _mm256_loadu_ps(w + (i * g.kw + j) * 8);
      const float* a = origin + j * tap_step;
      for (int p = 0; p < Pixels; p++) acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(a + p * step), f, acc[p]);
    }
}

}  // namespace

void depthwise_rows(const Geometry& g, const float* source, const float* filters, const Epilogue& e, float* y,
                    int64_t begin, int64_t end) {
  const int64_t blocks = g.out_blocks(), taps = g.kh * g.kw, wp = g.x.wp;
  const int64_t real_in_last = g.out_channels - (blocks - 1) * 8;
  const __m256 last_mask = avx2_block_mask(real_in_last);
  for (int64_t job = begin; job < end; job++) {
    int64_t n = job / (blocks * g.oh), cb = job / g.oh % blocks, oy = job % g.oh;
    const float* row = source + (((n * blocks + cb) * g.x.hp) + oy * g.sh) * wp * 8;
    const float* w = filters + cb * taps * 8;
    int64_t at = ((n * blocks + cb) * g.oh + oy) * g.ow * 8;
    float* out = y + at;
    const float* z = e.z ? e.z + at : nullptr;
    __m256 bias = _mm256_loadu_ps(e.bias + cb * 8);
    bool masked = cb == blocks - 1 && real_in_last < 8;
    __m256 acc[8];
    for (int64_t x = 0; x < g.ow; x += 8) {
      int pixels = int(std::min<int64_t>(8, g.ow - x));
      if (pixels == 8)
        depthwise_tile<8>(g, row, w, x, acc);
      else
        for (int p = 0; p < pixels; p++) depthwise_tile<1>(g, row, w, x + p, acc + p);
      for (int p = 0; p < pixels; p++)
        _mm256_storeu_ps(out + (x + p) * 8,
                         avx2_epilogue(acc[p], bias, z ? z + (x + p) * 8 : nullptr, e.act, masked, last_mask));
    }
  }
}

}  // namespace vlrt::direct

#endif  // __x86_64__

// GridSample's sampling taps, shared by its kernel (spatial.cpp) and by vlrt.DeformableSampleSum
// (fused.cpp), which samples the same way and sums the samples by their weights.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vlrt {

enum class GridPad { zeros, border, reflection };

// The taps of one sampling point, up to 16 (bicubic): flat pixel indices and weights.
template <class G>
struct GridTaps {
  int count = 0;
  int64_t idx[16];
  G w[16];
};

// The taps of the normalized point (gx, gy) in an h x w image: mode 0 nearest, 1 bilinear, 2
// bicubic; `align` is align_corners. Taps outside the image are dropped under zeros padding and
// moved inside otherwise. Instantiated for float and double.
template <class G>
void grid_taps(G gx, G gy, int64_t h, int64_t w, int mode, GridPad pad, bool align, GridTaps<G>& t);

// grid_taps for bilinear sampling with zeros padding (mode 1, GridPad::zeros), the same taps in
// the same order, written out for the loops that take millions of points.
inline void bilinear_zeros_taps(float gx, float gy, int64_t h, int64_t w, bool align, GridTaps<float>& t) {
  float x = align ? (gx + 1) / 2 * float(w - 1) : ((gx + 1) * float(w) - 1) / 2;
  float y = align ? (gy + 1) / 2 * float(h - 1) : ((gy + 1) * float(h) - 1) / 2;
  // Keeps NaN and huge values away from integer conversion, as grid_taps does.
  x = x >= -1e15f ? std::min(x, 1e15f) : -1e15f;
  y = y >= -1e15f ? std::min(y, 1e15f) : -1e15f;
  const float fx = std::floor(x), fy = std::floor(y), rx = x - fx, ry = y - fy;
  const int64_t x0 = int64_t(fx), y0 = int64_t(fy);
  const float wx[2] = {1 - rx, rx}, wy[2] = {1 - ry, ry};
  t.count = 0;
  for (int i = 0; i < 2; i++) {
    const int64_t yi = y0 + i;
    if (yi < 0 || yi >= h) continue;
    for (int j = 0; j < 2; j++) {
      const int64_t xj = x0 + j;
      if (xj < 0 || xj >= w) continue;
      t.idx[t.count] = yi * w + xj;
      t.w[t.count++] = wy[i] * wx[j];
    }
  }
}

}  // namespace vlrt

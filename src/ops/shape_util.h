// Shape arithmetic shared by infer functions and kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace vlrt {

// Multidirectional (NumPy) broadcasting as the ONNX spec defines it; fails naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Axis in [-rank, rank) to [0, rank); fails with the op's context otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank);
// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& s);
// Strides of `in` as seen from an output of shape `out` under broadcasting
// (0 on broadcast axes); `in` is right-aligned to `out`.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);
// a / b rounded up, for b > 0 and a of either sign (the first tap or output inside a range).
inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
// `count` items in the fewest tiles of at most `most`, split evenly (32 in tiles of up to 6 as
// 6 6 5 5 5 5, not 6 6 6 6 6 2); tile t holds size(t) items.
struct EvenTiles {
  int64_t tiles, base, longer;
  EvenTiles(int64_t count, int64_t most)
      : tiles(ceil_div(count, most)), base(tiles ? count / tiles : 0), longer(tiles ? count % tiles : 0) {}
  int64_t size(int64_t t) const { return base + (t < longer ? 1 : 0); }
};

}  // namespace vlrt

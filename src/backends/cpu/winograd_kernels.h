// The loops of the Winograd convolution (winograd_conv_avx2.cpp, built for AVX2); the kernel in
// winograd_conv.cpp plans the buffers and runs them on the thread pool.
//
// Layouts, for T = batch x tiles_h x tiles_w tiles of 4x4 outputs and the 36 points xi of a
// 6x6 transformed tile:
//   V (transformed input)    [36][T][in_blocks * 8]
//   U (transformed filters)  [36][out_panels][in_blocks * 8][16]
//   M (products)             [36][T][out_panels * 16]
#pragma once

#include <cstdint>

#include "ops/contrib_semantics.h"

namespace vlrt::winograd {

inline constexpr int64_t kPoints = 36;     // a 6x6 tile
inline constexpr int64_t kChunkTiles = 96;  // tiles a product job runs through per filter panel

struct Geometry {
  int64_t batch = 0, h = 0, w = 0;            // input and output size (stride 1, padding 1)
  int64_t in_blocks = 0, out_blocks = 0;      // channel blocks of 8
  int64_t out_channels = 0;                   // the real ones; padding channels are written as zeros
  int64_t tiles_h = 0, tiles_w = 0;

  int64_t tiles() const { return batch * tiles_h * tiles_w; }
  int64_t in_width() const { return in_blocks * 8; }
  int64_t out_panels() const { return (out_blocks * 8 + 15) / 16; }
  int64_t out_width() const { return out_panels() * 16; }
  int64_t chunks() const { return (tiles() + kChunkTiles - 1) / kChunkTiles; }
  int64_t product_jobs() const { return kPoints * out_panels() * chunks(); }
};

struct Epilogue {
  const float* bias = nullptr;  // out_blocks * 8 values (zeros past out_channels)
  const float* z = nullptr;     // the residual, Y's layout, or null
  FusedActivation act;
  FusedActivation pre;  // before z is added: act(pre(conv + bias) + z)
};

// V for tiles [begin, end) from X [batch][in_blocks][h][w][8].
void input_transform(const Geometry& g, const float* x, float* v, int64_t begin, int64_t end);
// M = V U for product jobs [begin, end) of g.product_jobs() (point, filter panel, chunk of tiles).
void products(const Geometry& g, const float* v, const float* u, float* m, int64_t begin, int64_t end);
// Y [batch][out_blocks][h][w][8] for tiles [begin, end): the output transform, then
// act(pre(. + bias) + z).
void output_transform(const Geometry& g, const float* m, const Epilogue& e, float* y, int64_t begin, int64_t end);

}  // namespace vlrt::winograd

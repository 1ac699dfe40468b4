// Software prefetch for vlrt's own products (the packed MatMul, packed_matmul.h; the VNNI one; the
// direct and Winograd convolutions): while the row tiles of a job read one slice of a panel from L1,
// they ask for the slice that comes next, each tile its share of the slice's rows, one row per step
// of its loop. Spread so, the misses come at the pace the tiles
// compute; asked for all at once (by the first tile, as before) they stalled it, and where the
// weights stream from memory (BERT-base: 340 MB of panels for 32 rows of A) the products ran
// about 20% slower. x86-64 only.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace vlrt::packed {

struct PanelPrefetch {
  const char* rows = nullptr;  // the first panel row of this tile's share; null: none
  int64_t row_bytes = 0;       // a panel row: 16 values
  uint32_t step = 0;           // rows per step, 16.16 fixed point
  uint32_t at = 0;

  // Tile t of `tiles` reading a slice of `depth` rows that `next` follows in memory.
  template <class W>
  static PanelPrefetch share(const W* next, int64_t depth, int64_t t, int64_t tiles) {
    const int64_t first = depth * t / tiles, last = depth * (t + 1) / tiles;
    return {reinterpret_cast<const char*>(next + first * 16), int64_t(16 * sizeof(W)),
            uint32_t(((last - first) << 16) / depth)};
  }

  // One step of the tile's loop: the next row of its share.
  void step_once() {
    if (!rows) return;
    _mm_prefetch(rows + (at >> 16) * row_bytes, _MM_HINT_T0);
    at += step;
  }
};

}  // namespace vlrt::packed

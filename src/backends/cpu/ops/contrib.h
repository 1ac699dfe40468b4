// Pieces of the contrib reference kernels that more than one op family uses.
#pragma once

#include <cstdint>

namespace vlrt {

// Rotary embedding of one head: pairs (i, i + half), or (2i, 2i + 1) when interleaved, turn
// by the angle whose cosines and sines are cos[i], sin[i] (the caches' row for the token).
void rotate_pairs(double* h, int64_t half, const double* cos, const double* sin, bool interleaved);

}  // namespace vlrt

// The channel-blocked activation layout that convolutions read fastest, and vlrt's ops that
// use it (src/ops/layout.cpp defines them). A tensor of logical shape [N, C, spatial...] in
// blocks of b channels is stored as [N, ceil(C / b), spatial..., b]: element (n, c, s...) lies
// at [n, c / b, s..., c % b], and the padding channels C..ceil(C / b) * b - 1 hold zeros.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// The stored shape of a [N, C, spatial...] tensor in blocks of `block` channels.
Shape channel_blocked_shape(const Shape& logical, int64_t block);
// The logical shape of a blocked tensor that has `channels` channels; fails naming what does
// not fit (rank, the block axis, the number of blocks).
Shape channel_logical_shape(const Shape& blocked, int64_t block, int64_t channels);

// vlrt.BlockedConv's layouts: the block size of X, Z and Y (0: that tensor lies as plain NCHW).
struct ConvBlocks {
  int64_t src = 0, sum = 0, dst = 0;
};
ConvBlocks conv_blocks(const Node& n);

}  // namespace vlrt

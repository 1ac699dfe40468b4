// The epilogue the fused kernels share (FusedConv, vlrt.FusedMatMul): Y = act(Y + Bias + Z) in
// place, in one pass over Y.
#pragma once

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

// The activation on one value, in double (the reference for every dtype).
double fused_activate(const FusedActivation& a, double x);

// y = act(y + bias + z): bias (may be null) has y's last-axis length and is added to every row;
// z (may be null) has y's shape. float32 runs 4 lanes at a time across the pool; other float
// types go through double.
void apply_fused_epilogue(ThreadPool& pool, const FusedActivation& act, Tensor& y, const Tensor* bias,
                          const Tensor* z);

// The same on rows [r0, r1) and columns [c0, c1) of a float32 y with `cols` columns, on the
// calling thread: for a product that finishes each block of Y while the block is still in cache.
void apply_fused_epilogue_block(const FusedActivation& act, float* y, const float* bias, const float* z,
                                int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

}  // namespace vlrt

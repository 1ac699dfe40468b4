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

}  // namespace vlrt

// Weights stored in half precision (`vlrt quantize --fp16` / `--bf16`: a float16 or bfloat16
// initializer read through a Cast to float32) kept half the bytes in memory where the CPU's
// kernels read them as stored, instead of widened to float32 when the session folds constants:
//   Gather(Cast(T), I)  ->  Cast(Gather(T, I))   (an embedding table: only the rows read widen)
//   MatMul / Gemm(A, Cast(W))  ->  vlrt.FusedMatMul(A, W)   (fuse_matmul.cpp, after folding)
//   Conv(X, Cast(W)) in a blocked run  ->  vlrt.BlockedConv(X, W)   (conv_layout.cpp)
// Each computes exactly what the graph did: widening a half-precision value is exact.
#pragma once

#include <string>
#include <unordered_set>

#include "backends/backend.h"
#include "graph/graph.h"
#include "passes/fusion.h"

namespace vlrt {

// A Cast to float32 of a float16 or bfloat16 initializer of g.
bool casts_half_initializer(const Node& n, const Graph& g);

// Before constant folding: moves the Casts of half-precision tables behind the Gathers that read
// them, and returns the outputs of the Casts that only MatMul and Gemm (as B) or Conv (as W, no
// BatchNormalization after it) read, which folding must leave (fold_constants' `keep`) for the
// fusion passes to take. Nothing where the options or the backend
// (Backend::reads_half_product_weights, reads_half_conv_weights) do not keep half weights; a
// second folding after fusion widens whatever fusion did not take.
std::unordered_set<std::string> keep_half_weights(Model& model, const FusionOptions& options,
                                                  const Backend& host);

}  // namespace vlrt

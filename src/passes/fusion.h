// Fusion: rewrites chains of nodes into one node whose kernel makes one pass over memory
// (Conv+BatchNormalization and per-channel Mul/Add folded, Conv+Add+activation as FusedConv,
// MatMul/Gemm+bias+activation as vlrt.FusedMatMul, LayerNormalization, Gelu and HardSwish
// subgraphs, scaled dot-product attention, a Mul summed over its last axis as vlrt.WeightedSum and,
// when it sums GridSamples, as vlrt.DeformableSampleSum,
// dynamically quantized MatMul as com.microsoft.DynamicQuantizeMatMul, those of one activation as
// vlrt.DynamicQuantizeMatMuls, and quantized convolutions channels-last).
// Every fused op has a CPU reference kernel; the fused graph computes what the original did.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "core/reference_mode.h"
#include "graph/graph.h"

namespace vlrt {

// Which passes run; each can be switched off on its own (tests compare fused and unfused graphs).
struct FusionOptions {
  // Identity nodes between two others dropped, their readers reading the input (drop_identity.cpp).
  bool drop_identity = true;
  bool conv_batchnorm = true;
  // Mul, Add, Sub by a per-channel constant folded into the Conv before it or an unpadded one after.
  bool conv_affine = true;
  bool conv_activation = true;
  bool matmul = true;
  bool layer_norm = true;
  bool gelu = true;
  // x * Clip(x + 3, 0, 6) / 6 and x * HardSigmoid(x) as HardSwish.
  bool hard_swish = true;
  bool attention = true;
  // ReduceSum over the last axis of a Mul as vlrt.WeightedSum.
  bool weighted_sum = true;
  // Every level's GridSample of multi-scale deformable attention and their vlrt.WeightedSum as
  // vlrt.DeformableSampleSum (needs weighted_sum).
  bool deformable_sample = true;
  // DynamicQuantizeLinear + MatMulInteger + dequantization as com.microsoft DynamicQuantizeMatMul;
  // where the backend has fast integer products, those of one A as vlrt.DynamicQuantizeMatMuls.
  bool dynamic_quant_matmul = true;
  // Runs of convolutions in the backend's blocked layout (Backend::conv_channel_block).
  bool conv_layout = true;
  // QLinearConv and the quantized ops between such convolutions channels-last, where the
  // backend's integer convolutions compute so (Backend::channels_last_integer_convs).
  bool qlinear_channels_last = true;
  // Weights stored in float16 or bfloat16 (a Cast of the initializer) stay so for the products
  // and Gathers that read them, where the backend reads them so (passes/half_weights.h).
  bool half_weights = true;
  // Every pass off.
  static FusionOptions none();
};

// Per pattern, how many were fused, in the order the passes ran ("Conv+Add+Relu", 16).
using FusionReport = std::vector<std::pair<std::string, size_t>>;

// Runs the enabled passes over the model's main graph (subgraphs are left as written). `host`
// infers shapes for the checks that need them and names the convolutions' blocked layout. Returns what was fused.
FusionReport fuse(Model& model, const FusionOptions& options, Backend& host);

// "53 Conv+BatchNormalization, 16 Conv+Add+Relu" ("nothing" when empty).
std::string describe(const FusionReport& report);

}  // namespace vlrt

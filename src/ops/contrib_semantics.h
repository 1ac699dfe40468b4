// Semantics of ONNX Runtime's contrib ops that shape inference and the kernels share.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// FusedMatMul: the permutation of an operand of `rank` axes that gives MatMul's operand.
// transBatch moves axis 0 behind the other batch axes; trans swaps the last two axes.
std::vector<int64_t> fused_matmul_perm(size_t rank, bool trans_batch, bool trans);

// The activation attribute (with its activation_params) of FusedConv and vlrt.FusedMatMul.
// ONNX Runtime's list (Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid) plus vlrt's own values,
// which the fusion passes write: HardSwish (x * HardSigmoid(x) with alpha 1/6, beta 0.5),
// SiLU (x * Sigmoid(x)), Gelu (0.5 x (1 + erf(x / sqrt 2))) and FastGelu (Gelu's tanh form).
struct FusedActivation {
  enum Kind {
    none,
    relu,
    tanh,
    sigmoid,
    leaky_relu,
    clip,
    hard_sigmoid,
    hard_swish,
    silu,
    gelu,
    fast_gelu,
    quantize_dequantize
  } kind = none;
  // LeakyRelu alpha; Clip min, max; HardSigmoid alpha, beta; QuantizeDequantize scale, low, high.
  float alpha = 0, beta = 0, gamma = 0;
};
// QuantizeDequantize is a per-tensor QuantizeLinear followed by the DequantizeLinear of the same
// scale and zero point, in one step: clamp(RoundHalfToEven(x / scale), low, high) * scale, where
// low and high are the quantized type's limits less the zero point (a QDQ model's fake
// quantization, as passes/fusion_graph.cpp finds it after a convolution or a product).
float quantize_dequantize(float x, float scale, float low, float high);
// A fused node's activation: attributes `attribute` (the name) and `attribute`_params. FusedConv
// and BlockedConv compute act(pre(Conv(X, W, B)) + Z), act from "activation" and pre from
// "pre_activation" (only QuantizeDequantize: a QDQ model's residual Add reads two fake-quantized
// values). Fails naming the activation when it is unknown or its parameters do not fit.
FusedActivation fused_conv_activation(const Node& n, const std::string& attribute = "activation");

// MatMulNBits' attributes: Y = A [.., K] times the dequantized [N, K] weight transposed.
// The weight has `blocks` = ceil(K / block_size) blocks per row, the last one padded.
struct MatMulNBitsDims {
  int64_t k, n, block_size, blocks;
};
// Fails when an attribute is missing or out of range; unsupported for bits other than 4.
MatMulNBitsDims matmul_nbits_dims(const Node& n);

// GatherBlockQuantized of uint8 data: `bits`-bit values packed low bits first along the last
// axis (the quantize axis), gathered along axis 0; scales hold one value per block of
// block_size values along the last axis, the last block padded.
struct GatherBlockQuantizedDims {
  int64_t bits, block_size;
  int64_t values;  // values per byte: 8 / bits
  Shape logical;   // data's shape with the packed last axis unpacked
  int64_t blocks;  // ceil(logical.back() / block_size)
};
// Fails naming the attribute or input that does not fit.
GatherBlockQuantizedDims gather_block_quantized_dims(const Node& n, DType data, const Shape& shape);

// RotaryEmbedding of input [B,S,N*H] or [B,N,S,H] with caches [max_position, rotary_dim / 2]:
// the first rotary_dim values of each head rotate.
struct RotaryDims {
  int64_t heads, head_size, rotary_dim;
};
RotaryDims rotary_dims(const Node& n, const Shape& x, const Shape& cache);

// GroupQueryAttention's heads: query [B, S, num_heads * head_size], or packed QKV
// [B, S, (num_heads + 2 * kv_num_heads) * head_size]; each K/V head serves
// num_heads / kv_num_heads query heads.
struct GroupQueryDims {
  int64_t heads, kv_heads, head_size;
};
// Fails when the attributes are missing, kv_num_heads does not divide num_heads, or the
// hidden size is not a multiple of the heads.
GroupQueryDims group_query_dims(const Node& n, int64_t hidden, bool packed);

}  // namespace vlrt

// --int8 dynamic: the rewrite onnxruntime's quantize_dynamic makes (QUInt8 activations,
// QInt8 symmetric weights), with weights scaled per output channel:
//   MatMul(A, B)  ->  DynamicQuantizeLinear(A) -> MatMulInteger(A_q, B_q, A_zp, 0)
//                     -> Cast(float) -> Mul(A_scale * B_scale[N])
//   Gemm          ->  the same on B (transposed first when transB), alpha folded into the
//                     scale, then Add(beta * C)
//   Conv(X, W, b) ->  DynamicQuantizeLinear(X) -> ConvInteger(X_q, W_q, X_zp, 0)
//                     -> Cast(float) -> Mul(X_scale * W_scale[1,M,1,1]) -> Add(b[1,M,1,1])
// Each activation is quantized once however many nodes read it.
#pragma once

#include <string>
#include <vector>

#include "quantize/rewrite.h"

namespace vlrt {

struct Int8Options {
  std::vector<std::string> exclude;  // node names or op types left float
  int64_t min_weight_elements = 256;  // nodes with smaller weights stay float
};

// Per output channel symmetric int8: scale[c] = max|w| / 127 over channel c (1 where the
// channel is all zeros), q = round(w / scale[c]) in [-127, 127]. `channel_axis` is 1 for a
// MatMul's B [K, N], 0 for a Conv's W [M, C, ...].
struct ChannelQuantized {
  Tensor values;  // int8, the shape of the weight
  std::vector<float> scales;
};
ChannelQuantized quantize_per_channel(const Tensor& weight, int channel_axis);

// Rewrites the model's top-level MatMul, Gemm and Conv nodes with constant float32
// weights as above. Fails when the model is already quantized or its opset is below 11.
QuantizeReport quantize_dynamic_int8(Model& model, const Int8Options& options);

}  // namespace vlrt

// Semantics of the quantized ops that shape inference and every backend share: how a scale and
// zero point map onto a tensor's elements, and the rounding every quantizing op applies.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/tensor.h"
#include "ops/op_schema.h"

namespace vlrt {

// True for the integer types a quantized value may have here (uint8, int8, uint16, int16).
bool is_quantized_type(DType t);

// Where each element of x finds its scale: one for the whole tensor, one per index of an axis,
// or (blocked) one per `block` consecutive indices of the axis.
struct QuantLayout {
  bool per_tensor = true;
  int64_t dim = 1, inner = 1;  // x's size on the axis, and the elements after it
  int64_t scale_dim = 1, block = 0;

  int64_t param_index(int64_t i) const {
    if (per_tensor) return 0;
    int64_t a = i / inner % dim;
    if (block == 0) return a;
    return (i / (inner * dim) * scale_dim + a / block) * inner + i % inner;
  }
};

// The layout of a scale of shape `scale` over x: a scalar or one value is per tensor; a 1-D scale
// of x's size on `axis` is per axis; with block_size > 0 the scale has x's rank with
// ceil(size / block_size) on the axis. Fails naming the shapes when the scale fits none of them.
QuantLayout quant_layout(const Shape& x, const Shape& scale, int64_t axis, int64_t block_size);

// Fails unless a zero point of shape `zp` fits the scale `scale` (same shape, or one value for a
// single scale); `what` names the pair ("y_zero_point").
void check_zero_point_shape(const Shape& scale, const Shape& zp, const char* what);

// Checks the infer functions of the quantized families share; each fails naming the input (`what`).
// Input i is a floating-point scale.
void check_float_scale(const InferContext& ctx, size_t i, const char* what);
// Input i is one value or a vector [len], one per `per`.
void check_per_tensor_or_vector(const InferContext& ctx, size_t i, const char* what, int64_t len,
                                const char* per);
// Input i is uint8 or int8; returns its type.
DType check_quantized_input(const InferContext& ctx, size_t i, const char* what);
// Input zp, when given, has type `want`, that of the value it belongs to (`of`).
void check_zero_point_type(const InferContext& ctx, size_t zp, DType want, const char* what, const char* of);

// QLinearAveragePool is AveragePool (opset 19) between dequantization and quantization: the float node it
// runs, and the NCHW form of an NHWC shape for its channels_last variant.
Node qlinear_average_pool_as_float(const Node& n);
Shape channels_first(const Shape& s);
// [N, C, D...] as [N, D..., C]: the inverse of channels_first.
Shape channels_last(const Shape& s);

// ONNX Runtime's channels-last forms of two ops on 8-bit values: com.microsoft QLinearConv with
// channels_last=1 and com.microsoft NhwcMaxPool compute the standard QLinearConv and MaxPool on X
// moved from [N, D..., C] to [N, C, D...], their Y moved back. Whether n is such a node (a
// com.microsoft QLinearConv without the attribute is the standard one), and the standard node it
// computes.
bool is_channels_last(const Node& n);
Node as_channels_first(const Node& n);

// Saturate(RoundHalfToEven(v) + zp) in T's range; NaN gives T's lowest value.
template <class T>
T quantize_value(float v, int32_t zp) {
  constexpr int32_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  float r = std::nearbyint(v);  // the default rounding mode rounds halves to even
  if (!(r >= float(lo - zp))) return T(lo);
  if (r > float(hi - zp)) return T(hi);
  return T(int32_t(r) + zp);
}

}  // namespace vlrt

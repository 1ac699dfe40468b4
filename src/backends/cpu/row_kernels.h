// The CPU kernels' float32 row loops, written once with GCC vector extensions in
// row_kernels.inc and compiled once per instruction set level (row_kernels_<isa>.cpp,
// each with its own -march); row_kernels_f32() gives the table of the level in use.
// At CpuIsa::plain there is no table: the kernels run their plain scalar code, the
// reference that every level is tested against.
#pragma once

#include <cstdint>

namespace vlrt {

// Unary float32 ops with a vector form; UnaryParams carries their attributes.
enum class UnaryF32 {
  relu,
  leaky_relu,
  clip,
  hard_sigmoid,
  hard_swish,
  exp,
  sigmoid,
  tanh,
  erf,
  gelu,
  gelu_tanh
};
struct UnaryParams {
  float a = 0, b = 0;  // leaky_relu: alpha; clip: min, max; hard_sigmoid: alpha, beta
};

enum class BinaryF32 { none, add, sub, mul, div };

struct RowKernelsF32 {
  void (*unary)(UnaryF32 op, UnaryParams p, const float* x, float* y, int64_t n);
  // o[i] = a[i * sa] op b[i * sb] with strides sa, sb of 0 or 1.
  void (*binary)(BinaryF32 op, const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n);

  // Reductions of one row; max_of and min_of return NaN when the row holds one.
  float (*max_of)(const float* x, int64_t n);
  float (*min_of)(const float* x, int64_t n);
  double (*sum_of)(const float* x, int64_t n);
  double (*sq_dev_sum)(const float* x, int64_t n, double mean);  // sum of (x - mean)^2
  // y = exp(x - shift) for x <= shift; returns the sum of y.
  double (*exp_shifted)(const float* x, float shift, float* y, int64_t n);

  // Row updates.
  void (*affine)(const float* x, float m, float a, float d, float* y, int64_t n);  // y = (x - m) * a + d
  // y = (x - m) * inv * scale + bias
  void (*norm_affine)(const float* x, float m, float inv, const float* scale, const float* bias, float* y,
                      int64_t n);
  void (*add_into)(double* acc, const float* x, int64_t n);  // acc += x
  // A transposed tile of 32-bit values: dst[i * dst_stride + j] = src[j * src_stride + i] for
  // i < rows, j < cols (Transpose's tiles).
  void (*transpose_32bit)(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
                          int64_t cols);
  void (*max_into)(float* acc, const float* x, int64_t n);   // acc = max(acc, x), NaN wins
  void (*min_into)(float* acc, const float* x, int64_t n);

  // 8-bit quantization, y uint8 (is_signed false) or int8: y[i] = Saturate(RoundHalfToEven(x[i] /
  // scale) + zp), NaN to the lowest value (quantize_value's), and back: y[i] = float(x[i] - zp) * scale.
  void (*quantize_8bit)(const float* x, float scale, int32_t zp, bool is_signed, void* y, int64_t n);
  void (*dequantize_8bit)(const void* x, bool is_signed, int32_t zp, float scale, float* y, int64_t n);
  // y[i] = Saturate(RoundHalfToEven(float(acc[i]) * multiplier) + zp): requantized 32-bit sums.
  void (*requantize_8bit)(const int32_t* acc, float multiplier, int32_t zp, bool is_signed, void* y,
                          int64_t n);
  // The same with one multiplier per element: multiplier[i] (a row of per-column multipliers).
  void (*requantize_columns_8bit)(const int32_t* acc, const float* multiplier, int32_t zp, bool is_signed,
                                  void* y, int64_t n);
  // ONNX Runtime's QLinearAdd on raw 8-bit values of one type: c[i] = Saturate(RoundHalfToEven(
  // fma(a[i], ra, fma(b[i], rb, fixed)))), or with b_first fma(b[i], rb, fma(a[i], ra, fixed)).
  void (*qlinear_add_8bit)(const void* a, const void* b, float ra, float rb, float fixed, bool b_first,
                           bool is_signed, void* c, int64_t n);

  // y[i] = sum over j < k of a[i * sa + j] * b[i * sb + j], for i < n (vlrt.WeightedSum's rows).
  void (*dot_rows)(const float* a, int64_t sa, const float* b, int64_t sb, int64_t k, float* y, int64_t n);
};

// The table of the level cpu_isa() names; nullptr at CpuIsa::plain.
const RowKernelsF32* row_kernels_f32();

}  // namespace vlrt

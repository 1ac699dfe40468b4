// Integer building blocks the CPU kernels of both quantized families share.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cpu/integer_gemm.h"
#include "backends/cpu/kernel.h"
#include "ops/linalg_semantics.h"
#include "ops/quantization_semantics.h"

namespace vlrt {

// Input i's values as float (a scale); {fallback} when the input is omitted.
std::vector<float> float_values(const KernelContext& ctx, size_t i, float fallback = 1.0f);
// Input i's values as int32 (a zero point); {0} when the input is omitted.
std::vector<int32_t> zero_point_values(const KernelContext& ctx, size_t i);

// acc = (a - a_zp) x (b - b_zp) with numpy.matmul's pairing, exact in 64 bits and wrapped to 32 as the
// spec allows. a_zp is one value or one per row of a; b_zp one value or one per column of b.
// `packed`: b (2-D) as pack_matmul_weight packed it, read in its place. `done` (optional) is called
// for each part of acc (rows of all batches together, n columns) once it holds its final values.
void integer_matmul(const Tensor& a, const std::vector<int32_t>& a_zp, const Tensor& b,
                    const std::vector<int32_t>& b_zp, int32_t* acc, ThreadPool& pool,
                    const PackedIntegerWeight* packed = nullptr, const IntegerGemmDone* done = nullptr);

// acc = (a - a_zp) x b for a [..., k] and b as pack_matmul_weight packed it (k x n).
void integer_matmul_packed(const Tensor& a, int32_t a_zp, const PackedIntegerWeight& b, int32_t* acc,
                           ThreadPool& pool, const IntegerGemmDone* done = nullptr);

// acc = conv(x - x_zp, w - w_zp) over the geometry g; padding contributes nothing (it is x_zp).
// w_zp is one value or one per output channel. `packed`: w as pack_conv_weight packed it.
void integer_conv(const ConvGeometry& g, const Tensor& x, int32_t x_zp, const Tensor& w,
                  const std::vector<int32_t>& w_zp, int32_t* acc, ThreadPool& pool,
                  const PackedIntegerWeight* packed = nullptr);

// An 8-bit [M, K] matrix, or (trans) the transpose of one, as a contiguous [M, K] copy.
Tensor maybe_transposed(const Tensor& t, bool trans);

// What integer_matmul and integer_conv read of a constant weight, packed once (AVX2 only:
// integer_gemm_available()). b is 2-D, [k, n] or with `transposed` [n, k]; w is [m, c/group, kernel...].
PackedIntegerWeight pack_matmul_weight(const Tensor& b, const std::vector<int32_t>& b_zp, bool transposed,
                                       ThreadPool& pool);
PackedIntegerWeight pack_conv_weight(const Tensor& w, int64_t group, const std::vector<int32_t>& w_zp,
                                     ThreadPool& pool);

// Calls f.template operator()<T>() with T the 8-bit type of t (uint8 or int8).
template <class F>
decltype(auto) dispatch_q8(DType t, F&& f) {
  if (t == DType::u8) return f.template operator()<uint8_t>();
  if (t == DType::i8) return f.template operator()<int8_t>();
  unsupported("type ", dtype_name(t), " (expected uint8 or int8)");
}

// Calls f.template operator()<T>() with T the quantized type of t (uint8, int8, uint16 or int16).
template <class F>
decltype(auto) dispatch_quantized(DType t, F&& f) {
  if (t == DType::u16) return f.template operator()<uint16_t>();
  if (t == DType::i16) return f.template operator()<int16_t>();
  return dispatch_q8(t, std::forward<F>(f));
}

// DynamicQuantizeLinear's uint8 parameters for x as ONNX Runtime computes them: the range is widened
// to include 0; an all-zero x gets scale 1.
struct DynamicQuant {
  float scale = 1;
  int32_t zero_point = 0;
};
DynamicQuant dynamic_quant_params(const float* x, int64_t n);
// DynamicQuantizeLinear of n values: their parameters, and y[i] = quantize_value<uint8_t>(x[i] /
// scale, zero point). On the pool's threads, in chunks: the same result as one thread (the
// extremes do not depend on the order).
DynamicQuant dynamic_quantize(const float* x, int64_t n, uint8_t* y, ThreadPool& pool);

// y[i] = quantize_value<T>(x[i] / scale, zp) over n values, through the row kernels' vector loop
// for 8-bit T where the CPU level has one; and back: y[i] = float(x[i] - zp) * scale.
template <class T>
void quantize_floats(const float* x, int64_t n, float scale, int32_t zp, T* y);
template <class T>
void dequantize_values(const T* x, int64_t n, int32_t zp, float scale, float* y);

// out[r, j] = float(acc[r, j]) * scale[j] (+ bias[j]) over rows [r0, r1) and columns [c0, c1) of
// acc and out, whose rows are ld apart; scale holds one value or one per column, bias none or one
// per column. Rounded after each step, as the Cast, Mul and Add nodes it replaces round, on every
// kernel that dequantizes an integer product.
void dequantize_columns(const int32_t* acc, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        const std::vector<float>& scale, const std::vector<float>& bias, float* out);
// The same into an output of its own: column c0 of row r at out + r * out_ld (one of the products
// that vlrt.DynamicQuantizeMatMuls computes as one).
void dequantize_columns_into(const int32_t* acc, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             const std::vector<float>& scale, const std::vector<float>& bias, float* out,
                             int64_t out_ld);

// y[i] = Saturate(RoundHalfToEven(acc[i] * multiplier[channel]) + zp), the requantization of 32-bit
// accumulators; channel = i / inner % multiplier count. On `pool` where one is given.
void requantize(const int32_t* acc, int64_t n, const std::vector<float>& multiplier, int64_t inner,
                int32_t zp, Tensor& y, ThreadPool* pool = nullptr);

}  // namespace vlrt

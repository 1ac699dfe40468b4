// CPU reference kernels of ONNX Runtime's quantized contrib ops (domain com.microsoft), with the
// arithmetic ONNX Runtime's reference paths use: float32 scales, round half to even, saturation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ops/quantization.h"
#include "backends/cpu/row_kernels.h"
#include "core/dispatch.h"
#include "ops/fused_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

struct QParams {
  float scale;
  int32_t zp;
};

QParams qparams(const KernelContext& ctx, size_t scale, size_t zp) {
  return {float_values(ctx, scale)[0], zero_point_values(ctx, zp)[0]};
}

// Calls f(i, ia, ib) for every element i of c with the elements of a and b broadcast to it.
template <class F>
void for_each_broadcast(const Tensor& a, const Tensor& b, const Tensor& c, const F& f) {
  std::vector<int64_t> sa = broadcast_strides(a.shape(), c.shape()), sb = broadcast_strides(b.shape(), c.shape());
  std::vector<int64_t> out_strides = contiguous_strides(c.shape());
  for (int64_t i = 0; i < c.numel(); i++) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < out_strides.size(); d++) {
      int64_t idx = i / out_strides[d] % c.shape()[d];
      ia += idx * sa[d];
      ib += idx * sb[d];
    }
    f(i, ia, ib);
  }
}

// C = Saturate(Round(f(A_scale * (A - A_zp), B_scale * (B - B_zp)) / C_scale) + C_zp), broadcasting A and B.
template <class Op>
void qlinear_binary(KernelContext& ctx, Op op) {
  const Tensor &a = ctx.input(0), &b = ctx.input(3);
  Tensor& c = ctx.output(0);
  QParams pa = qparams(ctx, 1, 2), pb = qparams(ctx, 4, 5), pc = qparams(ctx, 6, 7);
  dispatch_q8(c.dtype(), [&]<class T>() {
    const T *ad = a.data<T>(), *bd = b.data<T>();
    T* cd = c.data<T>();
    for_each_broadcast(a, b, c, [&](int64_t i, int64_t ia, int64_t ib) {
      float va = pa.scale * float(int32_t(ad[ia]) - pa.zp), vb = pb.scale * float(int32_t(bd[ib]) - pb.zp);
      cd[i] = quantize_value<T>(op(va, vb) / pc.scale, pc.zp);
    });
  });
}

// ONNX Runtime's x86 QLinearAdd (MLAS): with the ratios r = scale / C_scale and the zero points folded
// into one constant, C = RoundHalfToEven(fma(a, r_a, fma(b, r_b, fixed))) on the raw 8-bit values (the
// single-element input folded first). Rounds differently from dequantize-add-quantize in the last bit.
void qlinear_add_kernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(3);
  Tensor& c = ctx.output(0);
  QParams pa = qparams(ctx, 1, 2), pb = qparams(ctx, 4, 5), pc = qparams(ctx, 6, 7);
  float ra = pa.scale / pc.scale, rb = pb.scale / pc.scale;
  float fixed = float(pc.zp) - std::fma(ra, float(pa.zp), rb * float(pb.zp));
  bool a_first = a.numel() == 1 && b.numel() != 1;
  const RowKernelsF32* row = row_kernels_f32();
  dispatch_q8(c.dtype(), [&]<class T>() {
    const T *ad = a.data<T>(), *bd = b.data<T>();
    T* cd = c.data<T>();
    if (row && a.shape() == c.shape() && b.shape() == c.shape() && a.dtype() == c.dtype() &&
        b.dtype() == c.dtype())
      return ctx.pool.parallel_for(
          c.numel(),
          [&](int64_t i0, int64_t i1) {
            row->qlinear_add_8bit(ad + i0, bd + i0, ra, rb, fixed, a_first, std::is_signed_v<T>, cd + i0,
                                  i1 - i0);
          },
          grain_for(1));
    for_each_broadcast(a, b, c, [&](int64_t i, int64_t ia, int64_t ib) {
      float va = float(ad[ia]), vb = float(bd[ib]);
      float v = a_first ? std::fma(vb, rb, std::fma(va, ra, fixed)) : std::fma(va, ra, std::fma(vb, rb, fixed));
      cd[i] = T(std::clamp(std::nearbyint(v), float(std::numeric_limits<T>::min()),
                           float(std::numeric_limits<T>::max())));
    });
  });
}

void qlinear_mul_kernel(KernelContext& ctx) {
  qlinear_binary(ctx, [](float a, float b) { return a * b; });
}

// Y = Quantize(f(Dequantize(X))) through a table of the 256 possible inputs, as ONNX Runtime builds it.
template <class F>
void qlinear_lookup(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  QParams px = qparams(ctx, 1, 2), py = qparams(ctx, 3, 4);
  dispatch_q8(x.dtype(), [&]<class T>() {
    T table[256];
    for (int v = 0; v < 256; v++) {
      T q = T(v);
      table[v] = quantize_value<T>(f(px.scale * float(int32_t(q) - px.zp)) / py.scale, py.zp);
    }
    const T* xd = x.data<T>();
    T* yd = ctx.output(0).data<T>();
    for (int64_t i = 0; i < x.numel(); i++) yd[i] = table[uint8_t(xd[i])];
  });
}

void qlinear_sigmoid_kernel(KernelContext& ctx) {
  qlinear_lookup(ctx, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
}

void qlinear_leaky_relu_kernel(KernelContext& ctx) {
  float alpha = ctx.node.attr_float("alpha", 0.01f);
  qlinear_lookup(ctx, [alpha](float v) { return v >= 0 ? v : v * alpha; });
}

// Each input is requantized to Y's scale and zero point (copied when they are the same) and placed.
void qlinear_concat_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  QParams py = qparams(ctx, 0, 1);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), y.rank());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; d++) outer *= y.dim(int(d));
  for (int64_t d = axis + 1; d < y.rank(); d++) inner *= y.dim(int(d));
  int64_t y_row = y.dim(int(axis)) * inner, offset = 0;
  dispatch_q8(y.dtype(), [&]<class T>() {
    T* yd = y.data<T>();
    for (size_t i = 2; i < ctx.input_count(); i += 3) {
      const Tensor& x = ctx.input(i);
      QParams px = qparams(ctx, i + 1, i + 2);
      const T* xd = x.data<T>();
      int64_t row = x.dim(int(axis)) * inner;
      for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < row; j++) {
          T v = xd[o * row + j];
          yd[o * y_row + offset + j] =
              px.scale == py.scale && px.zp == py.zp
                  ? v
                  : quantize_value<T>(px.scale * float(int32_t(v) - px.zp) / py.scale, py.zp);
        }
      offset += row;
    }
  });
}

// Sum of each channel's values, requantized with x_scale / count / y_scale (ONNX Runtime's order) after
// removing x_zp * count.
void qlinear_global_average_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  QParams px = qparams(ctx, 1, 2), py = qparams(ctx, 3, 4);
  bool last = ctx.node.attr_int("channels_last", 0) != 0;
  int64_t n = x.dim(0), c = last ? x.dim(-1) : x.dim(1), size = x.numel() / std::max<int64_t>(1, n * c);
  std::vector<int32_t> acc(size_t(n * c), 0);
  dispatch_q8(x.dtype(), [&]<class T>() {
    const T* xd = x.data<T>();
    std::vector<int64_t> sums(static_cast<size_t>(c));
    for (int64_t b = 0; b < n; b++) {
      std::fill(sums.begin(), sums.end(), 0);
      if (last) {  // rows of C values
        for (int64_t p = 0; p < size; p++)
          for (int64_t ch = 0; ch < c; ch++) sums[size_t(ch)] += xd[(b * size + p) * c + ch];
      } else {
        for (int64_t ch = 0; ch < c; ch++)
          for (int64_t p = 0; p < size; p++) sums[size_t(ch)] += xd[(b * c + ch) * size + p];
      }
      for (int64_t ch = 0; ch < c; ch++)
        acc[size_t(b * c + ch)] = int32_t(sums[size_t(ch)] - int64_t(px.zp) * size);
    }
  });
  requantize(acc.data(), n * c, {px.scale / float(size) / py.scale}, 1, py.zp, y);
}

// x [N, D1..., C] and its NCHW copy [N, C, D1...] (or back, when `to_last`).
template <class T>
void move_channels(const T* src, T* dst, int64_t n, int64_t c, int64_t size, bool to_last) {
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t p = 0; p < size; p++) {
        int64_t first = (b * c + ch) * size + p, last = (b * size + p) * c + ch;
        dst[to_last ? last : first] = src[to_last ? first : last];
      }
}

// Dequantized x_scale * (X - x_zp), averaged by the float AveragePool kernel, then quantized as
// ONNX Runtime does: Saturate(Round(Y / y_scale + y_zp)).
void qlinear_average_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  QParams px = qparams(ctx, 1, 2), py = qparams(ctx, 3, 4);
  bool last = ctx.node.attr_int("channels_last", 0) != 0;
  Tensor xf(DType::f32, last ? channels_first(x.shape()) : x.shape());
  int64_t n = x.dim(0), c = xf.dim(1);
  dispatch_q8(x.dtype(), [&]<class T>() {
    std::vector<float> deq(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); i++)
      deq[size_t(i)] = px.scale * float(int32_t(x.data<T>()[i]) - px.zp);
    if (last)
      move_channels(deq.data(), xf.data<float>(), n, c, x.numel() / std::max<int64_t>(1, n * c), false);
    else
      std::copy(deq.begin(), deq.end(), xf.data<float>());
  });
  Tensor yf = run_node_cpu(qlinear_average_pool_as_float(ctx.node), 19, {&xf}, ctx.pool).at(0);
  std::vector<float> avg(size_t(yf.numel()));
  if (last)
    move_channels(yf.data<float>(), avg.data(), n, c, yf.numel() / std::max<int64_t>(1, n * c), true);
  else
    std::copy_n(yf.data<float>(), avg.size(), avg.begin());
  dispatch_q8(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    for (size_t i = 0; i < avg.size(); i++) out[i] = quantize_value<T>(avg[i] / py.scale + float(py.zp), 0);
  });
}

// com.microsoft QLinearConv: the standard QLinearConv's reference kernel, on X moved to [N, C, D...] and
// back where it is channels-last.
void channels_last_qlinear_conv_kernel(KernelContext& ctx) {
  std::vector<const Tensor*> in(ctx.node.inputs.size(), nullptr);
  for (size_t i = 0; i < in.size(); i++)
    if (ctx.has_input(i)) in[i] = &ctx.input(i);
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  bool last = is_channels_last(ctx.node);
  Tensor xf(x.dtype(), last ? channels_first(x.shape()) : x.shape());
  int64_t n = x.dim(0), c = xf.dim(1);
  dispatch_q8(x.dtype(), [&]<class T>() {
    if (last) move_channels(x.data<T>(), xf.data<T>(), n, c, x.numel() / std::max<int64_t>(1, n * c), false);
  });
  if (last) in[0] = &xf;
  Tensor yf = run_node_cpu(as_channels_first(ctx.node), 19, in, ctx.pool).at(0);
  dispatch_q8(y.dtype(), [&]<class T>() {
    int64_t yc = yf.dim(1);
    if (last)
      move_channels(yf.data<T>(), y.data<T>(), n, yc, yf.numel() / std::max<int64_t>(1, n * yc), true);
    else
      std::copy_n(yf.data<T>(), yf.numel(), y.data<T>());
  });
}

// Y = alpha * A_scale * B_scale * ((A - A_zp)(B - B_zp) + C), quantized with y_scale and y_zp when given.
void qgemm_kernel(KernelContext& ctx) {
  Tensor a = maybe_transposed(ctx.input(0), ctx.node.attr_int("transA", 0) != 0);
  Tensor& y = ctx.output(0);
  int64_t n = y.dim(1);
  std::vector<int32_t> acc(size_t(y.numel()));
  if (ctx.packed_weight) {  // B as a prepared kernel packed it, transposed or not
    integer_matmul_packed(a, zero_point_values(ctx, 2)[0], *ctx.packed_weight, acc.data(), ctx.pool);
  } else {
    Tensor b = maybe_transposed(ctx.input(3), ctx.node.attr_int("transB", 0) != 0);
    integer_matmul(a, zero_point_values(ctx, 2), b, zero_point_values(ctx, 5), acc.data(), ctx.pool);
  }
  if (ctx.has_input(6)) {
    const Tensor& c = ctx.input(6);
    std::vector<int64_t> cs = broadcast_strides(c.shape(), y.shape());
    const int32_t* cd = c.data<int32_t>();
    for (int64_t i = 0; i < y.numel(); i++) acc[size_t(i)] += cd[i / n * cs[0] + i % n * cs[1]];
  }
  float alpha = ctx.node.attr_float("alpha", 1.0f), as = float_values(ctx, 1)[0];
  std::vector<float> scale = float_values(ctx, 4);
  for (float& s : scale) s = alpha * as * s;
  if (!ctx.has_input(7)) {
    float* out = y.data<float>();
    for (int64_t i = 0; i < y.numel(); i++)
      out[i] = float(acc[size_t(i)]) * scale[scale.size() == 1 ? 0 : i % n];
    return;
  }
  float ys = float_values(ctx, 7)[0];
  for (float& s : scale) s /= ys;
  requantize(acc.data(), y.numel(), scale, 1, zero_point_values(ctx, 8)[0], y);
}

// Y = A_scale * B_scale * ((A - A_zp) x (B - B_zp)) + bias, with per-column B scales.
void integer_matmul_to_float(const KernelContext& ctx, const Tensor& a, const std::vector<int32_t>& a_zp,
                             float a_scale, size_t b_scale, size_t b_zp, size_t bias, Tensor& y) {
  const Tensor& b = ctx.input(1);
  int64_t n = b.rank() > 1 ? b.dim(-1) : 1;
  std::vector<float> scale = float_values(ctx, b_scale);
  for (float& s : scale) s *= a_scale;
  std::vector<float> bv = ctx.has_input(bias) ? float_values(ctx, bias) : std::vector<float>();
  // The sums, dequantized part by part as the product finishes them. Up to 4 MiB of them go in a
  // buffer the calling thread keeps (no allocation and page faults per product); a larger product
  // has a buffer of its own, freed after it (not held for the session's life).
  constexpr size_t kKeptSums = size_t(1) << 20;
  thread_local std::vector<int32_t> t_acc;
  std::vector<int32_t> own;
  std::vector<int32_t>& sums = size_t(y.numel()) <= kKeptSums ? t_acc : own;
  if (sums.size() < size_t(y.numel())) sums.resize(size_t(y.numel()));
  int32_t* acc = sums.data();
  float* out = y.data<float>();
  IntegerGemmDone dequantize = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    dequantize_columns(acc, n, r0, r1, c0, c1, scale, bv, out);
  };
  integer_matmul(a, a_zp, b, zero_point_values(ctx, b_zp), acc, ctx.pool, ctx.packed_weight, &dequantize);
}

void matmul_integer_to_float_kernel(KernelContext& ctx) {
  integer_matmul_to_float(ctx, ctx.input(0), zero_point_values(ctx, 4), float_values(ctx, 2)[0], 3, 5, 6,
                          ctx.output(0));
}

// A is quantized to uint8 as DynamicQuantizeLinear does, then multiplied in integers.
void dynamic_quantize_matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  Tensor aq(DType::u8, a.shape());
  DynamicQuant q = dynamic_quantize(a.data<float>(), a.numel(), aq.data<uint8_t>(), ctx.pool);
  integer_matmul_to_float(ctx, aq, {q.zero_point}, q.scale, 2, 3, 4, ctx.output(0));
}

// vlrt.DynamicQuantizeMatMuls: each product as its own DynamicQuantizeMatMul (A quantized again for
// each, to the same values).
void dynamic_quantize_matmuls_kernel(KernelContext& ctx) {
  std::vector<const Tensor*> in;
  for (size_t k = 0; k < ctx.node.inputs.size(); k++)
    in.push_back(ctx.has_input(k) ? &ctx.input(k) : nullptr);
  for (size_t i = 0; i < ctx.node.outputs.size(); i++) {
    Tensor y = run_node_cpu(dynamic_product(ctx.node, i), 1, dynamic_product_inputs(in, i), ctx.pool).at(0);
    std::copy_n(y.data<float>(), y.numel(), ctx.output(i).data<float>());
  }
}

}  // namespace

void register_quantization_contrib_kernels(CpuKernelTable& t) {
  t["vlrt.DynamicQuantizeMatMuls"] = {dynamic_quantize_matmuls_kernel};
  t["com.microsoft.QLinearAdd"] = {qlinear_add_kernel};
  t["com.microsoft.QLinearMul"] = {qlinear_mul_kernel};
  t["com.microsoft.QLinearSigmoid"] = {qlinear_sigmoid_kernel};
  t["com.microsoft.QLinearLeakyRelu"] = {qlinear_leaky_relu_kernel};
  t["com.microsoft.QLinearConcat"] = {qlinear_concat_kernel};
  t["com.microsoft.QLinearGlobalAveragePool"] = {qlinear_global_average_pool_kernel};
  t["com.microsoft.QLinearAveragePool"] = {qlinear_average_pool_kernel};
  t["com.microsoft.QLinearConv"] = {channels_last_qlinear_conv_kernel};
  t["com.microsoft.QGemm"] = {qgemm_kernel};
  t["com.microsoft.DynamicQuantizeMatMul"] = {dynamic_quantize_matmul_kernel};
  t["com.microsoft.MatMulIntegerToFloat"] = {matmul_integer_to_float_kernel};
}

}  // namespace vlrt

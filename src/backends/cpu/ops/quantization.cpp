// CPU reference kernels of the standard quantized ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, ConvInteger, QLinearConv and QLinearMatMul. Integer sums are exact
// (64-bit); every float step (division by the scale, requantization) is float32, as in ONNX Runtime.
#include "backends/cpu/ops/quantization.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/integer_gemm.h"
#include "core/dispatch.h"

namespace vlrt {

std::vector<float> float_values(const KernelContext& ctx, size_t i, float fallback) {
  if (!ctx.has_input(i)) return {fallback};
  std::vector<double> v = ctx.input(i).to_double_vector();
  return std::vector<float>(v.begin(), v.end());
}

std::vector<int32_t> zero_point_values(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return {0};
  std::vector<double> v = ctx.input(i).to_double_vector();
  return std::vector<int32_t>(v.begin(), v.end());
}

namespace {

std::vector<int32_t> int32_values(const Tensor& t) {
  std::vector<int32_t> v(size_t(t.numel()));
  dispatch_q8(t.dtype(), [&]<class T>() { std::copy_n(t.data<T>(), v.size(), v.begin()); });
  return v;
}

// Offsets of each product's A and B in a batched matmul.
void batch_offsets(const MatMulDims& d, std::vector<int64_t>& a_off, std::vector<int64_t>& b_off) {
  a_off.assign(size_t(d.count), 0);
  b_off.assign(size_t(d.count), 0);
  for (int64_t i = 0; i < d.count; i++) {
    int64_t rest = i;
    for (size_t ax = d.batch.size(); ax-- > 0;) {
      int64_t idx = rest % d.batch[ax];
      rest /= d.batch[ax];
      a_off[i] += idx * d.a_strides[ax];
      b_off[i] += idx * d.b_strides[ax];
    }
  }
}

}  // namespace

void integer_matmul(const Tensor& a, const std::vector<int32_t>& a_zp, const Tensor& b,
                    const std::vector<int32_t>& b_zp, int32_t* acc, ThreadPool& pool) {
  MatMulDims d = matmul_dims(a.shape(), b.shape());
  int64_t rows = a.rank() > 1 ? a.dim(-2) : 1, m = d.m, n = d.n, k = d.k;
  if (integer_gemm_available() && (a_zp.size() == 1 || int64_t(a_zp.size()) == m)) {
    std::vector<int64_t> a_off, b_off;
    batch_offsets(d, a_off, b_off);
    dispatch_q8(a.dtype(), [&]<class TA>() {
      dispatch_q8(b.dtype(), [&]<class TB>() {
        for (int64_t p = 0; p < d.count; p++)
          integer_gemm(m, n, k, a.data<TA>() + a_off[size_t(p)], k, a_zp, b.data<TB>() + b_off[size_t(p)], n, b_zp,
                       acc + p * m * n, n, pool);
      });
    });
    return;
  }
  std::vector<int32_t> av = int32_values(a), bv = int32_values(b);
  std::vector<int64_t> a_off, b_off;
  batch_offsets(d, a_off, b_off);
  auto job = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      int64_t p = r / m, i = r % m;
      int32_t za = a_zp.size() == 1 ? a_zp[0] : a_zp[size_t(i % rows)];
      const int32_t* ar = av.data() + a_off[p] + i * k;
      const int32_t* bp = bv.data() + b_off[p];
      for (int64_t j = 0; j < n; j++) {
        int32_t zb = b_zp.size() == 1 ? b_zp[0] : b_zp[size_t(j)];
        int64_t s = 0;
        for (int64_t t = 0; t < k; t++) s += int64_t(ar[t] - za) * (bp[t * n + j] - zb);
        acc[r * n + j] = int32_t(s);  // wraps modulo 2^32
      }
    }
  };
  pool.parallel_for(d.count * m, job, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * k)));
}

namespace {

// Columns [o0, o1) of the im2col matrix of one image and group: row c * ks + kk holds
// x[c, position of output o and kernel offset kk] - x_zp, 0 where that falls in the padding.
// Columns [o0, o1) of the im2col matrix of one image and group, packed for integer_gemm: row
// c * ks + kk holds x[c, position of output o and kernel offset kk] - x_zp, 0 where that falls in
// the padding.
template <class T>
void im2col_centred(const ConvGeometry& g, const T* x, int32_t x_zp, int64_t cg, int64_t o0, IntegerGemmB& out) {
  int64_t ks = g.k_size(), is = g.in_size(), width = out.n;
  for (int64_t c = 0; c < cg; c++) {
    const T* xc = x + c * is;
    for (int64_t kk = 0; kk < ks; kk++) {
      int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
      int64_t t = c * ks + kk;
      // The output position o as (od, oh, ow), advanced one step at a time.
      int64_t od = o0 / (g.out[1] * g.out[2]), oh = o0 / g.out[2] % g.out[1], ow = o0 % g.out[2];
      for (int64_t o = 0; o < width; o++) {
        int64_t id = od * g.stride[0] + kd * g.dil[0] - g.pad[0];
        int64_t ih = oh * g.stride[1] + kh * g.dil[1] - g.pad[1];
        int64_t iw = ow * g.stride[2] + kw * g.dil[2] - g.pad[2];
        if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2])
          out.panels[out.panel_index(t, o)] = int16_t(int32_t(xc[(id * g.in[1] + ih) * g.in[2] + iw]) - x_zp);
        if (++ow == g.out[2]) {
          ow = 0;
          if (++oh == g.out[1]) {
            oh = 0;
            ++od;
          }
        }
      }
    }
  }
}

// The convolution as products of the weights (m x c*ks per group, packed once) and im2col blocks
// of the input.
template <class TX, class TW>
void integer_conv_gemm(const ConvGeometry& g, const TX* x, int32_t x_zp, const TW* w,
                       const std::vector<int32_t>& w_zp, int32_t* acc, ThreadPool& pool) {
  int64_t cg = g.c / g.group, mg = g.m / g.group, ks = g.k_size(), is = g.in_size(), os = g.out_size();
  int64_t depth = cg * ks;
  bool pointwise = ks == 1 && g.in[0] == g.out[0] && g.in[1] == g.out[1] && g.in[2] == g.out[2] &&
                   g.pad[0] == 0 && g.pad[1] == 0 && g.pad[2] == 0;
  // Columns per im2col block: its packed copy stays near 4 MiB.
  int64_t block = std::max<int64_t>(16, std::min<int64_t>(os, (int64_t(2) << 20) / std::max<int64_t>(1, depth)));
  for (int64_t gi = 0; gi < g.group; gi++) {
    std::vector<int32_t> zp = w_zp.size() == 1 ? w_zp
                                               : std::vector<int32_t>(w_zp.begin() + gi * mg, w_zp.begin() + (gi + 1) * mg);
    IntegerGemmA weights = pack_integer_a(mg, depth, w + gi * mg * depth, depth, zp, pool);
    for (int64_t ni = 0; ni < g.batch; ni++) {
      const TX* xg = x + (ni * g.c + gi * cg) * is;
      int32_t* y = acc + (ni * g.m + gi * mg) * os;
      if (pointwise) {
        integer_gemm(weights, pack_integer_b(depth, os, xg, is, {x_zp}, pool), y, os, pool);
        continue;
      }
      for (int64_t o0 = 0; o0 < os; o0 += block) {
        IntegerGemmB cols(depth, std::min(os, o0 + block) - o0);
        im2col_centred(g, xg, x_zp, cg, o0, cols);
        integer_gemm(weights, cols, y + o0, os, pool);
      }
    }
  }
}

}  // namespace

void integer_conv(const ConvGeometry& g, const Tensor& x, int32_t x_zp, const Tensor& w,
                  const std::vector<int32_t>& w_zp, int32_t* acc, ThreadPool& pool) {
  if (integer_gemm_available()) {
    dispatch_q8(x.dtype(), [&]<class TX>() {
      dispatch_q8(w.dtype(), [&]<class TW>() {
        integer_conv_gemm(g, x.data<TX>(), x_zp, w.data<TW>(), w_zp, acc, pool);
      });
    });
    return;
  }
  int64_t cg = g.c / g.group, mg = g.m / g.group, ks = g.k_size(), is = g.in_size(), os = g.out_size();
  std::vector<int32_t> xv = int32_values(x), wv = int32_values(w);
  for (int32_t& v : xv) v -= x_zp;
  for (size_t i = 0; i < wv.size(); i++) wv[i] -= w_zp.size() == 1 ? w_zp[0] : w_zp[i / size_t(cg * ks)];
  auto planes = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++) {
      int64_t ni = p / g.m, oc = p % g.m;
      const int32_t* xg = xv.data() + (ni * g.c + oc / mg * cg) * is;
      const int32_t* wk = wv.data() + oc * cg * ks;
      int32_t* y = acc + p * os;
      for (int64_t o = 0; o < os; o++) {
        int64_t od = o / (g.out[1] * g.out[2]), oh = o / g.out[2] % g.out[1], ow = o % g.out[2];
        int64_t s = 0;
        for (int64_t kk = 0; kk < ks; kk++) {
          int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
          int64_t id = od * g.stride[0] + kd * g.dil[0] - g.pad[0];
          int64_t ih = oh * g.stride[1] + kh * g.dil[1] - g.pad[1];
          int64_t iw = ow * g.stride[2] + kw * g.dil[2] - g.pad[2];
          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
          int64_t at = (id * g.in[1] + ih) * g.in[2] + iw;
          for (int64_t c = 0; c < cg; c++) s += int64_t(xg[c * is + at]) * wk[c * ks + kk];
        }
        y[o] = int32_t(s);
      }
    }
  };
  pool.parallel_for(g.batch * g.m, planes);
}

DynamicQuant dynamic_quant_params(const float* x, int64_t n) {
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < n; i++) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  DynamicQuant q;
  q.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  q.zero_point = int32_t(std::nearbyint(std::clamp(0.0f - lo / q.scale, 0.0f, 255.0f)));
  return q;
}

void dequantize_columns(const int32_t* acc, int64_t rows, int64_t n, const std::vector<float>& scale,
                        const std::vector<float>& bias, float* out) {
  bool per_column = scale.size() != 1;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++)
      out[r * n + j] = float(acc[r * n + j]) * scale[per_column ? size_t(j) : 0];
  if (bias.empty()) return;
  // A loop of its own: the compiler may not contract the product and the sum into one FMA.
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < n; j++) out[r * n + j] += bias[size_t(j)];
}

void requantize(const int32_t* acc, int64_t n, const std::vector<float>& multiplier, int64_t inner,
                int32_t zp, Tensor& y) {
  int64_t channels = int64_t(multiplier.size());
  dispatch_quantized(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    if (channels > 1 && inner == 1) {  // one multiplier per column: rows of `channels` values
      for (int64_t i = 0; i < n; i += channels)
        for (int64_t j = 0; j < std::min(channels, n - i); j++)
          out[i + j] = quantize_value<T>(float(acc[i + j]) * multiplier[size_t(j)], zp);
      return;
    }
    // runs of `inner` values (all of them for one multiplier) that share a multiplier
    int64_t run = channels == 1 ? std::max<int64_t>(n, 1) : inner;
    for (int64_t start = 0; start < n; start += run) {
      float m = multiplier[size_t(channels == 1 ? 0 : start / inner % channels)];
      for (int64_t i = start; i < std::min(n, start + run); i++) out[i] = quantize_value<T>(float(acc[i]) * m, zp);
    }
  });
}

namespace {

QuantLayout layout_of(const KernelContext& ctx) {
  return quant_layout(ctx.input(0).shape(), ctx.input(1).shape(), ctx.node.attr_int("axis", 1),
                      ctx.node.attr_int("block_size", 0));
}

void quantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  QuantLayout l = layout_of(ctx);
  std::vector<float> scale = float_values(ctx, 1);
  std::vector<int32_t> zp = zero_point_values(ctx, 2);
  std::vector<double> xv = x.to_double_vector();
  Tensor& y = ctx.output(0);
  dispatch_quantized(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); i++) {
      int64_t j = l.param_index(i);
      out[i] = quantize_value<T>(float(xv[i]) / scale[j], zp[zp.size() == 1 ? 0 : j]);
    }
  });
}

void dequantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  QuantLayout l = layout_of(ctx);
  std::vector<float> scale = float_values(ctx, 1);
  std::vector<int32_t> zp = zero_point_values(ctx, 2);
  std::vector<double> xv = x.to_double_vector();
  Tensor& y = ctx.output(0);
  dispatch_float(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); i++) {
      int64_t j = l.param_index(i);
      out[i] = T(float(int64_t(xv[i]) - zp[zp.size() == 1 ? 0 : j]) * scale[j]);
    }
  });
}

void dynamic_quantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  DynamicQuant q = dynamic_quant_params(x.data<float>(), x.numel());
  uint8_t* y = ctx.output(0).data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); i++)
    y[i] = quantize_value<uint8_t>(x.data<float>()[i] / q.scale, q.zero_point);
  if (ctx.has_output(1)) ctx.output(1).data<float>()[0] = q.scale;
  if (ctx.has_output(2)) ctx.output(2).data<uint8_t>()[0] = uint8_t(q.zero_point);
}

void conv_integer_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  ConvGeometry g = conv_geometry(ctx.node, ctx.input(0).shape(), ctx.input(1).shape(), y.shape(), false);
  integer_conv(g, ctx.input(0), zero_point_values(ctx, 2)[0], ctx.input(1), zero_point_values(ctx, 3),
               y.data<int32_t>(), ctx.pool);
}

void qlinear_conv_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  ConvGeometry g = conv_geometry(ctx.node, ctx.input(0).shape(), ctx.input(3).shape(), y.shape(), false);
  std::vector<int32_t> acc(size_t(y.numel()));
  integer_conv(g, ctx.input(0), zero_point_values(ctx, 2)[0], ctx.input(3), zero_point_values(ctx, 5),
               acc.data(), ctx.pool);
  if (ctx.has_input(8)) {
    const int32_t* bias = ctx.input(8).data<int32_t>();
    for (size_t i = 0; i < acc.size(); i++) acc[i] += bias[int64_t(i) / g.out_size() % g.m];
  }
  float xs = float_values(ctx, 1)[0], ys = float_values(ctx, 6)[0];
  std::vector<float> mult = float_values(ctx, 4);
  for (float& m : mult) m = xs * m / ys;
  requantize(acc.data(), y.numel(), mult, g.out_size(), zero_point_values(ctx, 7)[0], y);
}

void qlinear_matmul_kernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(3);
  Tensor& y = ctx.output(0);
  std::vector<int32_t> acc(size_t(y.numel()));
  integer_matmul(a, zero_point_values(ctx, 2), b, zero_point_values(ctx, 5), acc.data(), ctx.pool);
  std::vector<float> as = float_values(ctx, 1), bs = float_values(ctx, 4);
  float ys = float_values(ctx, 6)[0];
  int32_t zp = zero_point_values(ctx, 7)[0];
  int64_t rows = a.rank() > 1 ? a.dim(-2) : 1, n = b.rank() > 1 ? b.dim(-1) : 1;
  dispatch_quantized(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    for (int64_t i = 0; i < y.numel(); i++) {
      float sa = as[as.size() == 1 ? 0 : size_t(i / n % rows)], sb = bs[bs.size() == 1 ? 0 : size_t(i % n)];
      out[i] = quantize_value<T>(float(acc[size_t(i)]) * (sa * sb / ys), zp);
    }
  });
}

}  // namespace

void register_quantization_kernels(CpuKernelTable& t) {
  t["QuantizeLinear"] = {quantize_linear_kernel};
  t["DequantizeLinear"] = {dequantize_linear_kernel};
  t["DynamicQuantizeLinear"] = {dynamic_quantize_linear_kernel};
  t["ConvInteger"] = {conv_integer_kernel};
  t["QLinearConv"] = {qlinear_conv_kernel};
  t["QLinearMatMul"] = {qlinear_matmul_kernel};
}

}  // namespace vlrt

// CPU reference kernels of the standard quantized ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, ConvInteger, QLinearConv and QLinearMatMul. Integer sums are exact
// (64-bit); every float step (division by the scale, requantization) is float32, as in ONNX Runtime.
#include "backends/cpu/ops/quantization.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/integer_gemm.h"
#include "backends/cpu/row_kernels.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

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

Tensor maybe_transposed(const Tensor& t, bool trans) {
  if (!trans) return t;
  Tensor r(t.dtype(), {t.dim(1), t.dim(0)});
  dispatch_q8(t.dtype(), [&]<class T>() {
    const T* s = t.data<T>();
    T* d = r.data<T>();
    for (int64_t i = 0; i < t.dim(0); i++)
      for (int64_t j = 0; j < t.dim(1); j++) d[j * t.dim(0) + i] = s[i * t.dim(1) + j];
  });
  return r;
}

PackedIntegerWeight pack_matmul_weight(const Tensor& b, const std::vector<int32_t>& b_zp, bool transposed,
                                       ThreadPool& pool) {
  PackedIntegerWeight packed;
  Tensor kn = maybe_transposed(b, transposed);
  dispatch_q8(kn.dtype(), [&]<class TB>() {
    packed.matmul_b = pack_integer_b(kn.dim(0), kn.dim(1), kn.data<TB>(), kn.dim(1), b_zp, pool);
  });
  return packed;
}

void integer_matmul_packed(const Tensor& a, int32_t a_zp, const PackedIntegerWeight& b, int32_t* acc,
                           ThreadPool& pool, const IntegerGemmDone* done) {
  // B is the same for every product: A's rows, all batches together, through the packed B.
  int64_t k = b.matmul_b.k;
  dispatch_q8(a.dtype(), [&]<class TA>() {
    integer_gemm(pack_integer_a(a.numel() / std::max<int64_t>(k, 1), k, a.data<TA>(), k, {a_zp}, pool),
                 b.matmul_b, acc, b.matmul_b.n, pool, done);
  });
}

void integer_matmul(const Tensor& a, const std::vector<int32_t>& a_zp, const Tensor& b,
                    const std::vector<int32_t>& b_zp, int32_t* acc, ThreadPool& pool,
                    const PackedIntegerWeight* packed, const IntegerGemmDone* done) {
  MatMulDims d = matmul_dims(a.shape(), b.shape());
  int64_t rows = a.rank() > 1 ? a.dim(-2) : 1, m = d.m, n = d.n, k = d.k;
  if (packed && a_zp.size() == 1 && b.rank() == 2 && a.rank() >= 2)
    return integer_matmul_packed(a, a_zp[0], *packed, acc, pool, done);
  // The other paths compute all of acc, then call `done` once.
  auto compute = [&] {
    if (integer_gemm_available() && (a_zp.size() == 1 || int64_t(a_zp.size()) == m)) {
      std::vector<int64_t> a_off, b_off;
      batch_offsets(d, a_off, b_off);
      dispatch_q8(a.dtype(), [&]<class TA>() {
        dispatch_q8(b.dtype(), [&]<class TB>() {
          for (int64_t p = 0; p < d.count; p++)
            integer_gemm(m, n, k, a.data<TA>() + a_off[size_t(p)], k, a_zp, b.data<TB>() + b_off[size_t(p)],
                         n, b_zp, acc + p * m * n, n, pool);
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
  };
  compute();
  if (done) (*done)(0, d.count * m, 0, n);
}

namespace {

// Columns [o0, o0 + out.n) of the im2col matrix of one image and group, packed for integer_gemm:
// row c * ks + kk holds x[c, position of output o and kernel offset kk] - x_zp, 0 (as packed)
// where that falls in the padding. Walked one output row at a time.
template <class T>
void im2col_centred(const ConvGeometry& g, const T* x, int32_t x_zp, int64_t cg, int64_t o0,
                    IntegerGemmB& out, ThreadPool& pool) {
  int64_t ks = g.k_size(), is = g.in_size(), o1 = o0 + out.n, row_len = g.out[2];
  int64_t panel_stride = (out.k + 1) / 2 * 32;  // int16s from a column's slot to the same slot 16 columns on
  auto channels = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c++) {
      const T* xc = x + c * is;
      for (int64_t kk = 0; kk < ks; kk++) {
        int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
        int16_t* dst = out.panels.data() + out.panel_index(c * ks + kk, 0);
        for (int64_t o = o0; o < o1;) {
          int64_t line = o / row_len, ow0 = o % row_len, end = std::min(o1, (line + 1) * row_len);
          int64_t id = line / g.out[1] * g.stride[0] + kd * g.dil[0] - g.pad[0];
          int64_t ih = line % g.out[1] * g.stride[1] + kh * g.dil[1] - g.pad[1];
          if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1]) {
            const T* src = xc + (id * g.in[1] + ih) * g.in[2];
            for (int64_t j = o - o0, ow = ow0; j < end - o0; j++, ow++) {
              int64_t iw = ow * g.stride[2] + kw * g.dil[2] - g.pad[2];
              if (iw >= 0 && iw < g.in[2])
                dst[(j >> 4) * panel_stride + (j & 15) * 2] = int16_t(int32_t(src[iw]) - x_zp);
            }
          }
          o = end;
        }
      }
    }
  };
  pool.parallel_for(cg, channels,
                    std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, ks * out.n)));
}

// Each group's weights (mg rows of depth values), less their zero points, packed as A.
template <class TW>
std::vector<IntegerGemmA> pack_conv_groups(const TW* w, int64_t group, int64_t mg, int64_t depth,
                                           const std::vector<int32_t>& w_zp, ThreadPool& pool) {
  std::vector<IntegerGemmA> groups;
  for (int64_t gi = 0; gi < group; gi++) {
    std::vector<int32_t> zp =
        w_zp.size() == 1 ? w_zp : std::vector<int32_t>(w_zp.begin() + gi * mg, w_zp.begin() + (gi + 1) * mg);
    groups.push_back(pack_integer_a(mg, depth, w + gi * mg * depth, depth, zp, pool));
  }
  return groups;
}

// The convolution as products of the weights (m x c*ks per group, packed once) and im2col blocks
// of the input.
template <class TX, class TW>
void integer_conv_gemm(const ConvGeometry& g, const TX* x, int32_t x_zp, const TW* w,
                       const std::vector<int32_t>& w_zp, int32_t* acc, ThreadPool& pool,
                       const PackedIntegerWeight* packed) {
  int64_t cg = g.c / g.group, mg = g.m / g.group, ks = g.k_size(), is = g.in_size(), os = g.out_size();
  int64_t depth = cg * ks;
  std::vector<IntegerGemmA> own;
  if (!packed) own = pack_conv_groups(w, g.group, mg, depth, w_zp, pool);
  const std::vector<IntegerGemmA>& groups = packed ? packed->conv_groups : own;
  bool pointwise = ks == 1 && g.in[0] == g.out[0] && g.in[1] == g.out[1] && g.in[2] == g.out[2] &&
                   g.pad[0] == 0 && g.pad[1] == 0 && g.pad[2] == 0;
  // Columns per im2col block (all of them, or whole panels): its packed copy stays near 256 KiB, in
  // the core's own cache while im2col writes it (a row of the block touches every panel) and the
  // product reads it.
  int64_t fit = (int64_t(128) << 10) / std::max<int64_t>(1, depth);
  int64_t block = os <= fit ? os : std::max<int64_t>(16, fit / 16 * 16);
  for (int64_t gi = 0; gi < g.group; gi++) {
    const IntegerGemmA& weights = groups[size_t(gi)];
    for (int64_t ni = 0; ni < g.batch; ni++) {
      const TX* xg = x + (ni * g.c + gi * cg) * is;
      int32_t* y = acc + (ni * g.m + gi * mg) * os;
      if (pointwise) {
        integer_gemm(weights, pack_integer_b(depth, os, xg, is, {x_zp}, pool), y, os, pool);
        continue;
      }
      for (int64_t o0 = 0; o0 < os; o0 += block) {
        IntegerGemmB cols(depth, std::min(os, o0 + block) - o0);
        im2col_centred(g, xg, x_zp, cg, o0, cols, pool);
        integer_gemm(weights, cols, y + o0, os, pool);
      }
    }
  }
}

}  // namespace

PackedIntegerWeight pack_conv_weight(const Tensor& w, int64_t group, const std::vector<int32_t>& w_zp,
                                     ThreadPool& pool) {
  PackedIntegerWeight packed;
  int64_t mg = w.dim(0) / group, depth = w.numel() / std::max<int64_t>(1, w.dim(0));
  dispatch_q8(w.dtype(), [&]<class TW>() {
    packed.conv_groups = pack_conv_groups(w.data<TW>(), group, mg, depth, w_zp, pool);
  });
  return packed;
}

void integer_conv(const ConvGeometry& g, const Tensor& x, int32_t x_zp, const Tensor& w,
                  const std::vector<int32_t>& w_zp, int32_t* acc, ThreadPool& pool,
                  const PackedIntegerWeight* packed) {
  if (packed || integer_gemm_available()) {
    dispatch_q8(x.dtype(), [&]<class TX>() {
      dispatch_q8(w.dtype(), [&]<class TW>() {
        integer_conv_gemm(g, x.data<TX>(), x_zp, w.data<TW>(), w_zp, acc, pool, packed);
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

namespace {

// The smallest and largest of n values, widened to include 0; NaN is passed over.
struct Range {
  float lo = 0, hi = 0;
};
Range range_with_zero(const float* x, int64_t n) {
  Range r;
  if (const RowKernelsF32* row = row_kernels_f32(); row && n > 0) {
    // The row's extremes, then 0 as the loop below starts from. They are NaN when the row holds
    // one (checked before 0 joins them: std::min(0, NaN) is 0); then the loop, which passes over it.
    const float lo = row->min_of(x, n), hi = row->max_of(x, n);
    if (!std::isnan(lo) && !std::isnan(hi)) return {std::min(0.0f, lo), std::max(0.0f, hi)};
  }
  for (int64_t i = 0; i < n; i++) {
    r.lo = std::min(r.lo, x[i]);
    r.hi = std::max(r.hi, x[i]);
  }
  return r;
}

DynamicQuant params_of(Range r) {
  DynamicQuant q;
  q.scale = r.hi == r.lo ? 1.0f : (r.hi - r.lo) / 255.0f;
  q.zero_point = int32_t(std::nearbyint(std::clamp(0.0f - r.lo / q.scale, 0.0f, 255.0f)));
  return q;
}

// Values one thread takes at a time in the pool's versions below.
constexpr int64_t kQuantizeChunk = int64_t(1) << 16;

}  // namespace

DynamicQuant dynamic_quant_params(const float* x, int64_t n) { return params_of(range_with_zero(x, n)); }

DynamicQuant dynamic_quantize(const float* x, int64_t n, uint8_t* y, ThreadPool& pool) {
  std::vector<Range> parts(size_t(ceil_div(n, kQuantizeChunk)));
  pool.parallel_for(int64_t(parts.size()), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; c++)
      parts[size_t(c)] =
          range_with_zero(x + c * kQuantizeChunk, std::min(kQuantizeChunk, n - c * kQuantizeChunk));
  });
  Range all;  // each part holds 0, so the extremes of the parts are those of the whole
  for (const Range& r : parts) {
    all.lo = std::min(all.lo, r.lo);
    all.hi = std::max(all.hi, r.hi);
  }
  const DynamicQuant q = params_of(all);
  pool.parallel_for(int64_t(parts.size()), [&](int64_t b, int64_t e) {
    int64_t begin = b * kQuantizeChunk, end = std::min(n, e * kQuantizeChunk);
    quantize_floats(x + begin, end - begin, q.scale, q.zero_point, y + begin);
  });
  return q;
}

template <class T>
void quantize_floats(const float* x, int64_t n, float scale, int32_t zp, T* y) {
  const RowKernelsF32* row = row_kernels_f32();
  if constexpr (sizeof(T) == 1) {
    if (row) return row->quantize_8bit(x, scale, zp, std::is_signed_v<T>, y, n);
  }
  for (int64_t i = 0; i < n; i++) y[i] = quantize_value<T>(x[i] / scale, zp);
}

template <class T>
void dequantize_values(const T* x, int64_t n, int32_t zp, float scale, float* y) {
  const RowKernelsF32* row = row_kernels_f32();
  if constexpr (sizeof(T) == 1) {
    if (row) return row->dequantize_8bit(x, std::is_signed_v<T>, zp, scale, y, n);
  }
  for (int64_t i = 0; i < n; i++) y[i] = float(int32_t(x[i]) - zp) * scale;
}

template void quantize_floats<uint8_t>(const float*, int64_t, float, int32_t, uint8_t*);
template void quantize_floats<int8_t>(const float*, int64_t, float, int32_t, int8_t*);
template void quantize_floats<uint16_t>(const float*, int64_t, float, int32_t, uint16_t*);
template void quantize_floats<int16_t>(const float*, int64_t, float, int32_t, int16_t*);
template void dequantize_values<uint8_t>(const uint8_t*, int64_t, int32_t, float, float*);
template void dequantize_values<int8_t>(const int8_t*, int64_t, int32_t, float, float*);
template void dequantize_values<uint16_t>(const uint16_t*, int64_t, int32_t, float, float*);
template void dequantize_values<int16_t>(const int16_t*, int64_t, int32_t, float, float*);

namespace {

// One row of dequantize_columns: o = float(a) * (s ? s[j] : s0), then o += b where b is given. Its
// own pointers, none aliasing another, so that the per-column loop is vectorized too.
void dequantize_row(const int32_t* __restrict a, const float* __restrict s, float s0,
                    const float* __restrict b, float* __restrict o, int64_t n) {
  if (s) {
    for (int64_t j = 0; j < n; j++) o[j] = float(a[j]) * s[j];
  } else {
    for (int64_t j = 0; j < n; j++) o[j] = float(a[j]) * s0;
  }
  // A loop of its own: the compiler may not contract the product and the sum into one FMA.
  if (b)
    for (int64_t j = 0; j < n; j++) o[j] += b[j];
}

}  // namespace

void dequantize_columns_into(const int32_t* acc, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             const std::vector<float>& scale, const std::vector<float>& bias, float* out,
                             int64_t out_ld) {
  const bool one_scale = scale.size() == 1;
  for (int64_t r = r0; r < r1; r++)
    dequantize_row(acc + r * ld + c0, one_scale ? nullptr : scale.data() + c0, scale[0],
                   bias.empty() ? nullptr : bias.data() + c0, out + r * out_ld, c1 - c0);
}

void dequantize_columns(const int32_t* acc, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        const std::vector<float>& scale, const std::vector<float>& bias, float* out) {
  dequantize_columns_into(acc, ld, r0, r1, c0, c1, scale, bias, out + c0, ld);
}

void requantize(const int32_t* acc, int64_t n, const std::vector<float>& multiplier, int64_t inner,
                int32_t zp, Tensor& y, ThreadPool* pool) {
  int64_t channels = int64_t(multiplier.size());
  const RowKernelsF32* row = row_kernels_f32();
  dispatch_quantized(y.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    if (channels > 1 && inner == 1) {  // one multiplier per column: rows of `channels` values
      auto rows = [&](int64_t r0, int64_t r1) {
        for (int64_t i = r0 * channels; i < std::min(n, r1 * channels); i += channels) {
          const int64_t count = std::min(channels, n - i);
          if (sizeof(T) == 1 && row) {
            row->requantize_columns_8bit(acc + i, multiplier.data(), zp, std::is_signed_v<T>, out + i, count);
            continue;
          }
          for (int64_t j = 0; j < count; j++)
            out[i + j] = quantize_value<T>(float(acc[i + j]) * multiplier[size_t(j)], zp);
        }
      };
      if (pool)
        pool->parallel_for(ceil_div(n, channels), rows, grain_for(channels));
      else
        rows(0, ceil_div(n, channels));
      return;
    }
    // Runs of `inner` values that share a multiplier (of at most 64 Ki values with one multiplier), on the
    // pool when there is one.
    const int64_t run = channels == 1 ? std::min<int64_t>(std::max<int64_t>(n, 1), 65536) : inner;
    auto runs = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; r++) {
        const int64_t start = r * run, count = std::min(run, n - start);
        const float m = multiplier[size_t(channels == 1 ? 0 : r % channels)];
        if (sizeof(T) == 1 && row) {
          row->requantize_8bit(acc + start, m, zp, std::is_signed_v<T>, out + start, count);
          continue;
        }
        for (int64_t i = start; i < start + count; i++) out[i] = quantize_value<T>(float(acc[i]) * m, zp);
      }
    };
    if (pool)
      pool->parallel_for(ceil_div(n, run), runs, grain_for(run));
    else
      runs(0, ceil_div(n, run));
  });
}

namespace {

QuantLayout layout_of(const KernelContext& ctx) {
  return quant_layout(ctx.input(0).shape(), ctx.input(1).shape(), ctx.node.attr_int("axis", 1),
                      ctx.node.attr_int("block_size", 0));
}

// Calls f(start, count, parameter index) for the runs of consecutive elements that share a scale
// and zero point: one run per tensor, one per `inner` elements per axis; none when blocked.
template <class F>
bool for_each_parameter_run(const QuantLayout& l, int64_t n, F f) {
  if (l.block != 0) return false;
  int64_t run = l.per_tensor ? std::max<int64_t>(n, 1) : l.inner;
  for (int64_t start = 0; start < n; start += run) f(start, std::min(run, n - start), l.param_index(start));
  return true;
}

void quantize_linear_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  QuantLayout l = layout_of(ctx);
  std::vector<float> scale = float_values(ctx, 1);
  std::vector<int32_t> zp = zero_point_values(ctx, 2);
  Tensor& y = ctx.output(0);
  if (x.dtype() == DType::f32) {
    bool done = dispatch_quantized(y.dtype(), [&]<class T>() {
      return for_each_parameter_run(l, x.numel(), [&](int64_t start, int64_t count, int64_t j) {
        quantize_floats(x.data<float>() + start, count, scale[size_t(j)], zp[zp.size() == 1 ? 0 : size_t(j)],
                        y.data<T>() + start);
      });
    });
    if (done) return;
  }
  std::vector<double> xv = x.to_double_vector();
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
  Tensor& y = ctx.output(0);
  if (y.dtype() == DType::f32 && is_quantized_type(x.dtype())) {
    bool done = dispatch_quantized(x.dtype(), [&]<class T>() {
      return for_each_parameter_run(l, x.numel(), [&](int64_t start, int64_t count, int64_t j) {
        dequantize_values(x.data<T>() + start, count, zp[zp.size() == 1 ? 0 : size_t(j)], scale[size_t(j)],
                          y.data<float>() + start);
      });
    });
    if (done) return;
  }
  std::vector<double> xv = x.to_double_vector();
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
  DynamicQuant q = dynamic_quantize(x.data<float>(), x.numel(), ctx.output(0).data<uint8_t>(), ctx.pool);
  if (ctx.has_output(1)) ctx.output(1).data<float>()[0] = q.scale;
  if (ctx.has_output(2)) ctx.output(2).data<uint8_t>()[0] = uint8_t(q.zero_point);
}

void conv_integer_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  ConvGeometry g = conv_geometry(ctx.node, ctx.input(0).shape(), ctx.input(1).shape(), y.shape(), false);
  integer_conv(g, ctx.input(0), zero_point_values(ctx, 2)[0], ctx.input(1), zero_point_values(ctx, 3),
               y.data<int32_t>(), ctx.pool, ctx.packed_weight);
}

void qlinear_conv_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  ConvGeometry g = conv_geometry(ctx.node, ctx.input(0).shape(), ctx.input(3).shape(), y.shape(), false);
  std::vector<int32_t> acc(size_t(y.numel()));
  integer_conv(g, ctx.input(0), zero_point_values(ctx, 2)[0], ctx.input(3), zero_point_values(ctx, 5),
               acc.data(), ctx.pool, ctx.packed_weight);
  if (ctx.has_input(8)) {
    const int32_t* bias = ctx.input(8).data<int32_t>();
    int64_t os = g.out_size();
    for (int64_t plane = 0; plane < g.batch * g.m; plane++) {
      int32_t* p = acc.data() + plane * os;
      for (int64_t o = 0; o < os; o++) p[o] += bias[plane % g.m];
    }
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
  integer_matmul(a, zero_point_values(ctx, 2), b, zero_point_values(ctx, 5), acc.data(), ctx.pool,
                 ctx.packed_weight);
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

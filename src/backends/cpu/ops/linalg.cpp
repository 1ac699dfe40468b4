// CPU kernels for MatMul, Gemm, Conv, ConvTranspose, Einsum, MatMulInteger and Det.
// Float GEMMs go to OpenBLAS; convolutions are im2col + GEMM, with a direct kernel for
// depthwise and no im2col at all for 1x1 stride-1 unpadded ones.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <type_traits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/blas.h"
#include "backends/cpu/ops/quantization.h"
#include "core/dispatch.h"
#include "ops/linalg_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// BLAS always runs single-threaded, inside vlrt's own pool: OpenBLAS's threads spin for a
// while after each call, and spinning beside the pool's threads on the same cores stalled
// every parallel op that followed a GEMM (3-4x slower model runs in a server).
void single_threaded_blas() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// c = alpha * op(a) * op(b) + beta * c, row-major; op transposes when ta / tb.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  auto tra = ta ? CblasTrans : CblasNoTrans, trb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    if (m == 1 && !ta) {  // one row: OpenBLAS's matrix-vector product is faster than its GEMM (2.7x on an LSTM step)
      if (tb)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, b, ldb, a, 1, beta, c, 1);
      else
        cblas_sgemv(CblasRowMajor, CblasTrans, k, n, alpha, b, ldb, a, 1, beta, c, 1);
      return;
    }
    cblas_sgemm(CblasRowMajor, tra, trb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, tra, trb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    for (int64_t i = 0; i < m; i++) {
      T* crow = c + i * ldc;
      for (int64_t j = 0; j < n; j++) crow[j] = beta == T(0) ? T(0) : T(beta * crow[j]);
      for (int64_t p = 0; p < k; p++) {
        T av = T(alpha * (ta ? a[p * lda + i] : a[i * lda + p]));
        for (int64_t j = 0; j < n; j++) crow[j] += T(av * (tb ? b[j * ldb + p] : b[p * ldb + j]));
      }
    }
  }
}

// gemm on the pool: each thread computes a block of C's columns (of its rows when C is tall
// and narrow). nullptr, one thread or a small product: gemm on the calling thread.
template <class T>
void parallel_gemm(ThreadPool* pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  int threads = pool ? pool->size() : 1;
  if (threads <= 1 || 2.0 * double(m) * double(n) * double(k) < 1e6)
    return gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  bool by_columns = n >= m;
  int64_t extent = by_columns ? n : m;
  // Blocks of whole 16-element vectors, a few per thread so that uneven ones balance.
  int64_t block = std::max<int64_t>(16, (extent / (2 * threads) + 15) / 16 * 16);
  int64_t blocks = (extent + block - 1) / block;
  pool->parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; blk++) {
      int64_t at = blk * block, len = std::min(block, extent - at);
      if (by_columns) {
        gemm<T>(ta, tb, m, len, k, alpha, a, lda, tb ? b + at * ldb : b + at, ldb, beta, c + at, ldc);
      } else {
        gemm<T>(ta, tb, len, n, k, alpha, ta ? a + at : a + at * lda, lda, b, ldb, beta, c + at * ldc, ldc);
      }
    }
  });
}

// Runs `count` independent GEMM-sized jobs through fn(begin, end, pool). Small jobs, and
// large ones that split evenly over the pool, are spread over it (pool = nullptr: fn must
// not use it); otherwise they run in turn on the calling thread and fn gets the pool for
// parallel_gemm and its own parallel steps (e.g. im2col).
template <class T>
void run_jobs(ThreadPool& pool, int64_t count, double flops_per_job,
              const std::function<void(int64_t, int64_t, ThreadPool*)>& fn) {
  int threads = pool.size();
  bool even = count % threads == 0 || count >= 4 * threads;
  bool spread = count > 1 && (!std::is_floating_point_v<T> || flops_per_job < 1e7 || even);
  single_threaded_blas();
  if (spread) {
    pool.parallel_for(count, [&](int64_t b, int64_t e) { fn(b, e, nullptr); });
  } else {
    fn(0, count, &pool);
  }
}

// d[i] += w * s[i] for i < n; GCC vector extensions because -O2 does not vectorize this loop.
template <class T>
void axpy(T* __restrict d, const T* __restrict s, T w, int64_t n) {
  int64_t i = 0;
  if constexpr (std::is_floating_point_v<T>) {
    typedef T V __attribute__((vector_size(16)));
    constexpr int64_t lanes = 16 / sizeof(T);
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
      V d0, d1, s0, s1;
      std::memcpy(&d0, d + i, 16);
      std::memcpy(&d1, d + i + lanes, 16);
      std::memcpy(&s0, s + i, 16);
      std::memcpy(&s1, s + i + lanes, 16);
      d0 += w * s0;
      d1 += w * s1;
      std::memcpy(d + i, &d0, 16);
      std::memcpy(d + i + lanes, &d1, 16);
    }
  }
  for (; i < n; i++) d[i] += w * s[i];
}

template <class T>
std::unique_ptr<T[]> scratch(int64_t n) {
  return std::make_unique_for_overwrite<T[]>(size_t(n));
}

// Copies src, seen through per-axis element strides (0 repeats an element), into a
// contiguous dst of shape `sizes`.
template <class T>
void strided_copy(const T* src, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                  T* dst) {
  int64_t total = shape_numel(sizes);
  if (total == 0) return;
  if (sizes.empty()) {
    dst[0] = src[0];
    return;
  }
  size_t r = sizes.size();
  int64_t inner = sizes[r - 1], inner_stride = strides[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t done = 0; done < total; done += inner) {
    for (int64_t i = 0; i < inner; i++) dst[i] = src[off + i * inner_stride];
    dst += inner;
    for (size_t ax = r - 1; ax-- > 0;) {
      off += strides[ax];
      if (++idx[ax] < sizes[ax]) break;
      off -= strides[ax] * sizes[ax];
      idx[ax] = 0;
    }
  }
}

// ---------------------------------------------------------------------------------------
// MatMul

// y[batch..., m, n] = a[batch..., m, k] x b[batch..., k, n] (matmul_dims's pairing).
template <class T>
void matmul(ThreadPool& pool, const T* a, const Shape& as, const T* b, const Shape& bs, T* y) {
  MatMulDims d = matmul_dims(as, bs);
  if (d.count == 0 || d.m == 0 || d.n == 0) return;
  if (d.batch.empty()) {
    single_threaded_blas();
    parallel_gemm<T>(&pool, false, false, d.m, d.n, d.k, T(1), a, d.k, b, d.n, T(0), y, d.n);
    return;
  }
  std::vector<int64_t> a_off(d.count), b_off(d.count);
  for (int64_t i = 0; i < d.count; i++) {
    int64_t rest = i;
    a_off[i] = b_off[i] = 0;
    for (size_t ax = d.batch.size(); ax-- > 0;) {
      int64_t idx = rest % d.batch[ax];
      rest /= d.batch[ax];
      a_off[i] += idx * d.a_strides[ax];
      b_off[i] += idx * d.b_strides[ax];
    }
  }
  int64_t m = d.m, n = d.n, k = d.k;
  run_jobs<T>(pool, d.count, 2.0 * m * n * k, [&](int64_t begin, int64_t end, ThreadPool* inner) {
    for (int64_t i = begin; i < end; i++)
      parallel_gemm<T>(inner, false, false, m, n, k, T(1), a + a_off[i], k, b + b_off[i], n, T(0),
                       y + i * m * n, n);
  });
}

void matmul_kernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  dispatch_numeric(a.dtype(), [&]<class T>() {
    matmul<T>(ctx.pool, a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.data<T>());
  });
}

void gemm_kernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  double alpha = ctx.node.attr_float("alpha", 1.0f), beta = ctx.node.attr_float("beta", 1.0f);
  int64_t m = y.dim(0), n = y.dim(1), k = ta ? a.dim(0) : a.dim(1);
  bool has_c = ctx.has_input(2) && beta != 0;
  dispatch_numeric(a.dtype(), [&]<class T>() {
    T* out = y.data<T>();
    // out (= or +=) beta * C broadcast to [m, n].
    auto apply_c = [&](bool accumulate) {
      const Tensor& c = ctx.input(2);
      std::vector<int64_t> st = broadcast_strides(c.shape(), {m, n});
      const T* cd = c.data<T>();
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          T v = T(beta * double(cd[i * st[0] + j * st[1]]));
          out[i * n + j] = accumulate ? T(out[i * n + j] + v) : v;
        }
    };
    if constexpr (std::is_floating_point_v<T>) {
      if (has_c) apply_c(false);
      single_threaded_blas();
      parallel_gemm<T>(&ctx.pool, ta, tb, m, n, k, T(alpha), a.data<T>(), a.dim(1), b.data<T>(), b.dim(1),
                       T(has_c ? 1 : 0), out, n);
    } else {
      gemm<T>(ta, tb, m, n, k, T(1), a.data<T>(), a.dim(1), b.data<T>(), b.dim(1), T(0), out, n);
      if (alpha != 1)
        for (int64_t i = 0; i < m * n; i++) out[i] = T(alpha * double(out[i]));
      if (has_c) apply_c(true);
    }
  });
}

// MatMulInteger through float64 GEMM: products of 8-bit values and their sums stay far
// below 2^53, so the result is exact.
void matmul_integer_kernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  // Zero points of one value, or one per row of A or column of B: the exact integer product.
  auto plain = [&](size_t zp) { return !ctx.has_input(zp) || ctx.input(zp).rank() <= 1; };
  if ((ctx.packed_weight || integer_gemm_available()) && plain(2) && plain(3)) {
    integer_matmul(a, zero_point_values(ctx, 2), b, zero_point_values(ctx, 3), y.data<int32_t>(), ctx.pool,
                   ctx.packed_weight);
    return;
  }
  const Shape &as = a.shape(), &bs = b.shape();
  int64_t k = as.back();
  int64_t n = bs.size() > 1 ? bs.back() : 1, m = as.size() > 1 ? as[as.size() - 2] : 1;
  // Input minus zero point, where the zero point is one value, one per row of A or one per column of B.
  auto shifted = [&](const Tensor& x, size_t zp_input, bool rows) {
    std::unique_ptr<double[]> out = scratch<double>(x.numel());
    dispatch_int(x.dtype(), [&]<class T>() {
      const T* xd = x.data<T>();
      if (!ctx.has_input(zp_input)) {
        for (int64_t i = 0; i < x.numel(); i++) out[i] = double(xd[i]);
        return;
      }
      const Tensor& zt = ctx.input(zp_input);
      const T* zp = zt.data<T>();
      // The schema allows [len] or the input's shape with the reduced axis set to 1.
      bool per_tensor = zt.numel() == 1, per_batch = zt.rank() > 1;
      for (int64_t i = 0; i < x.numel(); i++) {
        int64_t z = per_tensor ? 0
                    : rows     ? (per_batch ? i / k : i / k % m)
                               : (per_batch ? i / (k * n) * n + i % n : i % n);
        out[i] = double(xd[i]) - double(zp[z]);
      }
    });
    return out;
  };
  std::unique_ptr<double[]> ad = shifted(a, 2, true), bd = shifted(b, 3, false);
  std::unique_ptr<double[]> yd = scratch<double>(y.numel());
  matmul<double>(ctx.pool, ad.get(), as, bd.get(), bs, yd.get());
  int32_t* out = y.data<int32_t>();
  // Accumulation wraps around in 32 bits, as the spec allows.
  for (int64_t i = 0; i < y.numel(); i++) out[i] = int32_t(uint32_t(int64_t(yd[i])));
}

// ---------------------------------------------------------------------------------------
// Conv and ConvTranspose

ConvGeometry conv_geom(KernelContext& ctx, bool transpose) {
  return conv_geometry(ctx.node, ctx.input(0).shape(), ctx.input(1).shape(), ctx.output(0).shape(),
                       transpose);
}

// Positions p in [0, count) with 0 <= p * s + off < limit, as [lo, hi).
void valid_range(int64_t off, int64_t s, int64_t limit, int64_t count, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = limit - off <= 0 ? 0 : (limit - off + s - 1) / s;
  lo = std::min(lo, count);
  hi = std::clamp(hi, lo, count);
}

// col[(c, kd, kh, kw), (od, oh, ow)] = x[c, od*s + kd*d - pad, ...], zero outside x.
template <class T>
void im2col(const ConvGeometry& g, const T* x, int64_t channels, T* col, ThreadPool* pool) {
  int64_t ks = g.k_size(), os = g.out_size();
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      int64_t ch = r / ks, kk = r % ks;
      int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
      const T* xc = x + ch * g.in_size();
      T* dst = col + r * os;
      int64_t off_w = kw * g.dil[2] - g.pad[2], lo, hi;
      valid_range(off_w, g.stride[2], g.in[2], g.out[2], lo, hi);
      for (int64_t od = 0; od < g.out[0]; od++) {
        int64_t id = od * g.stride[0] + kd * g.dil[0] - g.pad[0];
        for (int64_t oh = 0; oh < g.out[1]; oh++, dst += g.out[2]) {
          int64_t ih = oh * g.stride[1] + kh * g.dil[1] - g.pad[1];
          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
            std::fill(dst, dst + g.out[2], T(0));
            continue;
          }
          const T* src = xc + (id * g.in[1] + ih) * g.in[2];
          std::fill(dst, dst + lo, T(0));
          if (g.stride[2] == 1) {
            std::memcpy(dst + lo, src + lo + off_w, size_t(hi - lo) * sizeof(T));
          } else {
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g.stride[2] + off_w];
          }
          std::fill(dst + hi, dst + g.out[2], T(0));
        }
      }
    }
  };
  int64_t n = channels * ks;
  if (pool)
    pool->parallel_for(n, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(os, 1)));
  else
    rows(0, n);
}

// One plane of a depthwise convolution: yp = bias + x plane (*) kernel wk. lo/hi[kw]: the
// output columns whose tap kw lands inside the input row.
template <class T>
void depthwise_plane(const ConvGeometry& g, const T* xp, const T* wk, T bias, const std::vector<int64_t>& lo,
                     const std::vector<int64_t>& hi, T* yp) {
  std::fill(yp, yp + g.out_size(), bias);
  for (int64_t od = 0; od < g.out[0]; od++) {
    for (int64_t oh = 0; oh < g.out[1]; oh++) {
      T* drow = yp + (od * g.out[1] + oh) * g.out[2];
      for (int64_t kd = 0; kd < g.k[0]; kd++) {
        int64_t id = od * g.stride[0] + kd * g.dil[0] - g.pad[0];
        for (int64_t kh = 0; kh < g.k[1]; kh++) {
          int64_t ih = oh * g.stride[1] + kh * g.dil[1] - g.pad[1];
          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) continue;
          const T* srow = xp + (id * g.in[1] + ih) * g.in[2];
          const T* wrow = wk + (kd * g.k[1] + kh) * g.k[2];
          for (int64_t kw = 0; kw < g.k[2]; kw++) {
            int64_t off = kw * g.dil[2] - g.pad[2];
            if (g.stride[2] == 1) {
              axpy(drow + lo[kw], srow + lo[kw] + off, wrow[kw], hi[kw] - lo[kw]);
            } else {
              for (int64_t ow = lo[kw]; ow < hi[kw]; ow++)
                drow[ow] += wrow[kw] * srow[ow * g.stride[2] + off];
            }
          }
        }
      }
    }
  }
}

// One input channel per group (depthwise, possibly with a channel multiplier): a direct
// kernel, since the GEMM would be a matrix-vector product over an im2col copy.
template <class T>
void conv_depthwise(ThreadPool& pool, const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  int64_t ks = g.k_size(), os = g.out_size(), per_group = g.m / g.group;
  std::vector<int64_t> lo(g.k[2]), hi(g.k[2]);
  for (int64_t kw = 0; kw < g.k[2]; kw++)
    valid_range(kw * g.dil[2] - g.pad[2], g.stride[2], g.in[2], g.out[2], lo[kw], hi[kw]);
  auto planes = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; p++) {
      int64_t oc = p % g.m;
      const T* xp = x + (p / g.m * g.c + oc / per_group) * g.in_size();
      depthwise_plane(g, xp, w + oc * ks, bias ? bias[oc] : T(0), lo, hi, y + p * os);
    }
  };
  pool.parallel_for(g.batch * g.m, planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(os * ks, 1)));
}

template <class T>
void conv(KernelContext& ctx) {
  ConvGeometry g = conv_geom(ctx, false);
  const T* x = ctx.input(0).data<T>();
  const T* w = ctx.input(1).data<T>();
  const T* bias = ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr;
  T* y = ctx.output(0).data<T>();
  int64_t cg = g.c / g.group, mg = g.m / g.group, ks = g.k_size(), is = g.in_size(), os = g.out_size();
  if (g.batch == 0 || g.m == 0 || os == 0) return;
  if (cg == 1) return conv_depthwise(ctx.pool, g, x, w, bias, y);
  bool pointwise = ks == 1;
  for (int i = 0; i < 3; i++)
    pointwise = pointwise && g.stride[i] == 1 && g.pad[i] == 0 && g.in[i] == g.out[i];
  int64_t col_size = pointwise ? 0 : cg * ks * os;
  double flops = 2.0 * mg * cg * ks * os;
  run_jobs<T>(ctx.pool, g.batch * g.group, flops, [&](int64_t j0, int64_t j1, ThreadPool* inner) {
    std::unique_ptr<T[]> col = scratch<T>(col_size);
    for (int64_t j = j0; j < j1; j++) {
      int64_t ni = j / g.group, gi = j % g.group;
      const T* xg = x + (ni * g.c + gi * cg) * is;
      T* yg = y + (ni * g.m + gi * mg) * os;
      if (!pointwise) im2col(g, xg, cg, col.get(), inner);
      if (bias)
        for (int64_t r = 0; r < mg; r++) std::fill(yg + r * os, yg + (r + 1) * os, bias[gi * mg + r]);
      parallel_gemm<T>(inner, false, false, mg, os, cg * ks, T(1), w + gi * mg * cg * ks, cg * ks,
                       pointwise ? xg : col.get(), os, T(bias ? 1 : 0), yg, os);
    }
  });
}

// y[(m, od*s + kd*d - pad, ...)] += col[(m, kd, kh, kw), (id, ih, iw)] for one group's
// output channels [m0, m1); the scatter-add counterpart of im2col.
template <class T>
void col2im(const ConvGeometry& g, const T* col, int64_t m0, int64_t m1, T* y) {
  int64_t ks = g.k_size(), is = g.in_size(), os = g.out_size();
  for (int64_t mc = m0; mc < m1; mc++) {
    for (int64_t kk = 0; kk < ks; kk++) {
      int64_t kd = kk / (g.k[1] * g.k[2]), kh = kk / g.k[2] % g.k[1], kw = kk % g.k[2];
      const T* src = col + (mc * ks + kk) * is;
      T* yc = y + mc * os;
      int64_t off_w = kw * g.dil[2] - g.pad[2], lo, hi;
      valid_range(off_w, g.stride[2], g.out[2], g.in[2], lo, hi);
      for (int64_t id = 0; id < g.in[0]; id++) {
        int64_t od = id * g.stride[0] + kd * g.dil[0] - g.pad[0];
        for (int64_t ih = 0; ih < g.in[1]; ih++) {
          int64_t oh = ih * g.stride[1] + kh * g.dil[1] - g.pad[1];
          if (od < 0 || od >= g.out[0] || oh < 0 || oh >= g.out[1]) continue;
          const T* srow = src + (id * g.in[1] + ih) * g.in[2];
          T* drow = yc + (od * g.out[1] + oh) * g.out[2];
          if (g.stride[2] == 1) {
            axpy(drow + lo + off_w, srow + lo, T(1), hi - lo);
          } else {
            for (int64_t iw = lo; iw < hi; iw++) drow[iw * g.stride[2] + off_w] += srow[iw];
          }
        }
      }
    }
  }
}

template <class T>
void conv_transpose(KernelContext& ctx) {
  ConvGeometry g = conv_geom(ctx, true);
  const T* x = ctx.input(0).data<T>();
  const T* w = ctx.input(1).data<T>();
  const T* bias = ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr;
  T* y = ctx.output(0).data<T>();
  int64_t cg = g.c / g.group, mg = g.m / g.group, ks = g.k_size(), is = g.in_size(), os = g.out_size();
  for (int64_t p = 0; p < g.batch * g.m; p++)
    std::fill(y + p * os, y + (p + 1) * os, bias ? bias[p % g.m] : T(0));
  if (g.batch == 0 || g.m == 0 || os == 0) return;
  double flops = 2.0 * mg * cg * ks * is;
  run_jobs<T>(ctx.pool, g.batch * g.group, flops, [&](int64_t j0, int64_t j1, ThreadPool* inner) {
    std::unique_ptr<T[]> col = scratch<T>(mg * ks * is);
    for (int64_t j = j0; j < j1; j++) {
      int64_t ni = j / g.group, gi = j % g.group;
      // col[(m, k), i] = sum_c W[c, m, k] * X[c, i]
      parallel_gemm<T>(inner, true, false, mg * ks, is, cg, T(1), w + gi * cg * mg * ks, mg * ks,
                       x + (ni * g.c + gi * cg) * is, is, T(0), col.get(), is);
      T* yg = y + (ni * g.m + gi * mg) * os;
      if (inner) {
        inner->parallel_for(mg, [&](int64_t m0, int64_t m1) { col2im(g, col.get(), m0, m1, yg); });
      } else {
        col2im(g, col.get(), 0, mg, yg);
      }
    }
  });
}

void conv_kernel(KernelContext& ctx) {
  dispatch_float(ctx.input(0).dtype(), [&]<class T>() { conv<T>(ctx); });
}

void conv_transpose_kernel(KernelContext& ctx) {
  dispatch_float(ctx.input(0).dtype(), [&]<class T>() { conv_transpose<T>(ctx); });
}

// ---------------------------------------------------------------------------------------
// Einsum

// Element strides of an operand with axes `labels` per label in `ids` (summed over a
// repeated label, which reads the diagonal; 0 where the operand lacks the label or
// broadcasts it).
std::vector<int64_t> label_strides(const Shape& shape, const std::vector<int>& labels,
                                   const std::vector<int>& ids) {
  std::vector<int64_t> cs = contiguous_strides(shape), st(ids.size(), 0);
  for (size_t ax = 0; ax < labels.size(); ax++) {
    if (shape[ax] == 1) continue;
    st[std::find(ids.begin(), ids.end(), labels[ax]) - ids.begin()] += cs[ax];
  }
  return st;
}

// Any equation: for each output element, sum the operands' product over the other labels.
template <class T>
void einsum_generic(ThreadPool& pool, const std::vector<const Tensor*>& in, const EinsumLabels& l,
                    const std::map<int, int64_t>& size, T* y) {
  std::vector<int> ids = l.output;
  for (auto& [id, s] : size)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  size_t n_out = l.output.size(), n_all = ids.size();
  std::vector<int64_t> dims;
  for (int id : ids) dims.push_back(size.at(id));
  std::vector<std::vector<int64_t>> st;
  std::vector<const T*> data;
  for (size_t t = 0; t < in.size(); t++) {
    st.push_back(label_strides(in[t]->shape(), l.inputs[t], ids));
    data.push_back(in[t]->data<T>());
  }
  Shape out_dims(dims.begin(), dims.begin() + n_out), sum_dims(dims.begin() + n_out, dims.end());
  int64_t out_count = shape_numel(out_dims), sum_count = shape_numel(sum_dims);
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  pool.parallel_for(
      out_count,
      [&](int64_t o0, int64_t o1) {
        std::vector<int64_t> idx(n_all), off(in.size());
        for (int64_t o = o0; o < o1; o++) {
          int64_t rest = o;
          for (size_t ax = n_out; ax-- > 0;) {
            idx[ax] = rest % dims[ax];
            rest /= dims[ax];
          }
          std::fill(idx.begin() + n_out, idx.end(), 0);
          for (size_t t = 0; t < in.size(); t++) {
            off[t] = 0;
            for (size_t ax = 0; ax < n_out; ax++) off[t] += idx[ax] * st[t][ax];
          }
          Acc acc = 0;
          for (int64_t s = 0; s < sum_count; s++) {
            Acc prod = 1;
            for (size_t t = 0; t < in.size(); t++) prod *= data[t][off[t]];
            acc += prod;
            for (size_t ax = n_all; ax-- > n_out;) {
              for (size_t t = 0; t < in.size(); t++) off[t] += st[t][ax];
              if (++idx[ax] < dims[ax]) break;
              for (size_t t = 0; t < in.size(); t++) off[t] -= st[t][ax] * dims[ax];
              idx[ax] = 0;
            }
          }
          y[o] = T(acc);
        }
      },
      std::max<int64_t>(1, 4096 / std::max<int64_t>(sum_count, 1)));
}

// Two operands without repeated labels and without labels only one operand sums over:
// a batched GEMM after arranging A as [batch, m, k] and B as [batch, k, n], which covers
// attention's "bhqd,bhkd->bhqk" and the like, mostly without copies.
template <class T>
bool einsum_gemm(ThreadPool& pool, const Tensor& a, const Tensor& b, const EinsumLabels& l,
                 const std::map<int, int64_t>& size, T* y) {
  const std::vector<int>&la = l.inputs[0], &lb = l.inputs[1], &lo = l.output;
  auto has = [](const std::vector<int>& v, int id) { return std::find(v.begin(), v.end(), id) != v.end(); };
  if (std::set<int>(la.begin(), la.end()).size() != la.size() ||
      std::set<int>(lb.begin(), lb.end()).size() != lb.size())
    return false;
  std::vector<int> batch, ms, ns, ks;
  for (int id : lo) {
    if (has(la, id) && has(lb, id))
      batch.push_back(id);
    else if (has(la, id))
      ms.push_back(id);
    else
      ns.push_back(id);
  }
  for (int id : la)
    if (!has(lo, id)) {
      if (!has(lb, id)) return false;
      ks.push_back(id);
    }
  for (int id : lb)
    if (!has(lo, id) && !has(la, id)) return false;
  auto prod = [&](const std::vector<int>& ids) {
    int64_t p = 1;
    for (int id : ids) p *= size.at(id);
    return p;
  };
  int64_t nb = prod(batch), m = prod(ms), n = prod(ns), k = prod(ks);
  auto cat_ids = [](std::vector<int> x, const std::vector<int>& p, const std::vector<int>& q) {
    x.insert(x.end(), p.begin(), p.end());
    x.insert(x.end(), q.begin(), q.end());
    return x;
  };
  // The operand as [batch, rows, cols], or [batch, cols, rows] (then `trans`), copied
  // only when its axes are in neither order or it broadcasts.
  std::vector<std::unique_ptr<T[]>> keep;
  auto arrange = [&](const Tensor& t, const std::vector<int>& labels, const std::vector<int>& rows,
                     const std::vector<int>& cols, bool& trans) -> const T* {
    bool full = true;
    for (size_t ax = 0; ax < labels.size(); ax++) full = full && t.dim(int(ax)) == size.at(labels[ax]);
    trans = false;
    if (full && labels == cat_ids(batch, rows, cols)) return t.data<T>();
    if (full && labels == cat_ids(batch, cols, rows)) {
      trans = true;
      return t.data<T>();
    }
    std::vector<int> order = cat_ids(batch, rows, cols);
    std::vector<int64_t> dims;
    for (int id : order) dims.push_back(size.at(id));
    keep.push_back(scratch<T>(shape_numel(dims)));
    strided_copy(t.data<T>(), dims, label_strides(t.shape(), labels, order), keep.back().get());
    return keep.back().get();
  };
  bool ta, tb;
  const T* ad = arrange(a, la, ms, ks, ta);
  const T* bd = arrange(b, lb, ks, ns, tb);
  std::vector<int> y_order = cat_ids(batch, ms, ns);
  bool direct = y_order == lo;
  std::unique_ptr<T[]> tmp = direct ? nullptr : scratch<T>(nb * m * n);
  T* yd = direct ? y : tmp.get();
  run_jobs<T>(pool, nb, 2.0 * m * n * k, [&](int64_t b0, int64_t b1, ThreadPool* inner) {
    for (int64_t i = b0; i < b1; i++)
      parallel_gemm<T>(inner, ta, tb, m, n, k, T(1), ad + i * m * k, ta ? m : k, bd + i * k * n, tb ? k : n,
                       T(0), yd + i * m * n, n);
  });
  if (!direct) {
    Shape dims, tmp_dims;
    for (int id : lo) dims.push_back(size.at(id));
    for (int id : y_order) tmp_dims.push_back(size.at(id));
    strided_copy(yd, dims, label_strides(tmp_dims, y_order, lo), y);
  }
  return true;
}

void einsum_kernel(KernelContext& ctx) {
  std::vector<const Tensor*> in;
  std::vector<size_t> ranks;
  for (size_t i = 0; i < ctx.input_count(); i++) {
    in.push_back(&ctx.input(i));
    ranks.push_back(size_t(in.back()->rank()));
  }
  EinsumLabels l = einsum_labels(ctx.node.attr_string("equation", ""), ranks);
  std::map<int, int64_t> size;
  for (size_t t = 0; t < in.size(); t++)
    for (size_t ax = 0; ax < l.inputs[t].size(); ax++) {
      int64_t& s = size.try_emplace(l.inputs[t][ax], 1).first->second;
      if (s == 1) s = in[t]->dim(int(ax));
    }
  Tensor& y = ctx.output(0);
  dispatch_numeric(y.dtype(), [&]<class T>() {
    if (y.numel() == 0) return;
    if (in.size() == 2 && einsum_gemm<T>(ctx.pool, *in[0], *in[1], l, size, y.data<T>())) return;
    einsum_generic<T>(ctx.pool, in, l, size, y.data<T>());
  });
}

// LU decomposition with partial pivoting, in double.
void det_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t m = x.dim(-1), count = y.numel();
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<double> a(m * m);
    for (int64_t b = 0; b < count; b++) {
      for (int64_t i = 0; i < m * m; i++) a[i] = double(xp[b * m * m + i]);
      double det = 1;
      for (int64_t c = 0; c < m && det != 0; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < m; r++)
          if (std::abs(a[r * m + c]) > std::abs(a[p * m + c])) p = r;
        if (a[p * m + c] == 0) {
          det = 0;
          break;
        }
        if (p != c) {
          for (int64_t k = 0; k < m; k++) std::swap(a[p * m + k], a[c * m + k]);
          det = -det;
        }
        det *= a[c * m + c];
        for (int64_t r = c + 1; r < m; r++) {
          double f = a[r * m + c] / a[c * m + c];
          for (int64_t k = c; k < m; k++) a[r * m + k] -= f * a[c * m + k];
        }
      }
      yp[b] = T(det);
    }
  });
}

}  // namespace

void register_linalg_kernels(CpuKernelTable& t) {
  t["MatMul"] = {matmul_kernel};
  t["Gemm"] = {gemm_kernel};
  t["Conv"] = {conv_kernel};
  t["ConvTranspose"] = {conv_transpose_kernel};
  t["Einsum"] = {einsum_kernel};
  t["MatMulInteger"] = {matmul_integer_kernel};
  t["Det"] = {det_kernel};
}

void blas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  single_threaded_blas();
  gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace vlrt

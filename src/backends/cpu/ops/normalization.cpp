// Normalization and softmax kernels. Statistics are accumulated in double; float32 rows
// (the transformer hot path: LayerNormalization, Softmax over the last axis) run the
// vector loops of the CPU's instruction set (row_kernels.h) with a polynomial exp; the
// templates are the plain level.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/row_kernels.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// ---- Row helpers: plain templates; float32 overloads run the row loops --------------

template <class T>
T max_of(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

// y = exp(x - shift); returns the sum of y.
template <class T>
double exp_shifted(const T* x, T shift, T* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (y[i] = std::exp(x[i] - shift));
  return s;
}

template <class T>
double sum_of(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

// Sum of (x - mean)^2; two passes keep the variance accurate when |mean| >> stddev.
template <class T>
double sq_dev_sum(const T* x, int64_t n, double mean) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
  return s;
}

// y = (x - m) * a + d
template <class T>
void affine(const T* x, T m, T a, T d, T* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * a + d;
}

// y = (x - m) * inv * scale + bias, with per-element scale and bias.
template <class T>
void norm_affine(const T* x, T m, T inv, const T* scale, const T* bias, T* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * inv * scale[i] + bias[i];
}

float max_of(const float* x, int64_t n) {
  const RowKernelsF32* vec = row_kernels_f32();
  return vec ? vec->max_of(x, n) : max_of<float>(x, n);
}
double exp_shifted(const float* x, float shift, float* y, int64_t n) {
  const RowKernelsF32* vec = row_kernels_f32();
  return vec ? vec->exp_shifted(x, shift, y, n) : exp_shifted<float>(x, shift, y, n);
}
double sum_of(const float* x, int64_t n) {
  const RowKernelsF32* vec = row_kernels_f32();
  return vec ? vec->sum_of(x, n) : sum_of<float>(x, n);
}
double sq_dev_sum(const float* x, int64_t n, double mean) {
  const RowKernelsF32* vec = row_kernels_f32();
  return vec ? vec->sq_dev_sum(x, n, mean) : sq_dev_sum<float>(x, n, mean);
}
void affine(const float* x, float m, float a, float d, float* y, int64_t n) {
  const RowKernelsF32* vec = row_kernels_f32();
  vec ? vec->affine(x, m, a, d, y, n) : affine<float>(x, m, a, d, y, n);
}
void norm_affine(const float* x, float m, float inv, const float* scale, const float* bias, float* y,
                 int64_t n) {
  const RowKernelsF32* vec = row_kernels_f32();
  vec ? vec->norm_affine(x, m, inv, scale, bias, y, n) : norm_affine<float>(x, m, inv, scale, bias, y, n);
}

struct Stats {
  double mean, inv_std;
};

template <class T>
Stats row_stats(const T* x, int64_t n, double eps) {
  double mean = n ? sum_of(x, n) / double(n) : 0.0;
  double var = n ? sq_dev_sum(x, n, mean) / double(n) : 0.0;
  return {mean, 1.0 / std::sqrt(var + eps)};
}

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; i++) p *= s[i];
  return p;
}

// Values of t broadcast (right-aligned) to `target`, row-major.
std::vector<double> broadcast_values(const Tensor& t, const Shape& target) {
  std::vector<double> src = t.to_double_vector();
  std::vector<int64_t> st = broadcast_strides(t.shape(), target);
  std::vector<double> out(shape_numel(target));
  std::vector<int64_t> idx(target.size(), 0);
  int64_t off = 0;
  for (size_t i = 0; i < out.size(); i++) {
    out[i] = src[size_t(off)];
    for (size_t d = target.size(); d-- > 0;) {
      off += st[d];
      if (++idx[d] < target[d]) break;
      off -= st[d] * target[d];
      idx[d] = 0;
    }
  }
  return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); i++)
    if (from[i] != 1 && from[i] != to[to.size() - from.size() + i]) return false;
  return true;
}

template <class T>
std::vector<T> cast_vector(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

// ---- BatchNormalization ----------------------------------------------------------

void batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t n = x.dim(0), c = x.dim(1), spatial = prod(x.shape(), 2, x.shape().size());
  double eps = ctx.node.attr_float("epsilon", 1e-5f);
  std::vector<double> scale = ctx.input(1).to_double_vector(), bias = ctx.input(2).to_double_vector();
  std::vector<double> mean = ctx.input(3).to_double_vector(), var = ctx.input(4).to_double_vector();
  bool training = ctx.node.attr_int("training_mode", 0) != 0;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    if (training) {
      // Batch statistics (population variance) replace the inputs; running stats blend them in.
      std::vector<double> bmean(c), bvar(c);
      ctx.pool.parallel_for(c, [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ch++) {
          double s = 0, ss = 0;
          for (int64_t b = 0; b < n; b++) s += sum_of(px + (b * c + ch) * spatial, spatial);
          double m = n * spatial > 0 ? s / double(n * spatial) : 0.0;
          for (int64_t b = 0; b < n; b++) ss += sq_dev_sum(px + (b * c + ch) * spatial, spatial, m);
          bmean[ch] = m;
          bvar[ch] = n * spatial > 0 ? ss / double(n * spatial) : 0.0;
        }
      });
      double momentum = ctx.node.attr_float("momentum", 0.9f);
      for (int i = 1; i <= 2; i++) {
        if (!ctx.has_output(i)) continue;
        const std::vector<double>& run = i == 1 ? mean : var;
        const std::vector<double>& cur = i == 1 ? bmean : bvar;
        dispatch_float(ctx.output(i).dtype(), [&]<class U>() {
          U* o = ctx.output(i).data<U>();
          for (int64_t ch = 0; ch < c; ch++) o[ch] = U(run[ch] * momentum + cur[ch] * (1 - momentum));
        });
      }
      mean = bmean;
      var = bvar;
    }
    T* py = ctx.output(0).data<T>();
    ctx.pool.parallel_for(
        n * c,
        [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; r++) {
            int64_t ch = r % c;
            affine(px + r * spatial, T(mean[ch]), T(scale[ch] / std::sqrt(var[ch] + eps)), T(bias[ch]),
                   py + r * spatial, spatial);
          }
        },
        grain_for(spatial));
  });
}

// ---- LayerNormalization ----------------------------------------------------------

void layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& xs = x.shape();
  size_t axis = size_t(normalize_axis(ctx.node.attr_int("axis", -1), x.rank()));
  int64_t rows = prod(xs, 0, axis), cols = prod(xs, axis, xs.size());
  double eps = ctx.node.attr_float("epsilon", 1e-5f);
  Shape suffix(xs.begin() + axis, xs.end());
  // Scale and bias usually cover the normalized axes only (one row, reused); otherwise
  // they are expanded over all of X.
  auto expand = [&](size_t i, int64_t& row_step) {
    const Tensor& t = ctx.input(i);
    Shape s = t.shape();
    while (s.size() > suffix.size() && s.front() == 1) s.erase(s.begin());
    bool per_row = !broadcasts_to(s, suffix);
    row_step = per_row ? cols : 0;
    return broadcast_values(t.reshaped(s), per_row ? xs : suffix);
  };
  int64_t scale_step = 0, bias_step = 0;
  std::vector<double> scale = expand(1, scale_step);
  std::vector<double> bias = ctx.has_input(2) ? expand(2, bias_step) : std::vector<double>(cols, 0.0);
  std::vector<Stats> stats(ctx.has_output(1) || ctx.has_output(2) ? rows : 0);
  dispatch_float(x.dtype(), [&]<class T>() {
    std::vector<T> s = cast_vector<T>(scale), b = cast_vector<T>(bias);
    const T* px = x.data<T>();
    T* py = ctx.output(0).data<T>();
    ctx.pool.parallel_for(
        rows,
        [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; r++) {
            const T* xr = px + r * cols;
            T* yr = py + r * cols;
            Stats st = row_stats(xr, cols, eps);
            norm_affine(xr, T(st.mean), T(st.inv_std), s.data() + r * scale_step, b.data() + r * bias_step,
                        yr, cols);
            if (!stats.empty()) stats[r] = st;
          }
        },
        grain_for(cols));
  });
  for (int i = 1; i <= 2; i++) {
    if (!ctx.has_output(i)) continue;
    dispatch_float(ctx.output(i).dtype(), [&]<class U>() {
      U* o = ctx.output(i).data<U>();
      for (int64_t r = 0; r < rows; r++) o[r] = U(i == 1 ? stats[r].mean : stats[r].inv_std);
    });
  }
}

// ---- InstanceNormalization and GroupNormalization ----------------------------------

// Normalizes n * groups contiguous blocks; channel ch of a block gets scale[ch], bias[ch].
template <class T>
void group_norm(KernelContext& ctx, const Tensor& x, Tensor& y, int64_t groups,
                const std::vector<double>& scale, const std::vector<double>& bias, double eps) {
  int64_t n = x.dim(0), c = x.dim(1), spatial = prod(x.shape(), 2, x.shape().size());
  int64_t cpg = c / groups, block = cpg * spatial;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  ctx.pool.parallel_for(
      n * groups,
      [&](int64_t b0, int64_t b1) {
        for (int64_t blk = b0; blk < b1; blk++) {
          const T* xb = px + blk * block;
          T* yb = py + blk * block;
          Stats st = row_stats(xb, block, eps);
          for (int64_t k = 0; k < cpg; k++) {
            int64_t ch = (blk % groups) * cpg + k;
            affine(xb + k * spatial, T(st.mean), T(scale[ch] * st.inv_std), T(bias[ch]), yb + k * spatial,
                   spatial);
          }
        }
      },
      grain_for(block));
}

void instance_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  double eps = ctx.node.attr_float("epsilon", 1e-5f);
  std::vector<double> scale = ctx.input(1).to_double_vector(), bias = ctx.input(2).to_double_vector();
  dispatch_float(x.dtype(),
                 [&]<class T>() { group_norm<T>(ctx, x, ctx.output(0), x.dim(1), scale, bias, eps); });
}

void group_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t c = x.dim(1), groups = ctx.node.attr_int("num_groups", 1);
  double eps = ctx.node.attr_float("epsilon", 1e-5f);
  auto per_channel = [&](const Tensor& t) {
    std::vector<double> v = t.to_double_vector();
    if (int64_t(v.size()) == c) return v;
    std::vector<double> out(c);
    for (int64_t ch = 0; ch < c; ch++) out[ch] = v[ch / (c / groups)];
    return out;
  };
  std::vector<double> scale = per_channel(ctx.input(1)), bias = per_channel(ctx.input(2));
  dispatch_float(x.dtype(),
                 [&]<class T>() { group_norm<T>(ctx, x, ctx.output(0), groups, scale, bias, eps); });
}

// ---- Axis-wise ops: [outer, n, inner] views ----------------------------------------

struct AxisView {
  int64_t outer, n, inner;
};

AxisView axis_view(const Shape& s, size_t axis) {
  return {prod(s, 0, axis), s[axis], prod(s, axis + 1, s.size())};
}

void lp_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  AxisView v = axis_view(x.shape(), size_t(normalize_axis(ctx.node.attr_int("axis", -1), x.rank())));
  bool l1 = ctx.node.attr_int("p", 2) == 1;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = ctx.output(0).data<T>();
    ctx.pool.parallel_for(
        v.outer * v.inner,
        [&](int64_t s0, int64_t s1) {
          for (int64_t s = s0; s < s1; s++) {
            int64_t base = (s / v.inner) * v.n * v.inner + s % v.inner;
            double norm = 0;
            for (int64_t i = 0; i < v.n; i++) {
              double e = px[base + i * v.inner];
              norm += l1 ? std::abs(e) : e * e;
            }
            if (!l1) norm = std::sqrt(norm);
            // The spec defines a zero norm to give zeros rather than NaN.
            T k = norm == 0 ? T(0) : T(1.0 / norm);
            for (int64_t i = 0; i < v.n; i++) py[base + i * v.inner] = px[base + i * v.inner] * k;
          }
        },
        grain_for(v.n));
  });
}

void mvn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& xs = x.shape();
  std::vector<bool> reduced(xs.size(), false);
  for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3})) reduced[size_t(normalize_axis(a, x.rank()))] = true;
  // Statistic slot of every element: its index over the kept axes.
  Shape kept_shape;
  for (size_t d = 0; d < xs.size(); d++) kept_shape.push_back(reduced[d] ? 1 : xs[d]);
  std::vector<int64_t> kst = contiguous_strides(kept_shape);
  int64_t slots = shape_numel(kept_shape), total = x.numel();
  std::vector<int64_t> slot(total);
  {
    std::vector<int64_t> idx(xs.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < total; i++) {
      slot[i] = off;
      for (size_t d = xs.size(); d-- > 0;) {
        if (!reduced[d]) off += kst[d];
        if (++idx[d] < xs[d]) break;
        if (!reduced[d]) off -= kst[d] * xs[d];
        idx[d] = 0;
      }
    }
  }
  double count = slots ? double(total) / double(slots) : 0.0;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = ctx.output(0).data<T>();
    std::vector<double> mean(slots, 0.0), inv(slots, 0.0);
    for (int64_t i = 0; i < total; i++) mean[slot[i]] += px[i];
    for (double& m : mean) m /= count;
    for (int64_t i = 0; i < total; i++) inv[slot[i]] += (px[i] - mean[slot[i]]) * (px[i] - mean[slot[i]]);
    // The spec's function body adds epsilon 1e-9 to the standard deviation, not the variance.
    for (double& v : inv) v = 1.0 / (std::sqrt(v / count) + 1e-9);
    for (int64_t i = 0; i < total; i++) py[i] = T((px[i] - mean[slot[i]]) * inv[slot[i]]);
  });
}

void lrn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t n = x.dim(0), c = x.dim(1), spatial = prod(x.shape(), 2, x.shape().size());
  int64_t size = ctx.node.attr_int("size", 1);
  double alpha = ctx.node.attr_float("alpha", 1e-4f), beta = ctx.node.attr_float("beta", 0.75f);
  double bias = ctx.node.attr_float("bias", 1.0f);
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = ctx.output(0).data<T>();
    ctx.pool.parallel_for(
        n * c,
        [&](int64_t r0, int64_t r1) {
          std::vector<double> sq(spatial);
          for (int64_t r = r0; r < r1; r++) {
            int64_t b = r / c, ch = r % c;
            std::fill(sq.begin(), sq.end(), 0.0);
            for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); k++) {
              const T* xk = px + (b * c + k) * spatial;
              for (int64_t i = 0; i < spatial; i++) sq[i] += double(xk[i]) * xk[i];
            }
            const T* xr = px + r * spatial;
            T* yr = py + r * spatial;
            for (int64_t i = 0; i < spatial; i++)
              yr[i] = T(xr[i] / std::pow(bias + alpha / size * sq[i], beta));
          }
        },
        grain_for(spatial * size));
  });
}

// ---- Softmax, LogSoftmax, Hardmax ---------------------------------------------------

enum class SoftmaxKind { softmax, log_softmax, hardmax };

AxisView softmax_view(const KernelContext& ctx, const Shape& s) {
  return axis_view(s, size_t(normalize_axis(ctx.node.attr_int("axis", -1), int64_t(s.size()))));
}

template <class T>
void softmax_row(SoftmaxKind kind, const T* x, T* y, int64_t n) {
  if (kind == SoftmaxKind::hardmax) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++) best = x[i] > x[best] ? i : best;
    for (int64_t i = 0; i < n; i++) y[i] = T(i == best);
    return;
  }
  T m = max_of(x, n);
  double sum = exp_shifted(x, m, y, n);
  if (kind == SoftmaxKind::softmax)
    affine(y, T(0), T(1.0 / sum), T(0), y, n);
  else
    affine(x, m, T(1), T(-std::log(sum)), y, n);
}

// Softmax along a strided axis: a block of `w` adjacent columns at a time, so every
// inner loop stays contiguous.
template <class T>
void softmax_columns(SoftmaxKind kind, const T* x, T* y, int64_t n, int64_t inner, int64_t w) {
  std::vector<T> m(w, -std::numeric_limits<T>::infinity());
  std::vector<double> sum(w, 0.0);
  std::vector<int64_t> best(w, 0);
  for (int64_t i = 0; i < n; i++) {
    const T* xi = x + i * inner;
    for (int64_t j = 0; j < w; j++) {
      if (xi[j] > m[j] || i == 0) {
        m[j] = xi[j];
        best[j] = i;
      }
    }
  }
  if (kind == SoftmaxKind::hardmax) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < w; j++) y[i * inner + j] = T(best[j] == i);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < w; j++) {
      T e = std::exp(x[i * inner + j] - m[j]);
      sum[j] += e;
      y[i * inner + j] = kind == SoftmaxKind::softmax ? e : x[i * inner + j] - m[j];
    }
  }
  for (int64_t j = 0; j < w; j++) sum[j] = kind == SoftmaxKind::softmax ? 1.0 / sum[j] : std::log(sum[j]);
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < w; j++) {
      T& v = y[i * inner + j];
      v = kind == SoftmaxKind::softmax ? T(v * sum[j]) : T(v - sum[j]);
    }
  }
}

template <SoftmaxKind kind>
void softmax_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  AxisView v = softmax_view(ctx, x.shape());
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = ctx.output(0).data<T>();
    if (v.inner == 1) {
      ctx.pool.parallel_for(
          v.outer,
          [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; r++) softmax_row(kind, px + r * v.n, py + r * v.n, v.n);
          },
          grain_for(v.n));
      return;
    }
    const int64_t w = 64;
    int64_t blocks = (v.inner + w - 1) / w;
    ctx.pool.parallel_for(
        v.outer * blocks,
        [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; t++) {
            int64_t o = t / blocks, j0 = (t % blocks) * w;
            int64_t off = o * v.n * v.inner + j0;
            softmax_columns(kind, px + off, py + off, v.n, v.inner, std::min(w, v.inner - j0));
          }
        },
        grain_for(v.n * w));
  });
}

}  // namespace

void register_normalization_kernels(CpuKernelTable& t) {
  t["BatchNormalization"] = {batch_norm_kernel};
  t["LayerNormalization"] = {layer_norm_kernel};
  t["InstanceNormalization"] = {instance_norm_kernel};
  t["GroupNormalization"] = {group_norm_kernel};
  t["LpNormalization"] = {lp_norm_kernel};
  t["MeanVarianceNormalization"] = {mvn_kernel};
  t["LRN"] = {lrn_kernel};
  t["Softmax"] = {softmax_kernel<SoftmaxKind::softmax>};
  t["LogSoftmax"] = {softmax_kernel<SoftmaxKind::log_softmax>};
  t["Hardmax"] = {softmax_kernel<SoftmaxKind::hardmax>};
}

}  // namespace vlrt

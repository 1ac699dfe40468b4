// Reduction kernels. The input is viewed as alternating kept/reduced runs of axes;
// the common layouts (reduce the trailing block, e.g. ReduceMean over the last axis or
// over H,W; or one middle block) have contiguous fast paths, anything else goes
// through precomputed offsets. Float sums accumulate in double, integer ones wrap
// in 64 bits like the reference. float32 sums, maxima and minima of contiguous rows run
// the vector loops of the CPU's instruction set (row_kernels.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/row_kernels.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(x);
  else
    return false;
}

// Accumulator: double for floats; for integers uint64, whose wrap-around equals the
// two's-complement result once cast back to T.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <class T>
double acc_value(Acc<T> a) {
  if constexpr (std::is_signed_v<T> && !std::is_floating_point_v<T>)
    return double(int64_t(a));
  else
    return double(a);
}

// double to T; for integers NaN gives 0 and out-of-range values saturate.
template <class T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return T(v);
  } else {
    if (std::isnan(v)) return T(0);
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(v);
  }
}

// ---- Reduce* ------------------------------------------------------------------------

enum class RK { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

template <class T, RK K>
struct Reducer {
  using A = std::conditional_t<K == RK::max || K == RK::min, T,
                               std::conditional_t<K == RK::log_sum_exp, double, Acc<T>>>;
  int64_t count = 0;         // elements reduced into each output
  const T* shift = nullptr;  // log_sum_exp: per-output value subtracted before exp

  A init() const {
    using L = std::numeric_limits<T>;
    if constexpr (K == RK::max)
      return L::has_infinity ? -L::infinity() : L::lowest();
    else if constexpr (K == RK::min)
      return L::has_infinity ? L::infinity() : L::max();
    else if constexpr (K == RK::prod)
      return A(1);
    else
      return A(0);
  }
  void add(A& a, T x, int64_t o) const {
    if constexpr (K == RK::max) {
      if (x > a || is_nan(x)) a = x;
    } else if constexpr (K == RK::min) {
      if (x < a || is_nan(x)) a = x;
    } else if constexpr (K == RK::prod) {
      a *= A(x);
    } else if constexpr (K == RK::l1) {
      if constexpr (std::is_signed_v<T>)
        a += x < 0 ? A(0) - A(x) : A(x);
      else
        a += A(x);
    } else if constexpr (K == RK::l2 || K == RK::sum_square) {
      a += A(x) * A(x);
    } else if constexpr (K == RK::log_sum_exp) {
      a += std::exp(double(x) - double(shift[o]));
    } else {
      a += A(x);
    }
  }
  T fin(A a, int64_t o) const {
    if constexpr (K == RK::max || K == RK::min) {
      return a;
    } else if constexpr (K == RK::mean) {
      if constexpr (std::is_floating_point_v<T>)
        return T(a / double(count));
      else if (count == 0)
        return T(0);
      else if constexpr (std::is_signed_v<T>)
        return T(int64_t(a) / count);
      else
        return T(a / uint64_t(count));
    } else if constexpr (K == RK::l2) {
      return from_double<T>(std::sqrt(acc_value<T>(a)));
    } else if constexpr (K == RK::log_sum) {
      return from_double<T>(std::log(acc_value<T>(a)));
    } else if constexpr (K == RK::log_sum_exp) {
      return from_double<T>(double(shift[o]) + std::log(a));
    } else {
      return T(a);
    }
  }
};

// The input as runs of axes, size-1 axes dropped and neighbours of the same kind merged.
struct Runs {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
};

Runs merge_runs(const Shape& s, const std::vector<bool>& mask) {
  Runs r;
  for (size_t d = 0; d < s.size(); d++) {
    if (s[d] == 1) continue;
    if (!r.dims.empty() && r.reduced.back() == mask[d]) {
      r.dims.back() *= s[d];
    } else {
      r.dims.push_back(s[d]);
      r.reduced.push_back(mask[d]);
    }
  }
  return r;
}

// Offsets (in elements) of every index over the axes of one kind, row-major.
std::vector<int64_t> run_offsets(const Runs& r, bool reduced) {
  std::vector<int64_t> dims, strides;
  int64_t stride = 1;
  for (size_t d = r.dims.size(); d-- > 0;) {
    if (r.reduced[d] == reduced) {
      dims.insert(dims.begin(), r.dims[d]);
      strides.insert(strides.begin(), stride);
    }
    stride *= r.dims[d];
  }
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> out(n);
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    out[size_t(i)] = off;
    for (size_t d = dims.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < dims[d]) break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
  }
  return out;
}

// a = the reduction of a contiguous row, on the vector row loops; false where the op or
// type has none, or the level is plain.
template <class T, RK K, class A>
bool fold_row(const RowKernelsF32* vec, const T* row, int64_t n, A& a) {
  if constexpr (std::is_same_v<T, float> && (K == RK::sum || K == RK::mean || K == RK::max || K == RK::min)) {
    if (!vec) return false;
    a = K == RK::max ? vec->max_of(row, n) : K == RK::min ? vec->min_of(row, n) : vec->sum_of(row, n);
    return true;
  }
  return false;
}

// acc[j] = acc[j] folded with row[j], on the vector row loops; false as for fold_row.
template <class T, RK K, class A>
bool fold_into(const RowKernelsF32* vec, A* acc, const T* row, int64_t n) {
  if constexpr (std::is_same_v<T, float> && (K == RK::sum || K == RK::mean || K == RK::max || K == RK::min)) {
    if (!vec) return false;
    if constexpr (K == RK::max)
      vec->max_into(acc, row, n);
    else if constexpr (K == RK::min)
      vec->min_into(acc, row, n);
    else
      vec->add_into(acc, row, n);
    return true;
  }
  return false;
}

template <class T, RK K>
void reduce_into(const Reducer<T, K>& op, const Runs& r, const T* x, T* y, int64_t outputs,
                 ThreadPool& pool) {
  using A = typename Reducer<T, K>::A;
  size_t nd = r.dims.size();
  int64_t red = op.count;
  const RowKernelsF32* vec = row_kernels_f32();
  // [kept?, reduced], or nothing left to reduce: each output folds one contiguous row.
  bool any_reduced = std::find(r.reduced.begin(), r.reduced.end(), true) != r.reduced.end();
  if (!any_reduced || (nd <= 2 && r.reduced.back())) {
    pool.parallel_for(
        outputs,
        [&](int64_t o0, int64_t o1) {
          for (int64_t o = o0; o < o1; o++) {
            const T* row = x + o * red;
            A a = op.init();
            if (!fold_row<T, K>(vec, row, red, a))
              for (int64_t i = 0; i < red; i++) op.add(a, row[i], o);
            y[o] = op.fin(a, o);
          }
        },
        grain_for(red));
    return;
  }
  // [kept?, reduced, kept]: accumulate rows of the trailing block, a column strip at a time.
  bool middle = (nd == 2 && r.reduced[0]) || (nd == 3 && r.reduced[1]);
  if (middle) {
    int64_t outer = nd == 3 ? r.dims[0] : 1, inner = r.dims.back();
    if (inner <= 16) {
      // A short kept row (channel blocks [N, C/8, H, W, 8] averaged over H, W): folded inline
      // rather than with one vector-loop call per row, the common widths as compile-time
      // constants so that the compiler vectorizes the row.
      auto fold = [&]<int64_t W>(std::integral_constant<int64_t, W>) {
        const int64_t n = W ? W : inner;
        pool.parallel_for(
            outer,
            [&](int64_t o0, int64_t o1) {
              A acc[16];
              for (int64_t o = o0; o < o1; o++) {
                std::fill(acc, acc + n, op.init());
                const T* block = x + o * red * n;
                for (int64_t i = 0; i < red; i++)
                  for (int64_t j = 0; j < n; j++) op.add(acc[j], block[i * n + j], o * n + j);
                for (int64_t j = 0; j < n; j++) y[o * n + j] = op.fin(acc[j], o * n + j);
              }
            },
            grain_for(red * n));
      };
      if (inner == 8)
        fold(std::integral_constant<int64_t, 8>{});
      else if (inner == 16)
        fold(std::integral_constant<int64_t, 16>{});
      else
        fold(std::integral_constant<int64_t, 0>{});
      return;
    }
    const int64_t w = 256;
    int64_t strips = (inner + w - 1) / w;
    pool.parallel_for(
        outer * strips,
        [&](int64_t t0, int64_t t1) {
          std::vector<A> acc(w);
          for (int64_t t = t0; t < t1; t++) {
            int64_t o = t / strips, j0 = (t % strips) * w, jn = std::min(w, inner - j0);
            std::fill(acc.begin(), acc.begin() + jn, op.init());
            for (int64_t i = 0; i < red; i++) {
              const T* row = x + (o * red + i) * inner + j0;
              if (!fold_into<T, K>(vec, acc.data(), row, jn))
                for (int64_t j = 0; j < jn; j++) op.add(acc[j], row[j], o * inner + j0 + j);
            }
            for (int64_t j = 0; j < jn; j++) y[o * inner + j0 + j] = op.fin(acc[j], o * inner + j0 + j);
          }
        },
        grain_for(red * w));
    return;
  }
  std::vector<int64_t> kept_off = run_offsets(r, false), red_off = run_offsets(r, true);
  pool.parallel_for(
      outputs,
      [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; o++) {
          const T* base = x + kept_off[size_t(o)];
          A a = op.init();
          for (int64_t off : red_off) op.add(a, base[off], o);
          y[o] = op.fin(a, o);
        }
      },
      grain_for(red));
}

std::vector<bool> reduced_axes(const KernelContext& ctx, size_t rank) {
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) axes = ctx.input(1).to_int64_vector();
  bool noop = ctx.node.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> mask(rank, axes.empty() && !noop);
  for (int64_t a : axes) mask[size_t(normalize_axis(a, int64_t(rank)))] = true;
  return mask;
}

template <class T, RK K>
void reduce_typed(KernelContext& ctx, const Tensor& x, Tensor& y, const Runs& runs, int64_t count) {
  Reducer<T, K> op;
  op.count = count;
  std::vector<T> shift;
  if constexpr (K == RK::log_sum_exp) {
    // Subtract each output's maximum so exp cannot overflow; inf/-inf maxima use 0.
    shift.resize(size_t(y.numel()));
    Reducer<T, RK::max> mx;
    mx.count = count;
    reduce_into(mx, runs, x.data<T>(), shift.data(), y.numel(), ctx.pool);
    for (T& s : shift)
      if (!std::isfinite(double(s))) s = T(0);
    op.shift = shift.data();
  }
  reduce_into(op, runs, x.data<T>(), y.data<T>(), y.numel(), ctx.pool);
}

template <RK K>
void reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<bool> mask = reduced_axes(ctx, size_t(x.rank()));
  Runs runs = merge_runs(x.shape(), mask);
  int64_t count = 1;
  for (size_t d = 0; d < mask.size(); d++)
    if (mask[d]) count *= x.shape()[d];
  dispatch_numeric(x.dtype(), [&]<class T>() {
    // The schema admits 8-bit integers for ReduceMax/ReduceMin only and 16-bit ones never.
    constexpr bool admitted = sizeof(T) >= 4 || (sizeof(T) == 1 && (K == RK::max || K == RK::min));
    if constexpr (!admitted) {
      unsupported("reduction of ", dtype_name(x.dtype()));
    } else {
      reduce_typed<T, K>(ctx, x, y, runs, count);
    }
  });
}

// ---- ArgMax, ArgMin, TopK, CumSum: [outer, n, inner] views -------------------------

struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView axis_view(const Shape& s, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < int64_t(s.size()); d++) {
    if (d < axis)
      v.outer *= s[d];
    else if (d == axis)
      v.n = s[d];
    else
      v.inner *= s[d];
  }
  return v;
}

// Whether x replaces the current best b. NaN wins like in NumPy; with `last` ties go
// to the later index.
template <class T>
bool beats(T x, T b, bool max, bool last) {
  if (is_nan(b)) return last && is_nan(x);
  if (is_nan(x)) return true;
  if (last && x == b) return true;
  return max ? x > b : x < b;
}

template <bool kMax>
void arg_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  AxisView v = axis_view(x.shape(), normalize_axis(ctx.node.attr_int("axis", 0), x.rank()));
  bool last = ctx.node.attr_int("select_last_index", 0) != 0;
  int64_t* py = ctx.output(0).data<int64_t>();
  dispatch_numeric(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    ctx.pool.parallel_for(
        v.outer,
        [&](int64_t o0, int64_t o1) {
          std::vector<T> best(v.inner);
          for (int64_t o = o0; o < o1; o++) {
            const T* xo = px + o * v.n * v.inner;
            int64_t* yo = py + o * v.inner;
            std::copy(xo, xo + v.inner, best.begin());
            std::fill(yo, yo + v.inner, 0);
            for (int64_t i = 1; i < v.n; i++) {
              const T* row = xo + i * v.inner;
              for (int64_t j = 0; j < v.inner; j++) {
                if (beats(row[j], best[j], kMax, last)) {
                  best[j] = row[j];
                  yo[j] = i;
                }
              }
            }
          }
        },
        grain_for(v.n * v.inner));
  });
}

// Strict order with NaN above every number, so sorting is well defined.
template <class T>
bool greater(T a, T b) {
  if (is_nan(a)) return !is_nan(b);
  if (is_nan(b)) return false;
  return a > b;
}

void topk_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& values = ctx.output(0);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", -1), x.rank());
  AxisView v = axis_view(x.shape(), axis);
  int64_t k = values.dim(int(axis));
  bool largest = ctx.node.attr_int("largest", 1) != 0;
  int64_t* pi = ctx.has_output(1) ? ctx.output(1).data<int64_t>() : nullptr;
  dispatch_numeric(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    ctx.pool.parallel_for(
        v.outer * v.inner,
        [&](int64_t s0, int64_t s1) {
          std::vector<T> vals(v.n);
          std::vector<int64_t> idx(v.n);
          for (int64_t s = s0; s < s1; s++) {
            int64_t o = s / v.inner, j = s % v.inner;
            const T* xs = px + o * v.n * v.inner + j;
            for (int64_t i = 0; i < v.n; i++) vals[size_t(i)] = xs[i * v.inner];
            std::iota(idx.begin(), idx.end(), 0);
            // Equal values keep the lower index first, as the spec requires.
            auto before = [&](int64_t a, int64_t b) {
              T va = vals[size_t(a)], vb = vals[size_t(b)];
              if (largest ? greater(va, vb) : greater(vb, va)) return true;
              if (largest ? greater(vb, va) : greater(va, vb)) return false;
              return a < b;
            };
            std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
            int64_t out = o * k * v.inner + j;
            for (int64_t i = 0; i < k; i++) {
              pv[out + i * v.inner] = vals[size_t(idx[size_t(i)])];
              if (pi) pi[out + i * v.inner] = idx[size_t(i)];
            }
          }
        },
        grain_for(v.n * 4));
  });
}

void cumsum_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.input(1).to_int64_vector().at(0);
  VLRT_CHECK(x.rank() >= 1 && axis >= -x.rank() && axis < x.rank(), "axis ", axis,
             " is out of range for rank ", x.rank());
  AxisView v = axis_view(x.shape(), normalize_axis(axis, x.rank()));
  bool exclusive = ctx.node.attr_int("exclusive", 0) != 0, reverse = ctx.node.attr_int("reverse", 0) != 0;
  dispatch_numeric(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = ctx.output(0).data<T>();
    ctx.pool.parallel_for(
        v.outer,
        [&](int64_t o0, int64_t o1) {
          std::vector<Acc<T>> acc(v.inner);
          for (int64_t o = o0; o < o1; o++) {
            std::fill(acc.begin(), acc.end(), Acc<T>(0));
            for (int64_t step = 0; step < v.n; step++) {
              int64_t i = reverse ? v.n - 1 - step : step;
              int64_t off = (o * v.n + i) * v.inner;
              for (int64_t j = 0; j < v.inner; j++) {
                if (exclusive) py[off + j] = T(acc[j]);
                acc[j] += Acc<T>(px[off + j]);
                if (!exclusive) py[off + j] = T(acc[j]);
              }
            }
          }
        },
        grain_for(v.n * v.inner));
  });
}

}  // namespace

void register_reduction_kernels(CpuKernelTable& t) {
  t["ReduceSum"] = {reduce_kernel<RK::sum>};
  t["ReduceMean"] = {reduce_kernel<RK::mean>};
  t["ReduceMax"] = {reduce_kernel<RK::max>};
  t["ReduceMin"] = {reduce_kernel<RK::min>};
  t["ReduceProd"] = {reduce_kernel<RK::prod>};
  t["ReduceL1"] = {reduce_kernel<RK::l1>};
  t["ReduceL2"] = {reduce_kernel<RK::l2>};
  t["ReduceLogSum"] = {reduce_kernel<RK::log_sum>};
  t["ReduceLogSumExp"] = {reduce_kernel<RK::log_sum_exp>};
  t["ReduceSumSquare"] = {reduce_kernel<RK::sum_square>};
  t["ArgMax"] = {arg_kernel<true>};
  t["ArgMin"] = {arg_kernel<false>};
  t["TopK"] = {topk_kernel};
  t["CumSum"] = {cumsum_kernel};
}

}  // namespace vlrt

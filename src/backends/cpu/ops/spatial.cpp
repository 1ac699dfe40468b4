// CPU kernels for pooling, resizing, grid sampling, padding and block rearrangement.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/grid_sample.h"
#include "backends/cpu/ops/quantization.h"
#include "core/dispatch.h"
#include "ops/quantization_semantics.h"
#include "ops/shape_util.h"
#include "ops/spatial_semantics.h"

namespace vlrt {

namespace {

std::vector<int64_t> ints_or(const Node& n, const char* name, size_t len, int64_t fallback) {
  std::vector<int64_t> v = n.attr_ints(name);
  if (v.empty()) v.assign(len, fallback);
  return v;
}

// double to T: floats convert, integers round half to even and saturate (numpy's round + clip).
template <class T>
T saturate(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return T(v);
  } else {
    if (std::isnan(v)) return T(0);
    v = std::nearbyint(v);
    if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(v);
  }
}

template <class T>
T lowest_value() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}

// Splits row r of a row-major shape (all axes but the last) into its multi-index.
void row_index(int64_t r, const Shape& shape, std::vector<int64_t>& idx) {
  for (int64_t a = int64_t(shape.size()) - 2; a >= 0; a--) {
    idx[a] = r % shape[a];
    r /= shape[a];
  }
}

// ---- Pooling -------------------------------------------------------------------------------

// Up to three spatial axes; 1-D and 2-D pools get leading axes of size 1.
struct PoolGeom {
  int64_t in[3], out[3], k[3], s[3], d[3];
  // Per axis and output position: the window's first position, the taps [lo, hi) that hit the input and
  // the taps inside the padded input (AveragePool's count_include_pad divisor).
  std::vector<int64_t> start[3], lo[3], hi[3], padded[3];
  int64_t planes = 0, in_size = 1, out_size = 1;
};

PoolGeom pool_geom(const Node& n, const Shape& x, const Shape& y) {
  size_t nd = x.size() - 2;
  if (nd > 3) unsupported(n.op_type, " over ", nd, " spatial axes (vlrt supports 1 to 3)");
  std::vector<int64_t> k = n.attr_ints("kernel_shape"), s = ints_or(n, "strides", nd, 1),
                       d = ints_or(n, "dilations", nd, 1), pads = ints_or(n, "pads", 2 * nd, 0);
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  PoolGeom g;
  g.planes = x[0] * x[1];
  for (int a = 0; a < 3; a++) {
    int i = a - (3 - int(nd));  // spatial axis, negative for the added leading axes
    int64_t pb = 0, pe = 0;
    if (i < 0) {
      g.in[a] = g.out[a] = g.k[a] = g.s[a] = g.d[a] = 1;
    } else {
      g.in[a] = x[i + 2];
      g.out[a] = y[i + 2];
      g.k[a] = k[i];
      g.s[a] = s[i];
      g.d[a] = d[i];
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        int64_t total = std::max<int64_t>(0, (g.out[a] - 1) * g.s[a] + (g.k[a] - 1) * g.d[a] + 1 - g.in[a]);
        pb = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pe = total - pb;
      } else if (auto_pad != "VALID") {
        pb = pads[i];
        pe = pads[i + nd];
      }
    }
    for (int64_t o = 0; o < g.out[a]; o++) {
      int64_t st = o * g.s[a] - pb;
      int64_t lo = st < 0 ? ceil_div(-st, g.d[a]) : 0;
      int64_t hi = std::min(g.k[a], ceil_div(g.in[a] - st, g.d[a]));
      g.start[a].push_back(st);
      g.lo[a].push_back(lo);
      g.hi[a].push_back(std::max(lo, hi));
      g.padded[a].push_back(std::clamp<int64_t>(ceil_div(g.in[a] + pe - st, g.d[a]), 0, g.k[a]));
    }
    g.in_size *= g.in[a];
    g.out_size *= g.out[a];
  }
  return g;
}

// Calls f(flat spatial index) for each tap of output position (o0, o1, o2) that hits the input.
template <class F>
inline void for_window(const PoolGeom& g, int64_t o0, int64_t o1, int64_t o2, F&& f) {
  for (int64_t j0 = g.lo[0][o0]; j0 < g.hi[0][o0]; j0++) {
    int64_t i0 = g.start[0][o0] + j0 * g.d[0];
    for (int64_t j1 = g.lo[1][o1]; j1 < g.hi[1][o1]; j1++) {
      int64_t row = (i0 * g.in[1] + g.start[1][o1] + j1 * g.d[1]) * g.in[2] + g.start[2][o2];
      for (int64_t j2 = g.lo[2][o2]; j2 < g.hi[2][o2]; j2++) f(row + j2 * g.d[2]);
    }
  }
}

enum class PoolKind { max, avg, lp };

// MaxPool without indices, a row of outputs at a time: for each tap of the window's last axis,
// the outputs whose window that tap keeps inside the input form one range, so the inner loop is a
// plain strided pass with no per-window bounds. The same maxima as the per-window loop (NaN
// skipped, the same comparison).
template <class T>
void max_pool_rows(const PoolGeom& g, const T* xd, T* yd, ThreadPool& pool) {
  // For tap j of the last axis: the outputs [first[j], last[j]) it reads inside the input.
  std::vector<int64_t> first(size_t(g.k[2])), last(size_t(g.k[2]));
  for (int64_t j = 0; j < g.k[2]; j++) {
    int64_t o = 0;
    while (o < g.out[2] && !(j >= g.lo[2][size_t(o)] && j < g.hi[2][size_t(o)])) o++;
    first[size_t(j)] = o;
    while (o < g.out[2] && j >= g.lo[2][size_t(o)] && j < g.hi[2][size_t(o)]) o++;
    last[size_t(j)] = o;
  }
  const int64_t rows = g.out[0] * g.out[1];
  pool.parallel_for(
      g.planes * rows,
      [&](int64_t b, int64_t e) {
        for (int64_t task = b; task < e; task++) {
          const int64_t pl = task / rows, o0 = task % rows / g.out[1], o1 = task % g.out[1];
          const T* xp = xd + pl * g.in_size;
          T* best = yd + pl * g.out_size + (o0 * g.out[1] + o1) * g.out[2];
          std::fill_n(best, g.out[2], lowest_value<T>());
          for (int64_t j0 = g.lo[0][size_t(o0)]; j0 < g.hi[0][size_t(o0)]; j0++) {
            const int64_t i0 = g.start[0][size_t(o0)] + j0 * g.d[0];
            for (int64_t j1 = g.lo[1][size_t(o1)]; j1 < g.hi[1][size_t(o1)]; j1++) {
              const T* row = xp + (i0 * g.in[1] + g.start[1][size_t(o1)] + j1 * g.d[1]) * g.in[2];
              for (int64_t j2 = 0; j2 < g.k[2]; j2++) {
                const int64_t s = g.s[2],
                              offset = j2 * g.d[2] + g.start[2][0];  // start[2][o] = o * s + start[2][0]
                for (int64_t o = first[size_t(j2)]; o < last[size_t(j2)]; o++) {
                  const T v = row[o * s + offset];
                  best[o] = v > best[o] ? v : best[o];
                }
              }
            }
          }
        }
      },
      grain_for(g.out[2] * g.k[0] * g.k[1] * g.k[2]));
}

template <class T>
void max_into_row(T* __restrict best, const T* __restrict row, int64_t n) {
  for (int64_t k = 0; k < n; k++) best[k] = row[k] > best[k] ? row[k] : best[k];
}

// com.microsoft NhwcMaxPool: MaxPool of 8-bit X [N, D..., C] into Y [N, D'..., C], each output pixel
// the elementwise maximum of the C-long rows its window reads.
void nhwc_max_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t c = x.dim(-1), batch = x.dim(0);
  PoolGeom g = pool_geom(as_channels_first(ctx.node), channels_first(x.shape()), channels_first(y.shape()));
  dispatch_q8(x.dtype(), [&]<class T>() {
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    ctx.pool.parallel_for(
        batch * g.out_size,
        [&](int64_t b, int64_t e) {
          for (int64_t task = b; task < e; task++) {
            const int64_t image = task / g.out_size, o = task % g.out_size;
            const int64_t o0 = o / (g.out[1] * g.out[2]), o1 = o / g.out[2] % g.out[1], o2 = o % g.out[2];
            T* best = yd + task * c;
            std::fill_n(best, c, lowest_value<T>());
            for_window(g, o0, o1, o2,
                       [&](int64_t i) { max_into_row(best, xd + (image * g.in_size + i) * c, c); });
          }
        },
        grain_for(c * g.k[0] * g.k[1] * g.k[2]));
  });
}

template <PoolKind K>
void pool_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  PoolGeom g = pool_geom(n, x.shape(), y.shape());
  int64_t* ind = ctx.has_output(1) ? ctx.output(1).data<int64_t>() : nullptr;
  bool col_major = n.attr_int("storage_order", 0) == 1;
  bool include_pad = n.attr_int("count_include_pad", 0) == 1;
  int64_t p = n.attr_int("p", 2);
  int64_t work = g.out_size * g.k[0] * g.k[1] * g.k[2];
  auto run = [&]<class T>() {
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    if constexpr (K == PoolKind::max) {
      if (!ind) return max_pool_rows<T>(g, xd, yd, ctx.pool);
    }
    ctx.pool.parallel_for(
        g.planes,
        [&](int64_t b, int64_t e) {
          for (int64_t pl = b; pl < e; pl++) {
            const T* xp = xd + pl * g.in_size;
            int64_t oi = pl * g.out_size;
            for (int64_t o0 = 0; o0 < g.out[0]; o0++)
              for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++, oi++) {
                  if constexpr (K == PoolKind::max) {
                    // Branch-free updates: comparisons of data are unpredictable. NaN is skipped.
                    T best = lowest_value<T>();
                    if (!ind) {
                      for_window(g, o0, o1, o2, [&](int64_t i) { best = xp[i] > best ? xp[i] : best; });
                      yd[oi] = best;
                    } else {
                      int64_t arg = -1, first = -1;
                      for_window(g, o0, o1, o2, [&](int64_t i) {
                        bool gt = xp[i] > best;
                        best = gt ? xp[i] : best;
                        arg = gt ? i : arg;
                        first = first < 0 ? i : first;
                      });
                      yd[oi] = best;
                      if (arg < 0) arg = first;  // every value was the lowest or NaN
                      int64_t id = arg;
                      if (arg >= 0 && col_major) {
                        int64_t i0 = arg / (g.in[1] * g.in[2]), i1 = arg / g.in[2] % g.in[1],
                                i2 = arg % g.in[2];
                        id = i0 + i1 * g.in[0] + i2 * g.in[0] * g.in[1];
                      }
                      ind[oi] = arg >= 0 ? pl * g.in_size + id : -1;
                    }
                  } else if constexpr (K == PoolKind::avg) {
                    T sum = 0;
                    for_window(g, o0, o1, o2, [&](int64_t i) { sum += xp[i]; });
                    int64_t count = include_pad ? g.padded[0][o0] * g.padded[1][o1] * g.padded[2][o2]
                                                : (g.hi[0][o0] - g.lo[0][o0]) * (g.hi[1][o1] - g.lo[1][o1]) *
                                                      (g.hi[2][o2] - g.lo[2][o2]);
                    yd[oi] = sum / T(count);
                  } else {
                    T sum = 0;
                    if (p == 1)
                      for_window(g, o0, o1, o2, [&](int64_t i) { sum += std::abs(xp[i]); });
                    else if (p == 2)
                      for_window(g, o0, o1, o2, [&](int64_t i) { sum += xp[i] * xp[i]; });
                    else
                      for_window(g, o0, o1, o2, [&](int64_t i) { sum += std::pow(std::abs(xp[i]), T(p)); });
                    yd[oi] = p == 2 ? std::sqrt(sum) : p == 1 ? sum : std::pow(sum, T(1) / T(p));
                  }
                }
          }
        },
        grain_for(work));
  };
  if constexpr (K == PoolKind::max)
    dispatch_numeric(x.dtype(), run);
  else
    dispatch_float(x.dtype(), run);
}

template <PoolKind K>
void global_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t planes = x.dim(0) * x.dim(1);
  int64_t size = planes ? x.numel() / planes : 0;
  int64_t p = ctx.node.attr_int("p", 2);
  auto run = [&]<class T>() {
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    ctx.pool.parallel_for(
        planes,
        [&](int64_t b, int64_t e) {
          for (int64_t pl = b; pl < e; pl++) {
            const T* xp = xd + pl * size;
            if constexpr (K == PoolKind::max) {
              T m = lowest_value<T>();
              for (int64_t i = 0; i < size; i++) m = xp[i] > m ? xp[i] : m;
              yd[pl] = m;
            } else {
              // Four partial sums in double: accurate for large planes and cheap next to the memory reads.
              double s[4] = {0, 0, 0, 0};
              int64_t i = 0;
              if (K == PoolKind::avg || p == 1) {
                auto f = [&](T v) { return K == PoolKind::avg ? double(v) : std::abs(double(v)); };
                for (; i + 4 <= size; i += 4)
                  for (int j = 0; j < 4; j++) s[j] += f(xp[i + j]);
                for (; i < size; i++) s[0] += f(xp[i]);
              } else {
                for (; i < size; i++) s[0] += std::pow(std::abs(double(xp[i])), double(p));
              }
              double sum = (s[0] + s[1]) + (s[2] + s[3]);
              if (K == PoolKind::avg)
                yd[pl] = T(sum / double(size));
              else
                yd[pl] = T(p == 1 ? sum : std::pow(sum, 1.0 / double(p)));
            }
          }
        },
        grain_for(size));
  };
  if constexpr (K == PoolKind::max)
    dispatch_numeric(x.dtype(), run);
  else
    dispatch_float(x.dtype(), run);
}

// Indices address the unpooled tensor of the default shape; a larger output_shape holds it at its origin
// (the ONNX reference and conformance tests).
void max_unpool_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  const int64_t* ind = ctx.input(1).data<int64_t>();
  Tensor& y = ctx.output(0);
  size_t nd = x.rank() - 2;
  std::vector<int64_t> k = n.attr_ints("kernel_shape"), s = ints_or(n, "strides", nd, 1),
                       pads = ints_or(n, "pads", 2 * nd, 0);
  Shape def = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < nd; i++)
    def.push_back((x.dim(int(i + 2)) - 1) * s[i] + k[i] - pads[i] - pads[i + nd]);
  int64_t def_numel = shape_numel(def);
  std::vector<int64_t> ystride = contiguous_strides(y.shape());
  std::memset(y.raw(), 0, y.nbytes());
  dispatch_bytes(dtype_size(x.dtype()), [&]<class U>() {
    const U* xd = static_cast<const U*>(x.raw());
    U* yd = static_cast<U*>(y.raw());
    for (int64_t i = 0; i < x.numel(); i++) {
      int64_t at = ind[i];
      if (at < 0 || at >= def_numel)
        fail("index ", at, " at position ", i, " is outside the unpooled shape ", shape_str(def));
      if (def != y.shape()) {
        int64_t rest = at;
        at = 0;
        for (int64_t a = int64_t(def.size()) - 1; a >= 0; a--) {
          at += rest % def[a] * ystride[a];
          rest /= def[a];
        }
      }
      yd[at] = xd[i];
    }
  });
}

// ---- Resize / Upsample ---------------------------------------------------------------------

struct ResizeSpec {
  std::string mode, ctm, nearest_mode;
  bool antialias = false, exclude_outside = false;
  double cubic_a = -0.75, extrapolation = 0;
};

// Sampling taps of one axis: output position o reads idx[o*taps + t] with weight w[o*taps + t].
struct ResizeAxis {
  int64_t in = 1, out = 1;
  int taps = 1;
  std::vector<int64_t> idx;  // clamped into [0, in): the reference pads the input with its edge values
  std::vector<double> w;
  std::vector<uint8_t>
      outside;  // tf_crop_and_resize maps the position outside the input: extrapolation_value
  bool identity = false;
};

double keys_cubic(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Source coordinate of output position o. `length` is the resized length as the ONNX reference uses it:
// in * scale, which is fractional when scales are given.
double resize_coord(const ResizeSpec& sp, int64_t o, int64_t in, int64_t out, double scale, double length,
                    double roi_lo, double roi_hi) {
  const std::string& m = sp.ctm;
  double xr = double(o), len_in = double(in);
  if (m == "asymmetric") return xr / scale;
  if (m == "half_pixel") return (xr + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return out > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
  if (m == "tf_half_pixel_for_nn") return (xr + 0.5) / scale;
  if (m == "align_corners") return length == 1 ? 0.0 : xr * (len_in - 1) / (length - 1);
  if (m == "half_pixel_symmetric") {
    double offset = len_in / 2 * (1 - double(out) / length);
    return offset + (xr + 0.5) / scale - 0.5;
  }
  // tf_crop_and_resize
  if (length == 1) return (roi_hi - roi_lo) * (len_in - 1) / 2 + roi_lo * (len_in - 1);
  return xr * (roi_hi - roi_lo) * (len_in - 1) / (length - 1) + roi_lo * (len_in - 1);
}

int64_t nearest_index(const ResizeSpec& sp, double x) {
  double fl = std::floor(x), r = x - fl;
  if (r == 0) return int64_t(fl);
  const std::string& m = sp.nearest_mode;
  bool up = m == "ceil" || (m == "round_prefer_ceil" && r >= 0.5) || (m == "round_prefer_floor" && r > 0.5);
  return int64_t(fl) + (up ? 1 : 0);
}

ResizeAxis resize_axis(const ResizeSpec& sp, int64_t in, int64_t out, double scale, double length,
                       double roi_lo, double roi_hi) {
  ResizeAxis ax;
  ax.in = in;
  ax.out = out;
  // Like the reference, an unscaled axis is left alone whatever the mode (tf_half_pixel_for_nn would shift
  // it).
  if (scale == 1 && in == out && (sp.ctm != "tf_crop_and_resize" || (roi_lo == 0 && roi_hi == 1))) {
    for (int64_t o = 0; o < out; o++) ax.idx.push_back(o);
    ax.w.assign(out, 1.0);
    ax.outside.assign(out, 0);
    ax.identity = true;
    return ax;
  }
  bool nearest = sp.mode == "nearest", cubic = sp.mode == "cubic";
  // Antialiasing stretches the filter by 1/scale when downsampling; the taps follow the ONNX reference.
  double fscale = !nearest && sp.antialias ? std::min(scale, 1.0) : 1.0;
  int64_t first = 0;
  if (!nearest) {
    first = int64_t(std::floor(-(cubic ? 2.0 : 1.0) / fscale)) + 1;
    ax.taps = int(2 - 2 * first);
  }
  int64_t k = ax.taps;
  ax.idx.assign(out * k, 0);
  ax.w.assign(out * k, 0.0);
  ax.outside.assign(out, 0);
  for (int64_t o = 0; o < out; o++) {
    double x = resize_coord(sp, o, in, out, scale, length, roi_lo, roi_hi);
    if (sp.ctm == "tf_crop_and_resize" && !(x >= 0 && x <= double(in - 1))) {
      ax.outside[o] = 1;
      continue;
    }
    int64_t* id = &ax.idx[o * k];
    double* w = &ax.w[o * k];
    if (nearest) {
      id[0] = std::clamp<int64_t>(nearest_index(sp, x), 0, in - 1);
      w[0] = 1;
      continue;
    }
    // The reference's taps lean left: an integral x is ratio 1 past x - 1.
    double fl = std::floor(x);
    double ratio = x == fl ? 1.0 : x - fl;
    int64_t base = int64_t(fl) - (x == fl ? 1 : 0) + first;
    double sum = 0;
    for (int64_t t = 0; t < k; t++) {
      double arg = (double(first + t) - ratio) * fscale;
      double wt = cubic ? keys_cubic(arg, sp.cubic_a) : std::max(0.0, 1 - std::abs(arg));
      int64_t j = base + t;
      if (sp.exclude_outside && (j < 0 || j >= in)) wt = 0;
      id[t] = std::clamp<int64_t>(j, 0, in - 1);
      w[t] = wt;
      sum += wt;
    }
    if ((sp.antialias || sp.exclude_outside) && sum != 0)
      for (int64_t t = 0; t < k; t++) w[t] /= sum;
  }
  return ax;
}

std::vector<ResizeAxis> resize_plan(KernelContext& ctx, ResizeSpec& sp) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  const Shape& ys = ctx.output(0).shape();
  int64_t rank = x.rank();
  sp.mode = n.attr_string("mode", "nearest");
  sp.ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
  sp.nearest_mode = n.attr_string("nearest_mode", "round_prefer_floor");
  sp.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  sp.exclude_outside = n.attr_int("exclude_outside", 0) == 1;
  sp.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  sp.antialias = n.attr_int("antialias", 0) == 1;
  std::vector<int64_t> axes;
  if (n.has_attr("axes"))
    for (int64_t a : n.attr_ints("axes")) axes.push_back(normalize_axis(a, rank));
  else
    for (int64_t a = 0; a < rank; a++) axes.push_back(a);

  std::vector<double> scale(rank, 1.0), length(rank), lo(rank, 0.0), hi(rank, 1.0);
  for (int64_t a = 0; a < rank; a++) length[a] = double(x.dim(int(a)));
  std::vector<double> given;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) given = ctx.input(2).to_double_vector();
  if (!given.empty()) {
    for (size_t i = 0; i < axes.size(); i++) {
      scale[axes[i]] = given[i];
      length[axes[i]] = given[i] * double(x.dim(int(axes[i])));
    }
  } else {
    std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
    std::vector<int64_t> sizes = ctx.input(3).to_int64_vector();
    double common = policy == "not_larger" ? INFINITY : 0;
    for (size_t i = 0; i < axes.size(); i++) {
      double r = double(sizes[i]) / double(x.dim(int(axes[i])));
      common = policy == "not_larger" ? std::min(common, r) : std::max(common, r);
    }
    for (size_t i = 0; i < axes.size(); i++) {
      int64_t a = axes[i];
      scale[a] = policy == "stretch" ? double(ys[a]) / double(x.dim(int(a))) : common;
      length[a] = policy == "stretch" ? double(ys[a]) : common * double(x.dim(int(a)));
    }
  }
  if (sp.ctm == "tf_crop_and_resize") {
    std::vector<double> roi = ctx.input(1).to_double_vector();
    for (size_t i = 0; i < axes.size(); i++) {
      lo[axes[i]] = roi[i];
      hi[axes[i]] = roi[i + axes.size()];
    }
  }
  std::vector<ResizeAxis> plan;
  for (int64_t a = 0; a < rank; a++)
    plan.push_back(resize_axis(sp, x.dim(int(a)), ys[a], scale[a], length[a], lo[a], hi[a]));
  return plan;
}

// Nearest: a gather along every axis, exact for every type.
template <class T>
void resize_gather(KernelContext& ctx, const std::vector<ResizeAxis>& plan, T extrap) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  int64_t rank = x.rank();
  std::vector<int64_t> stride = contiguous_strides(x.shape());
  const ResizeAxis& last = plan[rank - 1];
  const int64_t* li = last.idx.data();
  bool last_outside = std::find(last.outside.begin(), last.outside.end(), 1) != last.outside.end();
  int64_t w = last.out, rows = y.numel() / w;
  ctx.pool.parallel_for(
      rows,
      [&](int64_t b, int64_t e) {
        std::vector<int64_t> oi(rank);
        int64_t prev = -1;  // source offset of row r - 1, -1 for none
        for (int64_t r = b; r < e; r++) {
          row_index(r, y.shape(), oi);
          int64_t base = 0;
          bool outside = false;
          for (int64_t a = 0; a + 1 < rank; a++) {
            outside = outside || plan[a].outside[oi[a]];
            base += plan[a].idx[oi[a]] * stride[a];
          }
          T* yr = yd + r * w;
          if (outside) {
            std::fill(yr, yr + w, extrap);
            prev = -1;
          } else if (base == prev) {  // upsampling repeats rows
            std::memcpy(yr, yr - w, w * sizeof(T));
          } else {
            const T* xr = xd + base;
            if (last_outside)
              for (int64_t o = 0; o < w; o++) yr[o] = last.outside[o] ? extrap : xr[li[o]];
            else
              for (int64_t o = 0; o < w; o++) yr[o] = xr[li[o]];
            prev = base;
          }
        }
      },
      grain_for(w));
}

// Taps of one axis in the compute type; an identity axis becomes one tap of weight 1.
template <class T>
struct AxisTaps {
  int k = 1;
  std::vector<int64_t> idx;
  std::vector<T> w;
  const std::vector<uint8_t>* outside;
  explicit AxisTaps(const ResizeAxis& ax) : outside(&ax.outside) {
    if (ax.identity) {
      for (int64_t o = 0; o < ax.out; o++) idx.push_back(o);
      w.assign(ax.out, T(1));
      return;
    }
    k = ax.taps;
    idx = ax.idx;
    for (double v : ax.w) w.push_back(T(v));
  }
};

// Linear and cubic when only the last two axes change (NCHW images): every output pixel sums its taps.
template <class T>
void resize_2d(KernelContext& ctx, const std::vector<ResizeAxis>& plan, T extrap) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t rank = x.rank();
  ResizeAxis unit;
  unit.idx = {0};
  unit.w = {1.0};
  unit.outside = {0};
  unit.identity = true;
  const ResizeAxis& ay = rank >= 2 ? plan[rank - 2] : unit;
  AxisTaps<T> ty(ay), tx(plan[rank - 1]);
  int64_t hin = ay.in, win = plan[rank - 1].in, hout = ay.out, wout = plan[rank - 1].out;
  int64_t planes = x.numel() / (hin * win);
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  ctx.pool.parallel_for(
      planes * hout,
      [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; r++) {
          int64_t pl = r / hout, oy = r % hout;
          T* yr = yd + r * wout;
          if ((*ty.outside)[oy]) {
            std::fill(yr, yr + wout, extrap);
            continue;
          }
          const T* xp = xd + pl * hin * win;
          if (ty.k == 2 && tx.k == 2) {
            const T* r0 = xp + ty.idx[2 * oy] * win;
            const T* r1 = xp + ty.idx[2 * oy + 1] * win;
            T wy0 = ty.w[2 * oy], wy1 = ty.w[2 * oy + 1];
            for (int64_t ox = 0; ox < wout; ox++) {
              int64_t x0 = tx.idx[2 * ox], x1 = tx.idx[2 * ox + 1];
              T wx0 = tx.w[2 * ox], wx1 = tx.w[2 * ox + 1];
              T v = wy0 * (wx0 * r0[x0] + wx1 * r0[x1]) + wy1 * (wx0 * r1[x0] + wx1 * r1[x1]);
              yr[ox] = (*tx.outside)[ox] ? extrap : v;
            }
            continue;
          }
          for (int64_t ox = 0; ox < wout; ox++) {
            if ((*tx.outside)[ox]) {
              yr[ox] = extrap;
              continue;
            }
            T v = 0;
            for (int i = 0; i < ty.k; i++) {
              const T* row = xp + ty.idx[oy * ty.k + i] * win;
              T s = 0;
              for (int j = 0; j < tx.k; j++) s += tx.w[ox * tx.k + j] * row[tx.idx[ox * tx.k + j]];
              v += ty.w[oy * ty.k + i] * s;
            }
            yr[ox] = v;
          }
        }
      },
      grain_for(wout * ty.k * tx.k));
}

// Any rank and type: one 1-D pass per resized axis in double, as the ONNX reference computes.
template <class T>
void resize_separable(KernelContext& ctx, const std::vector<ResizeAxis>& plan, double extrap) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  Shape shape = x.shape();
  const T* xd = x.data<T>();
  std::vector<double> cur(xd, xd + x.numel()), next;
  for (size_t a = 0; a < plan.size(); a++) {
    const ResizeAxis& ax = plan[a];
    if (ax.identity) continue;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < a; i++) outer *= shape[i];
    for (size_t i = a + 1; i < shape.size(); i++) inner *= shape[i];
    next.assign(outer * ax.out * inner, 0.0);
    ctx.pool.parallel_for(
        outer * ax.out,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; r++) {
            int64_t o = r / ax.out, j = r % ax.out;
            double* dst = &next[r * inner];
            if (ax.outside[j]) {
              std::fill(dst, dst + inner, extrap);
              continue;
            }
            for (int t = 0; t < ax.taps; t++) {
              double wt = ax.w[j * ax.taps + t];
              if (wt == 0) continue;
              const double* src = &cur[(o * ax.in + ax.idx[j * ax.taps + t]) * inner];
              for (int64_t i = 0; i < inner; i++) dst[i] += wt * src[i];
            }
          }
        },
        grain_for(inner * ax.taps));
    cur.swap(next);
    shape[a] = ax.out;
  }
  T* yd = y.data<T>();
  for (int64_t i = 0; i < y.numel(); i++) yd[i] = saturate<T>(cur[i]);
}

void resize_kernel(KernelContext& ctx) {
  if (ctx.output(0).numel() == 0) return;
  ResizeSpec sp;
  std::vector<ResizeAxis> plan = resize_plan(ctx, sp);
  const Tensor& x = ctx.input(0);
  int64_t rank = x.rank();
  if (sp.mode == "nearest") {
    dispatch_numeric(x.dtype(),
                     [&]<class T>() { resize_gather<T>(ctx, plan, saturate<T>(sp.extrapolation)); });
    return;
  }
  bool image = true;
  for (int64_t a = 0; a + 2 < rank; a++) image = image && plan[a].identity;
  if (image && (x.dtype() == DType::f32 || x.dtype() == DType::f64)) {
    dispatch_float(x.dtype(), [&]<class T>() { resize_2d<T>(ctx, plan, T(sp.extrapolation)); });
    return;
  }
  dispatch_numeric(x.dtype(), [&]<class T>() { resize_separable<T>(ctx, plan, sp.extrapolation); });
}

// ---- GridSample ----------------------------------------------------------------------------

// Reflects x into [lo, hi] as often as needed (PyTorch's reflect_coordinates).
template <class G>
G reflect(G x, G lo, G hi) {
  G range = hi - lo;
  if (range <= 0 || !std::isfinite(x)) return lo;
  G m = std::fmod(std::abs(x - lo), 2 * range);
  return m <= range ? lo + m : hi - (m - range);
}

}  // namespace

template <class G>
void grid_taps(G gx, G gy, int64_t h, int64_t w, int mode, GridPad pad, bool align, GridTaps<G>& t) {
  auto denorm = [&](G v, int64_t len) {
    return align ? (v + 1) / 2 * G(len - 1) : ((v + 1) * G(len) - 1) / 2;
  };
  G x = denorm(gx, w), y = denorm(gy, h);
  if (mode == 0) {
    x = std::nearbyint(x);
    y = std::nearbyint(y);
  }
  G xlo = align ? G(0) : G(-0.5), xhi = align ? G(w - 1) : G(w) - G(0.5);
  G ylo = align ? G(0) : G(-0.5), yhi = align ? G(h - 1) : G(h) - G(0.5);
  // Bicubic pads only its taps, as PyTorch and ONNX Runtime do (the ONNX reference also moves the point).
  bool move_point = mode != 2;
  if (move_point && pad == GridPad::border) {
    if (x < xlo || x > xhi) x = std::clamp(x, G(0), G(w - 1));
    if (y < ylo || y > yhi) y = std::clamp(y, G(0), G(h - 1));
  } else if (move_point && pad == GridPad::reflection) {
    x = reflect(x, xlo, xhi);
    y = reflect(y, ylo, yhi);
  }
  // Keeps NaN and huge values away from integer conversion.
  auto bound = [](G v) { return v >= G(-1e15) ? std::min(v, G(1e15)) : G(-1e15); };
  x = bound(x);
  y = bound(y);
  // Where tap i of an axis reads; -1 when zeros padding drops it.
  auto place = [&](int64_t i, int64_t len, G lo, G hi) -> int64_t {
    if (i >= 0 && i < len) return i;
    if (pad == GridPad::zeros) return -1;
    if (pad == GridPad::border) return std::clamp<int64_t>(i, 0, len - 1);
    return std::clamp<int64_t>(int64_t(reflect(G(i), lo, hi)), 0, len - 1);
  };
  int64_t xs[4], ys[4];
  G wx[4], wy[4];
  int k;
  if (mode == 0) {
    k = 1;
    xs[0] = place(int64_t(x), w, xlo, xhi);
    ys[0] = place(int64_t(y), h, ylo, yhi);
    wx[0] = wy[0] = 1;
  } else {
    G fx = std::floor(x), fy = std::floor(y);
    G rx = x - fx, ry = y - fy;
    if (mode == 1) {
      k = 2;
      wx[0] = 1 - rx;
      wx[1] = rx;
      wy[0] = 1 - ry;
      wy[1] = ry;
    } else {
      k = 4;
      for (int i = 0; i < 4; i++) {
        wx[i] = G(keys_cubic(double(i - 1) - double(rx), -0.75));
        wy[i] = G(keys_cubic(double(i - 1) - double(ry), -0.75));
      }
    }
    int64_t x0 = int64_t(fx) - (k == 4 ? 1 : 0), y0 = int64_t(fy) - (k == 4 ? 1 : 0);
    for (int i = 0; i < k; i++) {
      xs[i] = place(x0 + i, w, xlo, xhi);
      ys[i] = place(y0 + i, h, ylo, yhi);
    }
  }
  t.count = 0;
  for (int i = 0; i < k; i++) {
    if (ys[i] < 0) continue;
    for (int j = 0; j < k; j++) {
      if (xs[j] < 0) continue;
      t.idx[t.count] = ys[i] * w + xs[j];
      t.w[t.count++] = wy[i] * wx[j];
    }
  }
}

template void grid_taps<float>(float, float, int64_t, int64_t, int, GridPad, bool, GridTaps<float>&);
template void grid_taps<double>(double, double, int64_t, int64_t, int, GridPad, bool, GridTaps<double>&);

namespace {

void grid_sample_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  Tensor& y = ctx.output(0);
  std::string m = n.attr_string("mode", "bilinear");
  int mode = m == "nearest" ? 0 : (m == "bilinear" || m == "linear") ? 1 : 2;
  std::string pm = n.attr_string("padding_mode", "zeros");
  GridPad pad = pm == "border" ? GridPad::border : pm == "reflection" ? GridPad::reflection : GridPad::zeros;
  bool align = n.attr_int("align_corners", 0) == 1;
  int64_t nb = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t points = y.dim(2) * y.dim(3);
  if (y.numel() == 0) return;
  if (h == 0 || w == 0) {
    std::memset(y.raw(), 0, y.nbytes());
    if (pad != GridPad::zeros) fail("cannot sample an empty image with padding_mode '", pm, "'");
    return;
  }
  // Points are taken in blocks: taps once per block, then every channel reads them from cache.
  constexpr int64_t kBlock = 64;
  int64_t blocks = ceil_div(points, kBlock);
  dispatch_float(x.dtype(), [&]<class T>() {
    dispatch_float(grid.dtype(), [&]<class G>() {
      const T* xd = x.data<T>();
      const G* gd = grid.data<G>();
      T* yd = y.data<T>();
      ctx.pool.parallel_for(
          nb * blocks,
          [&](int64_t b, int64_t e) {
            std::vector<GridTaps<G>> taps(kBlock);
            for (int64_t task = b; task < e; task++) {
              int64_t bn = task / blocks, p0 = task % blocks * kBlock, p1 = std::min(points, p0 + kBlock);
              for (int64_t p = p0; p < p1; p++) {
                const G* g = gd + (bn * points + p) * 2;
                if constexpr (std::is_same_v<G, float>)
                  if (mode == 1 && pad == GridPad::zeros) {
                    bilinear_zeros_taps(g[0], g[1], h, w, align, taps[p - p0]);
                    continue;
                  }
                grid_taps<G>(g[0], g[1], h, w, mode, pad, align, taps[p - p0]);
              }
              for (int64_t ch = 0; ch < c; ch++) {
                const T* xp = xd + (bn * c + ch) * h * w;
                T* yp = yd + (bn * c + ch) * points;
                for (int64_t p = p0; p < p1; p++) {
                  const GridTaps<G>& t = taps[p - p0];
                  if (t.count == 4) {  // bilinear inside the image
                    yp[p] = T(t.w[0]) * xp[t.idx[0]] + T(t.w[1]) * xp[t.idx[1]] + T(t.w[2]) * xp[t.idx[2]] +
                            T(t.w[3]) * xp[t.idx[3]];
                    continue;
                  }
                  T v = 0;
                  for (int i = 0; i < t.count; i++) v += T(t.w[i]) * xp[t.idx[i]];
                  yp[p] = v;
                }
              }
            }
          },
          grain_for(kBlock * c * 4));
    });
  });
}

// ---- RoiAlign ------------------------------------------------------------------------------

// Follows the ONNX reference (and ONNX Runtime): bilinear samples on a regular grid in each bin, then the
// average, or for mode max the largest weighted corner value.
void roi_align_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const int64_t* bidx = ctx.input(2).data<int64_t>();
  Tensor& y = ctx.output(0);
  int64_t nb = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t nrois = rois.dim(0), oh = y.dim(2), ow = y.dim(3);
  bool max_mode = n.attr_string("mode", "avg") == "max";
  bool half_pixel = n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  int64_t sampling = n.attr_int("sampling_ratio", 0);
  double spatial_scale = n.attr_float("spatial_scale", 1.0f);
  for (int64_t r = 0; r < nrois; r++)
    if (bidx[r] < 0 || bidx[r] >= nb) fail("batch_indices[", r, "] = ", bidx[r], " is outside [0, ", nb, ")");
  if (y.numel() == 0) return;
  if (h == 0 || w == 0) {
    std::memset(y.raw(), 0, y.nbytes());
    return;
  }
  dispatch_float(x.dtype(), [&]<class T>() {
    const T* xd = x.data<T>();
    const T* rd = rois.data<T>();
    T* yd = y.data<T>();
    // Each roi's box and sampling grid, validated before the parallel part.
    struct Box {
      T x0, y0, bin_h, bin_w;
      int64_t gh, gw;
    };
    std::vector<Box> boxes(nrois);
    for (int64_t r = 0; r < nrois; r++) {
      Box& bx = boxes[r];
      T offset = half_pixel ? T(0.5) : T(0);
      bx.x0 = rd[r * 4] * T(spatial_scale) - offset;
      bx.y0 = rd[r * 4 + 1] * T(spatial_scale) - offset;
      T rw = rd[r * 4 + 2] * T(spatial_scale) - offset - bx.x0,
        rh = rd[r * 4 + 3] * T(spatial_scale) - offset - bx.y0;
      if (!half_pixel) {
        rw = std::max(rw, T(1));
        rh = std::max(rh, T(1));
      }
      bx.bin_h = rh / T(oh);
      bx.bin_w = rw / T(ow);
      // Adaptive grids: ceil(bin size) samples per axis; empty for degenerate or non-finite boxes.
      double gh = sampling > 0        ? double(sampling)
                  : std::isfinite(rh) ? std::max(0.0, std::ceil(double(rh / T(oh))))
                                      : 0;
      double gw = sampling > 0        ? double(sampling)
                  : std::isfinite(rw) ? std::max(0.0, std::ceil(double(rw / T(ow))))
                                      : 0;
      if (gh * gw * double(oh * ow) > double(1 << 26))
        fail("roi ", r, " needs ", gh, "x", gw, " samples per bin; it is far larger than the image");
      bx.gh = int64_t(gh);
      bx.gw = int64_t(gw);
    }
    ctx.pool.parallel_for(
        nrois,
        [&](int64_t b, int64_t e) {
          struct Sample {
            int64_t pos[4];
            T w[4];
          };
          std::vector<Sample> samples;
          for (int64_t r = b; r < e; r++) {
            auto [x0, y0, bin_h, bin_w, gh, gw] = boxes[r];
            T count = T(std::max<int64_t>(gh * gw, 1));
            samples.clear();
            for (int64_t ph = 0; ph < oh; ph++)
              for (int64_t pw = 0; pw < ow; pw++)
                for (int64_t iy = 0; iy < gh; iy++) {
                  T yy = y0 + T(ph) * bin_h + (T(iy) + T(0.5)) * bin_h / T(gh);
                  for (int64_t ix = 0; ix < gw; ix++) {
                    T xx = x0 + T(pw) * bin_w + (T(ix) + T(0.5)) * bin_w / T(gw);
                    Sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
                    if (yy >= -1 && yy <= T(h) && xx >= -1 && xx <= T(w)) {
                      T sy = std::max(yy, T(0)), sx = std::max(xx, T(0));
                      int64_t ylo = int64_t(sy), xlo = int64_t(sx), yhi, xhi;
                      if (ylo >= h - 1) {
                        yhi = ylo = h - 1;
                        sy = T(ylo);
                      } else {
                        yhi = ylo + 1;
                      }
                      if (xlo >= w - 1) {
                        xhi = xlo = w - 1;
                        sx = T(xlo);
                      } else {
                        xhi = xlo + 1;
                      }
                      T ly = sy - T(ylo), lx = sx - T(xlo), hy = 1 - ly, hx = 1 - lx;
                      s = {{ylo * w + xlo, ylo * w + xhi, yhi * w + xlo, yhi * w + xhi},
                           {hy * hx, hy * lx, ly * hx, ly * lx}};
                    }
                    samples.push_back(s);
                  }
                }
            for (int64_t ch = 0; ch < c; ch++) {
              const T* xp = xd + (bidx[r] * c + ch) * h * w;
              T* yp = yd + (r * c + ch) * oh * ow;
              const Sample* s = samples.data();
              for (int64_t bin = 0; bin < oh * ow; bin++) {
                T v = 0;
                for (int64_t i = 0; i < gh * gw; i++, s++) {
                  if (max_mode) {
                    T m = std::max(std::max(s->w[0] * xp[s->pos[0]], s->w[1] * xp[s->pos[1]]),
                                   std::max(s->w[2] * xp[s->pos[2]], s->w[3] * xp[s->pos[3]]));
                    v = i == 0 ? m : std::max(v, m);
                  } else {
                    v += s->w[0] * xp[s->pos[0]] + s->w[1] * xp[s->pos[1]] + s->w[2] * xp[s->pos[2]] +
                         s->w[3] * xp[s->pos[3]];
                  }
                }
                yp[bin] = max_mode ? v : v / count;
              }
            }
          }
        },
        1);
  });
}

// ---- Pad -----------------------------------------------------------------------------------

// The pad value's bits: the constant_value input, of the data's type.
template <class U>
U pad_constant(KernelContext& ctx) {
  U bits = 0;
  if (ctx.has_input(2)) std::memcpy(&bits, ctx.input(2).raw(), sizeof(U));
  return bits;
}

void pad_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t rank = x.rank();
  std::string mode = n.attr_string("mode", "constant");
  std::vector<int64_t> pads = ctx.input(1).to_int64_vector();
  std::vector<int64_t> pb =
      pad_begins(pads, ctx.has_input(3) ? ctx.input(3).to_int64_vector() : std::vector<int64_t>(), rank);
  if (y.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(y.raw(), x.raw(), y.nbytes());
    return;
  }
  // Source index of each output position per axis; -1 reads the constant. Negative pads crop first and
  // the modes then work on what is left.
  std::vector<std::vector<int64_t>> src(rank);
  for (int64_t a = 0; a < rank; a++) {
    int64_t in = x.dim(int(a)), out = y.dim(int(a));
    int64_t lo = std::max<int64_t>(0, -pb[a]), hi = std::min(in, out - pb[a]), len = hi - lo;
    for (int64_t o = 0; o < out; o++) {
      int64_t i = o - pb[a], s = -1;
      if (i >= lo && i < hi) {
        s = i;
      } else if (mode == "edge") {
        s = std::clamp(i, lo, hi - 1);
      } else if (mode == "wrap") {
        s = lo + ((i - lo) % len + len) % len;
      } else if (mode == "reflect") {
        int64_t period = 2 * (len - 1), m = period ? ((i - lo) % period + period) % period : 0;
        s = lo + (m >= len ? period - m : m);
      }
      src[a].push_back(s);
    }
  }
  std::vector<int64_t> stride = contiguous_strides(x.shape());
  int64_t w = y.dim(-1), rows = y.numel() / w;
  // The middle of each output row is one contiguous copy.
  int64_t c0 = std::clamp<int64_t>(pb[rank - 1], 0, w);
  int64_t c1 = std::clamp<int64_t>(x.dim(-1) + pb[rank - 1], c0, w);
  dispatch_bytes(dtype_size(x.dtype()), [&]<class U>() {
    U cv = pad_constant<U>(ctx);
    const U* xd = static_cast<const U*>(x.raw());
    U* yd = static_cast<U*>(y.raw());
    const std::vector<int64_t>& sl = src[rank - 1];
    ctx.pool.parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
          std::vector<int64_t> oi(rank);
          for (int64_t r = b; r < e; r++) {
            row_index(r, y.shape(), oi);
            int64_t base = 0;
            bool constant = false;
            for (int64_t a = 0; a + 1 < rank; a++) {
              int64_t s = src[a][oi[a]];
              constant = constant || s < 0;
              base += s * stride[a];
            }
            U* yr = yd + r * w;
            if (constant) {
              std::fill(yr, yr + w, cv);
              continue;
            }
            const U* xr = xd + base;
            for (int64_t o = 0; o < c0; o++) yr[o] = sl[o] < 0 ? cv : xr[sl[o]];
            std::memcpy(yr + c0, xr + (c0 - pb[rank - 1]), (c1 - c0) * sizeof(U));
            for (int64_t o = c1; o < w; o++) yr[o] = sl[o] < 0 ? cv : xr[sl[o]];
          }
        },
        grain_for(w));
  });
}

// ---- DepthToSpace, SpaceToDepth ------------------------------------------------------------

void depth_to_space_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t bs = ctx.node.attr_int("blocksize", 1);
  bool crd = ctx.node.attr_string("mode", "DCR") == "CRD";
  int64_t c = x.dim(1), h = x.dim(2), w = x.dim(3), oc = y.dim(1), oh = y.dim(2), ow = y.dim(3);
  dispatch_bytes(dtype_size(x.dtype()), [&]<class U>() {
    const U* xd = static_cast<const U*>(x.raw());
    U* yd = static_cast<U*>(y.raw());
    // One task per output row (n, oc, oh): block row i of input row oh / bs.
    ctx.pool.parallel_for(
        y.dim(0) * oc * oh,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; r++) {
            int64_t yrow = r % oh, ch = r / oh % oc, bn = r / (oh * oc);
            int64_t hh = yrow / bs, i = yrow % bs;
            U* yr = yd + r * ow;
            for (int64_t j = 0; j < bs; j++) {
              int64_t ic = crd ? ch * bs * bs + i * bs + j : (i * bs + j) * oc + ch;
              const U* xr = xd + ((bn * c + ic) * h + hh) * w;
              for (int64_t ww = 0; ww < w; ww++) yr[ww * bs + j] = xr[ww];
            }
          }
        },
        grain_for(ow));
  });
}

void space_to_depth_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t bs = ctx.node.attr_int("blocksize", 1);
  bool crd = ctx.node.attr_string("mode", "DCR") == "CRD";
  int64_t c = x.dim(1), h = x.dim(2), w = x.dim(3), oc = y.dim(1), oh = y.dim(2), ow = y.dim(3);
  dispatch_bytes(dtype_size(x.dtype()), [&]<class U>() {
    const U* xd = static_cast<const U*>(x.raw());
    U* yd = static_cast<U*>(y.raw());
    // One task per output row (n, oc, oh): a strided read of input row oh * bs + i.
    ctx.pool.parallel_for(
        y.dim(0) * oc * oh,
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; r++) {
            int64_t yrow = r % oh, ch = r / oh % oc, bn = r / (oh * oc);
            int64_t blk = crd ? ch % (bs * bs) : ch / c, ic = crd ? ch / (bs * bs) : ch % c;
            int64_t i = blk / bs, j = blk % bs;
            const U* xr = xd + ((bn * c + ic) * h + yrow * bs + i) * w + j;
            U* yr = yd + r * ow;
            for (int64_t ww = 0; ww < ow; ww++) yr[ww] = xr[ww * bs];
          }
        },
        grain_for(ow));
  });
}

}  // namespace

void register_spatial_kernels(CpuKernelTable& t) {
  t["MaxPool"] = {pool_kernel<PoolKind::max>};
  t["com.microsoft.NhwcMaxPool"] = {nhwc_max_pool_kernel};
  t["AveragePool"] = {pool_kernel<PoolKind::avg>};
  t["LpPool"] = {pool_kernel<PoolKind::lp>};
  t["GlobalMaxPool"] = {global_pool_kernel<PoolKind::max>};
  t["GlobalAveragePool"] = {global_pool_kernel<PoolKind::avg>};
  t["GlobalLpPool"] = {global_pool_kernel<PoolKind::lp>};
  t["MaxUnpool"] = {max_unpool_kernel, true};
  t["Resize"] = {resize_kernel};
  t["Upsample"] = {resize_kernel};  // rewritten to Resize by canonicalize(); registered for support checks
  t["GridSample"] = {grid_sample_kernel};
  t["RoiAlign"] = {roi_align_kernel};
  t["Pad"] = {pad_kernel, true};
  t["DepthToSpace"] = {depth_to_space_kernel, true};
  t["SpaceToDepth"] = {space_to_depth_kernel, true};
}

}  // namespace vlrt

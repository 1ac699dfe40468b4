// CPU kernels of the elementwise family. All broadcasting ops share one engine: equal
// shapes and scalar operands run as one flat row; anything else is collapsed to the
// fewest axes and walked as rows along the innermost one, so a bias [C] against
// [N,L,C] becomes N*L contiguous rows of C. Large tensors are split across ctx.pool.
// float32 rows of the hot ops run the vector loops of the CPU's instruction set
// (row_kernels.h); the scalar forms here are the plain level and the reference.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/row_kernels.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Elements per parallel task: cheap arithmetic, and transcendental functions.
constexpr int64_t kGrain = 1 << 15;
constexpr int64_t kGrainMath = 1 << 12;

template <class T>
constexpr bool is_negative(T x) {
  if constexpr (std::is_unsigned_v<T>) {
    return false;
  } else {
    return x < T(0);
  }
}

template <class T>
constexpr bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// Integer arithmetic wraps (two's complement) instead of overflowing into UB; the
// unsigned type is at least 32 bits so that uint16 * uint16 does not promote to int.
template <class T>
using Wrap = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <class T>
T negate(T x) {
  if constexpr (std::is_integral_v<T>) {
    return T(Wrap<T>(0) - Wrap<T>(x));
  } else {
    return -x;
  }
}

// Float to integer as C casts (and so NumPy) do it on x86: truncate toward zero; types up
// to 32 bits except uint32 convert through int32, the rest through int64, and a value
// out of that range becomes its minimum. Spelled out because C++'s out-of-range
// conversion is undefined.
template <class S>
int64_t float_to_int64(S s) {
  bool ok = s >= S(-9223372036854775808.0) && s < S(9223372036854775808.0);
  return ok ? int64_t(s) : std::numeric_limits<int64_t>::min();
}

template <class D, class S>
D float_to_int(S s) {
  if constexpr (sizeof(D) < 4 || std::is_same_v<D, int32_t>) {
    bool ok = s >= S(-2147483648.0) && s < S(2147483648.0);
    return D(ok ? int32_t(s) : std::numeric_limits<int32_t>::min());
  } else if constexpr (std::is_same_v<D, uint64_t>) {
    if (s >= S(9223372036854775808.0) && s < S(18446744073709551616.0)) return uint64_t(s);
    return D(float_to_int64(s));
  } else {
    return D(float_to_int64(s));
  }
}

// A double result stored as T (Shrink, Pow on integers).
template <class T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return T(v);
  } else {
    return float_to_int<T>(v);
  }
}

// ---------------------------------------------------------------------------------
// Broadcasting engine

// The output of a broadcasting op as rows along its innermost axis. Size-1 axes are
// dropped and neighbouring axes merged wherever every operand is contiguous across
// them, so within a row each operand advances by its inner stride (1, or 0 when
// broadcast).
template <size_t K>
class Broadcast {
 public:
  Broadcast(const Shape& out, const std::array<const Shape*, K>& in) {
    std::array<std::vector<int64_t>, K> st;
    for (size_t k = 0; k < K; k++) st[k] = broadcast_strides(*in[k], out);
    for (size_t d = 0; d < out.size(); d++) {
      if (out[d] == 1) continue;
      bool merge = !dims_.empty();
      for (size_t k = 0; k < K && merge; k++) merge = strides_[k].back() == st[k][d] * out[d];
      if (merge) {
        dims_.back() *= out[d];
        for (size_t k = 0; k < K; k++) strides_[k].back() = st[k][d];
      } else {
        dims_.push_back(out[d]);
        for (size_t k = 0; k < K; k++) strides_[k].push_back(st[k][d]);
      }
    }
    if (dims_.empty()) {
      dims_.push_back(1);
      for (size_t k = 0; k < K; k++) strides_[k].push_back(0);
    }
  }

  int64_t inner_stride(size_t k) const { return strides_[k].back(); }
  size_t rank() const { return dims_.size(); }
  int64_t dim(size_t d) const { return dims_[d]; }
  int64_t stride(size_t k, size_t d) const { return strides_[k][d]; }

  // Calls run(offsets, pos, n) for the row pieces covering output positions [begin, end):
  // operand k's first element is at offsets[k], the output's at pos.
  template <class Run>
  void for_rows(int64_t begin, int64_t end, const Run& run) const {
    if (begin >= end) return;
    const int r = int(dims_.size());
    std::vector<int64_t> idx(r);
    std::array<int64_t, K> off{};
    int64_t rem = begin;
    for (int d = r - 1; d >= 0; d--) {
      idx[d] = rem % dims_[d];
      rem /= dims_[d];
      for (size_t k = 0; k < K; k++) off[k] += idx[d] * strides_[k][d];
    }
    for (int64_t pos = begin; pos < end;) {
      int64_t n = std::min(dims_[r - 1] - idx[r - 1], end - pos);
      run(off, pos, n);
      pos += n;
      idx[r - 1] += n;
      for (size_t k = 0; k < K; k++) off[k] += n * strides_[k][r - 1];
      for (int d = r - 1; d > 0 && idx[d] == dims_[d]; d--) {
        idx[d] = 0;
        idx[d - 1]++;
        for (size_t k = 0; k < K; k++) off[k] += strides_[k][d - 1] - dims_[d] * strides_[k][d];
      }
    }
  }

 private:
  Shape dims_;
  std::array<std::vector<int64_t>, K> strides_;
};

// o[i] = op(a[i * sa], b[i * sb]) for i < n.
template <class A, class B, class R, class Op>
void binary_row(const A* a, int64_t sa, const B* b, int64_t sb, R* o, int64_t n, const Op& op) {
  if constexpr (Op::kF32 != BinaryF32::none && std::is_same_v<A, float> && std::is_same_v<B, float> &&
                std::is_same_v<R, float>) {
    const RowKernelsF32* vec = row_kernels_f32();
    if (vec && sa <= 1 && sb <= 1) return vec->binary(Op::kF32, a, sa, b, sb, o, n);
  }
  int64_t i = 0;
  if (sa == 1 && sb == 1) {
    for (; i < n; i++) o[i] = op(a[i], b[i]);
  } else if (sa == 0 && sb == 1) {
    const A av = a[0];
    for (; i < n; i++) o[i] = op(av, b[i]);
  } else if (sa == 1 && sb == 0) {
    const B bv = b[0];
    for (; i < n; i++) o[i] = op(a[i], bv);
  } else {
    for (; i < n; i++) o[i] = op(a[i * sa], b[i * sb]);
  }
}

// The float32 rows [outer, rows, n] where operand `rep` repeats one short vector of n along the rows
// (its stride there is 0) and the other is laid out like the output: a gate [N, C/8, 1, 1, 8] over
// channel blocks [N, C/8, H, W, 8]. The vector is tiled into a longer row once per outer index, so
// the vector loops run over long rows instead of once per n elements. False where the shapes are
// not of that form. out may be the other operand.
template <class Op>
bool binary_repeated_rows(ThreadPool& pool, const Broadcast<2>& bc, const float* pa, const float* pb,
                          float* po) {
  const RowKernelsF32* vec = row_kernels_f32();
  constexpr int64_t kTile = 256;
  if (!vec || bc.rank() != 3) return false;
  const int64_t outer = bc.dim(0), rows = bc.dim(1), n = bc.dim(2);
  if (n > 32 || kTile % n != 0) return false;
  const size_t rep = bc.stride(0, 1) == 0 ? 0 : 1, full = 1 - rep;
  if (bc.stride(rep, 1) != 0 || bc.stride(rep, 2) != 1 || bc.stride(full, 2) != 1 ||
      bc.stride(full, 1) != n || bc.stride(full, 0) != rows * n)
    return false;
  const float* p[2] = {pa, pb};
  pool.parallel_for(
      outer,
      [&](int64_t o0, int64_t o1) {
        float tile[kTile];
        for (int64_t o = o0; o < o1; o++) {
          const float* v = p[rep] + o * bc.stride(rep, 0);
          for (int64_t i = 0; i < std::min(kTile, rows * n); i += n) std::copy(v, v + n, tile + i);
          const float* x = p[full] + o * rows * n;
          float* y = po + o * rows * n;
          for (int64_t at = 0, len = rows * n; at < len; at += kTile) {
            const int64_t k = std::min(kTile, len - at);
            if (rep == 1)
              vec->binary(Op::kF32, x + at, 1, tile, 1, y + at, k);
            else
              vec->binary(Op::kF32, tile, 1, x + at, 1, y + at, k);
          }
        }
      },
      std::max<int64_t>(1, kGrain / (rows * n)));
  return true;
}

// The float32 broadcasts whose innermost row is short (under 16 values, where each row costs more
// than its arithmetic) and where operand `full` is laid out like the output: GroundingDINO's
// sampling offsets divided by [1,1,1,4,1,2] over [1,22223,8,4,4,2] collapse to 2.8 million rows
// of 2. The other operand's values for a run of the output's blocks (the collapsed axes after
// the first, at most kMaxBlock values) are gathered into a tile of at least kTile values, and the
// vector loop runs over the whole tile. False where the shapes are not of that form. out may be
// the full operand.
template <class Op>
bool binary_short_rows(ThreadPool& pool, const Broadcast<2>& bc, const float* pa, const float* pb, float* po,
                       size_t full) {
  const RowKernelsF32* vec = row_kernels_f32();
  constexpr int64_t kTile = 256, kMaxBlock = 4096, kShortRow = 16;
  const size_t r = bc.rank(), rep = 1 - full;
  if (!vec || r < 2 || bc.dim(r - 1) >= kShortRow) return false;
  int64_t block = 1;
  for (size_t d = 1; d < r; d++) block *= bc.dim(d);
  if (block > kMaxBlock) return false;
  // Where the repeated operand's value for each position of a block lies, from the block's start.
  std::vector<int64_t> at(static_cast<size_t>(block));
  bc.for_rows(0, block, [&](const std::array<int64_t, 2>& off, int64_t pos, int64_t len) {
    for (int64_t i = 0; i < len; i++) at[size_t(pos + i)] = off[rep] + i * bc.inner_stride(rep);
  });
  const float* p[2] = {pa, pb};
  const int64_t blocks = bc.dim(0), per_tile = std::max<int64_t>(1, kTile / block), step = bc.stride(rep, 0);
  const int64_t tiles = (blocks + per_tile - 1) / per_tile;
  pool.parallel_for(
      tiles,
      [&](int64_t t0, int64_t t1) {
        float tile[kMaxBlock];
        auto gather = [&](int64_t b, float* row) {
          const float* v = p[rep] + b * step;
          for (int64_t j = 0; j < block; j++) row[j] = v[at[size_t(j)]];
        };
        // Without a stride on the first axis the repeated operand is the same for every block: one tile.
        if (step == 0)
          for (int64_t i = 0; i < per_tile; i++) gather(0, tile + i * block);
        for (int64_t t = t0; t < t1; t++) {
          const int64_t b0 = t * per_tile, b1 = std::min(blocks, b0 + per_tile);
          if (step != 0)
            for (int64_t b = b0; b < b1; b++) gather(b, tile + (b - b0) * block);
          const int64_t len = (b1 - b0) * block;
          const float* x = p[full] + b0 * block;
          if (rep == 1)
            vec->binary(Op::kF32, x, 1, tile, 1, po + b0 * block, len);
          else
            vec->binary(Op::kF32, tile, 1, x, 1, po + b0 * block, len);
        }
      },
      std::max<int64_t>(1, kGrain / (per_tile * block)));
  return true;
}

// out = op(a, b) with both operands broadcast to out's shape. out may be a itself.
template <class A, class B, class R, class Op>
void binary_map(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out, const Op& op) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out.data<R>();
  const int64_t n = out.numel();
  // An operand with as many elements as the output is laid out like it.
  int64_t sa = a.numel() == n ? 1 : a.numel() == 1 ? 0 : -1;
  int64_t sb = b.numel() == n ? 1 : b.numel() == 1 ? 0 : -1;
  if (sa >= 0 && sb >= 0) {
    pool.parallel_for(
        n,
        [&](int64_t lo, int64_t hi) { binary_row(pa + lo * sa, sa, pb + lo * sb, sb, po + lo, hi - lo, op); },
        kGrain);
    return;
  }
  Broadcast<2> bc(out.shape(), {&a.shape(), &b.shape()});
  if constexpr (Op::kF32 != BinaryF32::none && std::is_same_v<A, float> && std::is_same_v<B, float> &&
                std::is_same_v<R, float>) {
    if (binary_repeated_rows<Op>(pool, bc, pa, pb, po)) return;
    if ((sa == 1 || sb == 1) && binary_short_rows<Op>(pool, bc, pa, pb, po, sa == 1 ? 0 : 1)) return;
  }
  sa = bc.inner_stride(0);
  sb = bc.inner_stride(1);
  pool.parallel_for(
      n,
      [&](int64_t lo, int64_t hi) {
        bc.for_rows(lo, hi, [&](const std::array<int64_t, 2>& off, int64_t pos, int64_t len) {
          binary_row(pa + off[0], sa, pb + off[1], sb, po + pos, len, op);
        });
      },
      kGrain);
}

// ---------------------------------------------------------------------------------
// Unary ops

template <class T, class R, class F>
void unary_map(ThreadPool& pool, const Tensor& x, Tensor& y, const F& f, int64_t grain) {
  const T* px = x.data<T>();
  R* py = y.data<R>();
  pool.parallel_for(
      x.numel(),
      [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; i++) py[i] = f(px[i]);
      },
      grain);
}

// f is a template lambda []<class T>(T x) -> T.
template <class F>
void unary_float(KernelContext& ctx, const F& f) {
  dispatch_float(ctx.input(0).dtype(),
                 [&]<class T>() { unary_map<T, T>(ctx.pool, ctx.input(0), ctx.output(0), f, kGrainMath); });
}

template <class F>
void unary_numeric(KernelContext& ctx, const F& f) {
  dispatch_numeric(ctx.input(0).dtype(),
                   [&]<class T>() { unary_map<T, T>(ctx.pool, ctx.input(0), ctx.output(0), f, kGrain); });
}

// Runs a float32 op on the vector row loops; false where the input is not float32 or
// the level is plain, and the caller runs its scalar form.
bool unary_f32_rows(KernelContext& ctx, UnaryF32 op, UnaryParams p = {}) {
  const RowKernelsF32* vec = row_kernels_f32();
  if (!vec || ctx.input(0).dtype() != DType::f32) return false;
  const float* px = ctx.input(0).data<float>();
  float* py = ctx.output(0).data<float>();
  const bool cheap = op == UnaryF32::relu || op == UnaryF32::leaky_relu || op == UnaryF32::clip ||
                     op == UnaryF32::hard_sigmoid || op == UnaryF32::hard_swish;
  ctx.pool.parallel_for(
      ctx.input(0).numel(), [&](int64_t lo, int64_t hi) { vec->unary(op, p, px + lo, py + lo, hi - lo); },
      cheap ? kGrain : kGrainMath);
  return true;
}

// A float op with a vector form: float32 runs it on the row loops, the rest the scalar f.
template <class F>
void unary_math(KernelContext& ctx, UnaryF32 op, const F& f) {
  if (!unary_f32_rows(ctx, op)) unary_float(ctx, f);
}

template <class T>
T sigmoid(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

// log(1 + exp(x)) without overflow for large x.
template <class T>
T softplus(T x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

void k_is_nan(KernelContext& ctx) {
  dispatch_float(ctx.input(0).dtype(), [&]<class T>() {
    unary_map<T, bool>(
        ctx.pool, ctx.input(0), ctx.output(0), [](T x) { return std::isnan(x); }, kGrain);
  });
}

void k_is_inf(KernelContext& ctx) {
  const bool neg = ctx.node.attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.node.attr_int("detect_positive", 1) != 0;
  dispatch_float(ctx.input(0).dtype(), [&]<class T>() {
    unary_map<T, bool>(
        ctx.pool, ctx.input(0), ctx.output(0), [=](T x) { return std::isinf(x) && (x > 0 ? pos : neg); },
        kGrain);
  });
}

void k_not(KernelContext& ctx) {
  unary_map<bool, bool>(
      ctx.pool, ctx.input(0), ctx.output(0), [](bool x) { return !x; }, kGrain);
}

void k_erf(KernelContext& ctx) {
  if (unary_f32_rows(ctx, UnaryF32::erf)) return;
  // Integer inputs are allowed by the spec: compute in double, convert back.
  dispatch_numeric(ctx.input(0).dtype(), [&]<class T>() {
    unary_map<T, T>(
        ctx.pool, ctx.input(0), ctx.output(0), [](T x) { return T(std::erf(x)); }, kGrainMath);
  });
}

void k_gelu(KernelContext& ctx) {
  if (ctx.node.attr_string("approximate", "none") == "tanh") {
    unary_math(ctx, UnaryF32::gelu_tanh, []<class T>(T x) -> T {
      constexpr T kSqrt2OverPi = T(0.7978845608028654), kCubic = T(0.044715);
      return T(0.5) * x * (T(1) + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
    });
  } else {
    unary_math(ctx, UnaryF32::gelu,
               []<class T>(T x) -> T { return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2))); });
  }
}

void k_leaky_relu(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 0.01f);
  if (unary_f32_rows(ctx, UnaryF32::leaky_relu, {alpha})) return;
  unary_float(ctx, [=]<class T>(T x) -> T { return x < 0 ? T(alpha) * x : x; });
}

void k_elu(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 1.f);
  unary_float(ctx, [=]<class T>(T x) -> T { return x < 0 ? T(alpha) * std::expm1(x) : x; });
}

void k_selu(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 1.67326319217681884765625f);
  const float gamma = ctx.node.attr_float("gamma", 1.05070102214813232421875f);
  unary_float(ctx, [=]<class T>(T x) -> T { return T(gamma) * (x > 0 ? x : T(alpha) * std::expm1(x)); });
}

void k_celu(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 1.f);
  unary_float(ctx, [=]<class T>(T x) -> T { return x > 0 ? x : T(alpha) * std::expm1(x / T(alpha)); });
}

// Clamps to [0, 1] letting NaN through.
template <class T>
T clamp01(T v) {
  return v < 0 ? T(0) : v > 1 ? T(1) : v;
}

void k_hard_sigmoid(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 0.2f), beta = ctx.node.attr_float("beta", 0.5f);
  if (unary_f32_rows(ctx, UnaryF32::hard_sigmoid, {alpha, beta})) return;
  unary_float(ctx, [=]<class T>(T x) -> T { return clamp01(T(alpha) * x + T(beta)); });
}

void k_thresholded_relu(KernelContext& ctx) {
  const float alpha = ctx.node.attr_float("alpha", 1.f);
  unary_float(ctx, [=]<class T>(T x) -> T { return x > T(alpha) ? x : T(0); });
}

void k_shrink(KernelContext& ctx) {
  const double bias = ctx.node.attr_float("bias", 0.f), lambd = ctx.node.attr_float("lambd", 0.5f);
  dispatch_numeric(ctx.input(0).dtype(), [&]<class T>() {
    unary_map<T, T>(
        ctx.pool, ctx.input(0), ctx.output(0),
        [=](T x) {
          double v = double(x);
          return v < -lambd ? from_double<T>(v + bias) : v > lambd ? from_double<T>(v - bias) : T(0);
        },
        kGrain);
  });
}

void k_clip(KernelContext& ctx) {
  dispatch_numeric(ctx.input(0).dtype(), [&]<class T>() {
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if constexpr (std::numeric_limits<T>::has_infinity) {
      lo = -std::numeric_limits<T>::infinity();
      hi = std::numeric_limits<T>::infinity();
    }
    if (ctx.has_input(1)) lo = ctx.input(1).data<T>()[0];
    if (ctx.has_input(2)) hi = ctx.input(2).data<T>()[0];
    // min(max(x, lo), hi) as NumPy's clip: hi wins when lo > hi, NaN passes through.
    if constexpr (std::is_same_v<T, float>)
      if (unary_f32_rows(ctx, UnaryF32::clip, {lo, hi})) return;
    unary_map<T, T>(
        ctx.pool, ctx.input(0), ctx.output(0),
        [=](T x) {
          T v = x < lo ? lo : x;
          return v > hi ? hi : v;
        },
        kGrain);
  });
}

// ---------------------------------------------------------------------------------
// Binary ops. kF32: the operator's float32 row loop, if it has one.

struct AddOp {
  static constexpr BinaryF32 kF32 = BinaryF32::add;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(Wrap<T>(a) + Wrap<T>(b));
    } else {
      return a + b;
    }
  }
};

struct SubOp {
  static constexpr BinaryF32 kF32 = BinaryF32::sub;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(Wrap<T>(a) - Wrap<T>(b));
    } else {
      return a - b;
    }
  }
};

struct MulOp {
  static constexpr BinaryF32 kF32 = BinaryF32::mul;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(Wrap<T>(a) * Wrap<T>(b));
    } else {
      return a * b;
    }
  }
};

// Integer division truncates toward zero; the kernel rejects zero divisors beforehand.
struct DivOp {
  static constexpr BinaryF32 kF32 = BinaryF32::div;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      return b == T(-1) ? negate(a) : T(a / b);  // INT_MIN / -1 traps on x86
    } else {
      return a / b;
    }
  }
};

// Max/Min propagate NaN like NumPy's maximum/minimum.
struct MaxOp {
  static constexpr BinaryF32 kF32 = BinaryF32::none;
  template <class T>
  T operator()(T a, T b) const {
    return (a > b || is_nan(a)) ? a : b;
  }
};

struct MinOp {
  static constexpr BinaryF32 kF32 = BinaryF32::none;
  template <class T>
  T operator()(T a, T b) const {
    return (a < b || is_nan(a)) ? a : b;
  }
};

// Wraps a lambda as a binary operator without a vector form.
template <class F>
struct Scalar {
  static constexpr BinaryF32 kF32 = BinaryF32::none;
  F f;
  template <class A, class B>
  auto operator()(A a, B b) const {
    return f(a, b);
  }
};
template <class F>
Scalar(F) -> Scalar<F>;

template <class T>
void check_no_zero_divisor(const Tensor& b, const char* what) {
  const T* p = b.data<T>();
  for (int64_t i = 0; i < b.numel(); i++)
    if (p[i] == T(0)) fail("integer ", what, " by zero (the divisor is 0 at flat index ", i, ")");
}

template <class Op>
void k_arith(KernelContext& ctx) {
  dispatch_numeric(ctx.output(0).dtype(), [&]<class T>() {
    if constexpr (std::is_integral_v<T> && std::is_same_v<Op, DivOp>)
      check_no_zero_divisor<T>(ctx.input(1), "division");
    binary_map<T, T, T>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0), Op{});
  });
}

template <class T>
T int_mod(T a, T b, bool fmod) {
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);  // INT_MIN % -1 traps on x86
    T r = T(a % b);
    // fmod=0 follows Python: the remainder takes the divisor's sign.
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
    return r;
  } else {
    return T(a % b);
  }
}

void k_mod(KernelContext& ctx) {
  const bool fmod = ctx.node.attr_int("fmod", 0) != 0;
  dispatch_numeric(ctx.output(0).dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      binary_map<T, T, T>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0),
                          Scalar{[](T a, T b) { return std::fmod(a, b); }});
    } else {
      check_no_zero_divisor<T>(ctx.input(1), "modulo");
      binary_map<T, T, T>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0),
                          Scalar{[=](T a, T b) { return int_mod(a, b, fmod); }});
    }
  });
}

// Integer exponents: exact, wrapping on overflow; negative ones truncate 1/a^n toward 0.
template <class A, class B>
A int_pow(A a, B b) {
  if (is_negative(b)) {
    if (a == A(1)) return A(1);
    if constexpr (std::is_signed_v<A>) {
      if (a == A(-1)) return (b % 2 == 0) ? A(1) : A(-1);
    }
    return A(0);
  }
  Wrap<A> result = 1, base = Wrap<A>(a);
  for (uint64_t e = uint64_t(b); e; e >>= 1) {
    if (e & 1) result *= base;
    base *= base;
  }
  return A(result);
}

template <class A, class B>
A pow_value(A a, B b) {
  if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float>) {
    return std::pow(a, b);
  } else if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) {
    return int_pow(a, b);
  } else {
    return from_double<A>(std::pow(double(a), double(b)));
  }
}

void k_pow(KernelContext& ctx) {
  const Tensor& base = ctx.input(0);
  const Tensor& expo = ctx.input(1);
  auto with_base = [&]<class A>() {
    dispatch_numeric(expo.dtype(), [&]<class B>() {
      if constexpr (std::is_floating_point_v<A>) {
        // x^2 (variance in decomposed LayerNorm) is worth a multiply instead of pow().
        if (expo.numel() == 1 && double(expo.data<B>()[0]) == 2.0) {
          unary_map<A, A>(
              ctx.pool, base, ctx.output(0), [](A x) { return x * x; }, kGrain);
          return;
        }
      }
      binary_map<A, B, A>(ctx.pool, base, expo, ctx.output(0),
                          Scalar{[](A a, B b) { return pow_value(a, b); }});
    });
  };
  switch (base.dtype()) {
    case DType::f32:
      return with_base.template operator()<float>();
    case DType::f64:
      return with_base.template operator()<double>();
    case DType::i32:
      return with_base.template operator()<int32_t>();
    case DType::i64:
      return with_base.template operator()<int64_t>();
    default:
      unsupported("Pow with a base of type ", dtype_name(base.dtype()));
  }
}

void k_bit_shift(KernelContext& ctx) {
  const bool left = ctx.node.attr_string("direction", "") == "LEFT";
  dispatch_int(ctx.output(0).dtype(), [&]<class T>() {
    if constexpr (std::is_unsigned_v<T>) {
      // Shifting by the bit width or more gives 0 rather than C++'s undefined behaviour.
      binary_map<T, T, T>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0), Scalar{[=](T a, T s) {
                            if (s >= T(sizeof(T) * 8)) return T(0);
                            return left ? T(Wrap<T>(a) << s) : T(a >> s);
                          }});
    } else {
      unsupported("BitShift on ", dtype_name(dtype_v<T>), " (expected an unsigned type)");
    }
  });
}

void k_prelu(KernelContext& ctx) {
  dispatch_numeric(ctx.output(0).dtype(), [&]<class T>() {
    binary_map<T, T, T>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0),
                        Scalar{[](T x, T slope) { return is_negative(x) ? MulOp{}(x, slope) : x; }});
  });
}

template <class F>
void compare(KernelContext& ctx, const F& f) {
  dispatch_all(ctx.input(0).dtype(), [&]<class T>() {
    binary_map<T, T, bool>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0), Scalar{f});
  });
}

template <class F>
void logical(KernelContext& ctx, const F& f) {
  binary_map<bool, bool, bool>(ctx.pool, ctx.input(0), ctx.input(1), ctx.output(0), Scalar{f});
}

// Max, Min, Sum, Mean: folds the inputs into the output, each broadcast to its shape.
template <class Op, bool kMean = false>
void k_variadic(KernelContext& ctx) {
  Tensor& out = ctx.output(0);
  const size_t n = ctx.input_count();
  dispatch_numeric(out.dtype(), [&]<class T>() {
    if (n == 1) {
      std::memcpy(out.raw(), ctx.input(0).raw(), out.nbytes());
      return;
    }
    binary_map<T, T, T>(ctx.pool, ctx.input(0), ctx.input(1), out, Op{});
    for (size_t i = 2; i < n; i++) binary_map<T, T, T>(ctx.pool, out, ctx.input(i), out, Op{});
    if constexpr (kMean)
      unary_map<T, T>(
          ctx.pool, out, out, [=](T v) { return T(v / T(n)); }, kGrain);
  });
}

void k_where(KernelContext& ctx) {
  const Tensor& cond = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  Tensor& out = ctx.output(0);
  // Moves bytes only, so any type of the same size is handled alike.
  auto run = [&]<class T>() {
    const bool* pc = cond.data<bool>();
    const T* px = static_cast<const T*>(x.raw());
    const T* py = static_cast<const T*>(y.raw());
    T* po = static_cast<T*>(out.raw());
    Broadcast<3> bc(out.shape(), {&cond.shape(), &x.shape(), &y.shape()});
    const int64_t sc = bc.inner_stride(0), sx = bc.inner_stride(1), sy = bc.inner_stride(2);
    ctx.pool.parallel_for(
        out.numel(),
        [&](int64_t lo, int64_t hi) {
          bc.for_rows(lo, hi, [&](const std::array<int64_t, 3>& off, int64_t pos, int64_t len) {
            const bool* c = pc + off[0];
            const T* a = px + off[1];
            const T* b = py + off[2];
            T* o = po + pos;
            for (int64_t i = 0; i < len; i++) o[i] = c[i * sc] ? a[i * sx] : b[i * sy];
          });
        },
        kGrain);
  };
  switch (dtype_size(out.dtype())) {
    case 1:
      return run.template operator()<uint8_t>();
    case 2:
      return run.template operator()<uint16_t>();
    case 4:
      return run.template operator()<uint32_t>();
    case 8:
      return run.template operator()<uint64_t>();
    default:
      unsupported("Where on ", dtype_name(out.dtype()));
  }
}

// ---------------------------------------------------------------------------------
// Cast

// Every storage type, half types included.
template <class F>
decltype(auto) dispatch_storage(DType t, F&& f) {
  switch (t) {
    case DType::f16:
      return f.template operator()<half_t>();
    case DType::bf16:
      return f.template operator()<bf16_t>();
    default:
      return dispatch_all(t, std::forward<F>(f));
  }
}

// Truncates as the ONNX 1.12 reference does for Cast to bfloat16; NaN stays a quiet NaN.
uint16_t float_to_bf16_truncated(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);
  return uint16_t(u >> 16);
}

template <class D, class S>
D convert(S s) {
  if constexpr (std::is_same_v<S, half_t>) {
    return convert<D>(half_to_float(s.bits));
  } else if constexpr (std::is_same_v<S, bf16_t>) {
    return convert<D>(bf16_to_float(s.bits));
  } else if constexpr (std::is_same_v<D, half_t>) {
    return half_t{float_to_half(float(s))};
  } else if constexpr (std::is_same_v<D, bf16_t>) {
    return bf16_t{float_to_bf16_truncated(float(s))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return float_to_int<D>(s);
  } else {
    return static_cast<D>(s);
  }
}

// Cast and CastLike: the target type is the output's.
void k_cast(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (x.dtype() == y.dtype()) {
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  dispatch_storage(x.dtype(), [&]<class S>() {
    dispatch_storage(y.dtype(), [&]<class D>() {
      const S* px = static_cast<const S*>(x.raw());
      D* py = static_cast<D*>(y.raw());
      ctx.pool.parallel_for(
          x.numel(),
          [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; i++) py[i] = convert<D>(px[i]);
          },
          kGrain);
    });
  });
}

}  // namespace

void register_elementwise_kernels(CpuKernelTable& t) {
  // Unary math.
  t["Abs"] = {[](KernelContext& c) {
    unary_numeric(c, []<class T>(T x) -> T { return is_negative(x) ? negate(x) : x; });
  }};
  t["Neg"] = {[](KernelContext& c) { unary_numeric(c, []<class T>(T x) -> T { return negate(x); }); }};
  t["Sign"] = {[](KernelContext& c) {
    unary_numeric(c, []<class T>(T x) -> T { return x > T(0) ? T(1) : is_negative(x) ? T(-1) : x; });
  }};
  t["Relu"] = {[](KernelContext& c) {
    if (unary_f32_rows(c, UnaryF32::relu)) return;
    unary_numeric(c, []<class T>(T x) -> T { return is_negative(x) ? T(0) : x; });
  }};
  t["Reciprocal"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return T(1) / x; }); }};
  t["Floor"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::floor(x); }); }};
  t["Ceil"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::ceil(x); }); }};
  // Halves round to even, as the spec asks.
  t["Round"] = {
      [](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::nearbyint(x); }); }};
  t["Sqrt"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::sqrt(x); }); }};
  t["Exp"] = {
      [](KernelContext& c) { unary_math(c, UnaryF32::exp, []<class T>(T x) -> T { return std::exp(x); }); }};
  t["Log"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::log(x); }); }};
  t["Erf"] = {k_erf};
  t["Tanh"] = {[](KernelContext& c) {
    unary_math(c, UnaryF32::tanh, []<class T>(T x) -> T { return std::tanh(x); });
  }};
  t["Sigmoid"] = {[](KernelContext& c) {
    unary_math(c, UnaryF32::sigmoid, []<class T>(T x) -> T { return sigmoid(x); });
  }};
  t["Sin"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::sin(x); }); }};
  t["Cos"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::cos(x); }); }};
  t["Tan"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::tan(x); }); }};
  t["Asin"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::asin(x); }); }};
  t["Acos"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::acos(x); }); }};
  t["Atan"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::atan(x); }); }};
  t["Sinh"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::sinh(x); }); }};
  t["Cosh"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::cosh(x); }); }};
  t["Asinh"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::asinh(x); }); }};
  t["Acosh"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::acosh(x); }); }};
  t["Atanh"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return std::atanh(x); }); }};
  t["Softplus"] = {[](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return softplus(x); }); }};
  t["Softsign"] = {
      [](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return x / (T(1) + std::abs(x)); }); }};
  t["Not"] = {k_not};
  t["IsNaN"] = {k_is_nan};
  t["IsInf"] = {k_is_inf};

  // Activations.
  t["LeakyRelu"] = {k_leaky_relu};
  t["Elu"] = {k_elu};
  t["Selu"] = {k_selu};
  t["Celu"] = {k_celu};
  t["HardSigmoid"] = {k_hard_sigmoid};
  t["HardSwish"] = {[](KernelContext& c) {
    if (unary_f32_rows(c, UnaryF32::hard_swish)) return;
    unary_float(c, []<class T>(T x) -> T { return x * clamp01(x / T(6) + T(0.5)); });
  }};
  t["Gelu"] = {k_gelu};
  t["ThresholdedRelu"] = {k_thresholded_relu};
  t["Shrink"] = {k_shrink};
  t["Mish"] = {
      [](KernelContext& c) { unary_float(c, []<class T>(T x) -> T { return x * std::tanh(softplus(x)); }); }};
  t["PRelu"] = {k_prelu};
  t["Clip"] = {k_clip};

  // Broadcasting binary ops.
  t["Add"] = {k_arith<AddOp>};
  t["Sub"] = {k_arith<SubOp>};
  t["Mul"] = {k_arith<MulOp>};
  t["Div"] = {k_arith<DivOp>};
  t["Pow"] = {k_pow};
  t["Mod"] = {k_mod};
  t["BitShift"] = {k_bit_shift};
  t["And"] = {[](KernelContext& c) { logical(c, [](bool a, bool b) { return a && b; }); }};
  t["Or"] = {[](KernelContext& c) { logical(c, [](bool a, bool b) { return a || b; }); }};
  t["Xor"] = {[](KernelContext& c) { logical(c, [](bool a, bool b) { return a != b; }); }};
  t["Equal"] = {[](KernelContext& c) { compare(c, [](auto a, auto b) { return a == b; }); }};
  t["Less"] = {[](KernelContext& c) { compare(c, [](auto a, auto b) { return a < b; }); }};
  t["LessOrEqual"] = {[](KernelContext& c) { compare(c, [](auto a, auto b) { return a <= b; }); }};
  t["Greater"] = {[](KernelContext& c) { compare(c, [](auto a, auto b) { return a > b; }); }};
  t["GreaterOrEqual"] = {[](KernelContext& c) { compare(c, [](auto a, auto b) { return a >= b; }); }};

  // Variadic.
  t["Max"] = {k_variadic<MaxOp>};
  t["Min"] = {k_variadic<MinOp>};
  t["Sum"] = {k_variadic<AddOp>};
  t["Mean"] = {k_variadic<AddOp, true>};

  t["Where"] = {k_where, true};
  t["Cast"] = {k_cast, true};
  t["CastLike"] = {k_cast, true};
}

}  // namespace vlrt

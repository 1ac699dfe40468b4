// OpenCL kernels of the elementwise family: unary math and activations, broadcasting
// binary ops, comparisons, logic, Where, Clip and Cast. Each op is one kernel named
// after it ("Relu_f32", "Less_i64"), generated from its expression by a macro;
// broadcasting walks the collapsed output shape with per-operand strides.
#include <limits>

#include "backends/opencl/kernel.h"

namespace vlrt {

namespace {

const ClProgram kProgram{"elementwise", R"CL(
#define UNARY(NAME, EXPR)                                                                             \
  __kernel void NAME##_f32(float alpha, float beta, __global const float* xp, long xo,                \
                           __global float* yp, long yo, int n) {                                      \
    int i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                               \
    float x = xp[xo + i];                                                                             \
    yp[yo + i] = (EXPR);                                                                              \
  }

// Clamps to [0, 1] letting NaN through, as the CPU kernels do.
inline float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }
inline float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + exp(-x));
  float e = exp(x);
  return e / (1.0f + e);
}
inline float softplus(float x) { return x > 0.0f ? x + log1p(exp(-x)) : log1p(exp(x)); }

UNARY(Identity, x)
UNARY(Scale, alpha * x)
UNARY(Relu, x < 0.0f ? 0.0f : x)
UNARY(Sigmoid, sigmoid(x))
UNARY(Tanh, tanh(x))
UNARY(Exp, exp(x))
UNARY(Log, log(x))
UNARY(Sqrt, sqrt(x))
UNARY(Erf, erf(x))
UNARY(Neg, -x)
UNARY(Abs, fabs(x))
UNARY(Reciprocal, 1.0f / x)
UNARY(Floor, floor(x))
UNARY(Ceil, ceil(x))
UNARY(Round, rint(x))
UNARY(Sign, x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x)
UNARY(Sin, sin(x))
UNARY(Cos, cos(x))
UNARY(Softplus, softplus(x))
UNARY(LeakyRelu, x < 0.0f ? alpha * x : x)
UNARY(Elu, x < 0.0f ? alpha * expm1(x) : x)
UNARY(HardSigmoid, clamp01(alpha * x + beta))
UNARY(HardSwish, x * clamp01(x / 6.0f + 0.5f))
UNARY(Gelu, 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F)))
UNARY(GeluTanh, 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))))

// Clip's bounds come from scalar device inputs when given, else lv and hv (infinite).
__kernel void Clip_f32(__global const float* xp, long xo, __global float* yp, long yo, int n,
                       __global const float* lp, long lo, int has_l, float lv,
                       __global const float* hp, long ho, int has_h, float hv) {
  int i = get_global_id(0);
  if (i >= n) return;
  float l = has_l ? lp[lo] : lv, h = has_h ? hp[ho] : hv;
  float v = xp[xo + i];
  v = v < l ? l : v;
  yp[yo + i] = v > h ? h : v;
}

#define BINARY(NAME, T, R, EXPR)                                                                      \
  __kernel void NAME(int rank, int8 dims_v, int8 sa_v, int8 sb_v, __global const T* ap, long ao,      \
                     __global const T* bp, long bo, __global R* yp, long yo, int n) {                 \
    int i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                               \
    UNPACK8(dims_v, dims);                                                                            \
    UNPACK8(sa_v, sa);                                                                                \
    UNPACK8(sb_v, sb);                                                                                \
    int ia, ib;                                                                                       \
    offsets2(i, rank, dims, sa, sb, &ia, &ib);                                                        \
    T a = ap[ao + ia], b = bp[bo + ib];                                                               \
    yp[yo + i] = (EXPR);                                                                              \
  }

BINARY(Add_f32, float, float, a + b)
BINARY(Sub_f32, float, float, a - b)
BINARY(Mul_f32, float, float, a * b)
BINARY(Div_f32, float, float, a / b)
BINARY(Pow_f32, float, float, pow(a, b))
// Max and Min propagate NaN like NumPy's maximum/minimum.
BINARY(Max_f32, float, float, (a > b || isnan(a)) ? a : b)
BINARY(Min_f32, float, float, (a < b || isnan(a)) ? a : b)
BINARY(PRelu_f32, float, float, a < 0.0f ? a * b : a)

#define COMPARE(T, S)                         \
  BINARY(Equal_##S, T, uchar, a == b)         \
  BINARY(Less_##S, T, uchar, a < b)           \
  BINARY(LessOrEqual_##S, T, uchar, a <= b)   \
  BINARY(Greater_##S, T, uchar, a > b)        \
  BINARY(GreaterOrEqual_##S, T, uchar, a >= b)
COMPARE(float, f32)
COMPARE(int, i32)
COMPARE(long, i64)
COMPARE(uchar, bool)

BINARY(And_bool, uchar, uchar, a && b)
BINARY(Or_bool, uchar, uchar, a || b)
BINARY(Xor_bool, uchar, uchar, a != b)

__kernel void Not_bool(__global const uchar* xp, long xo, __global uchar* yp, long yo, int n) {
  int i = get_global_id(0);
  if (i < n) yp[yo + i] = !xp[xo + i];
}

#define WHERE(S, T)                                                                                   \
  __kernel void Where_##S(int rank, int8 dims_v, int8 sc_v, int8 sx_v, int8 sy_v,                     \
                          __global const uchar* cp, long co, __global const T* xp, long xo,           \
                          __global const T* yp, long yo, __global T* op, long oo, int n) {            \
    int i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                               \
    UNPACK8(dims_v, dims);                                                                            \
    UNPACK8(sc_v, sc);                                                                                \
    UNPACK8(sx_v, sx);                                                                                \
    UNPACK8(sy_v, sy);                                                                                \
    int ic = 0, ix = 0, iy = 0, rest = i;                                                             \
    for (int d = rank - 1; d >= 0; d--) {                                                             \
      int q = rest / dims[d], r = rest - q * dims[d];                                                 \
      ic += r * sc[d];                                                                                \
      ix += r * sx[d];                                                                                \
      iy += r * sy[d];                                                                                \
      rest = q;                                                                                       \
    }                                                                                                 \
    op[oo + i] = cp[co + ic] ? xp[xo + ix] : yp[yo + iy];                                             \
  }
WHERE(u8, uchar)
WHERE(u16, ushort)
WHERE(u32, uint)
WHERE(u64, ulong)

// Float to integer truncates toward zero and anything to bool is `!= 0`, as C++'s static_cast.
#define CAST(SN, S, DN, D, EXPR)                                                                      \
  __kernel void Cast_##SN##_##DN(__global const S* xp, long xo, __global D* yp, long yo, int n) {     \
    int i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                               \
    S v = xp[xo + i];                                                                                 \
    yp[yo + i] = (EXPR);                                                                              \
  }
#define CAST_FROM(SN, S)                          \
  CAST(SN, S, f32, float, (float)v)               \
  CAST(SN, S, i32, int, (int)v)                   \
  CAST(SN, S, i64, long, (long)v)                 \
  CAST(SN, S, bool, uchar, (uchar)(v != (S)0))
CAST_FROM(f32, float)
CAST_FROM(i32, int)
CAST_FROM(i64, long)
CAST_FROM(bool, uchar)
)CL"};

// ---- Host side ----------------------------------------------------------------------

// "f32", "i32", "i64", "bool": the dtypes that compare and cast kernels exist for.
const char* value_suffix(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::boolean:
      return "bool";
    default:
      return nullptr;
  }
}

bool supports_float(const Node& n, const std::vector<DType>& d, std::string* why) {
  return all_float32(n, d, why);
}

void run_unary_kernel(ClContext& ctx, const char* name, float alpha, float beta) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  ctx.launch(ctx.kernel(kProgram, cat(name, "_f32").c_str()), cl_range(size_t(y.numel())), alpha, beta, x, y,
             cl_int(y.numel()));
}

void run_unary(ClContext& ctx) {
  const Node& n = ctx.node;
  float alpha = 0, beta = 0;
  std::string name = n.op_type;
  if (name == "LeakyRelu") alpha = n.attr_float("alpha", 0.01f);
  if (name == "Elu") alpha = n.attr_float("alpha", 1.f);
  if (name == "HardSigmoid") {
    alpha = n.attr_float("alpha", 0.2f);
    beta = n.attr_float("beta", 0.5f);
  }
  if (name == "Gelu" && n.attr_string("approximate", "none") == "tanh") name = "GeluTanh";
  run_unary_kernel(ctx, name.c_str(), alpha, beta);
}

void run_clip(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  bool has_lo = ctx.has_input(1), has_hi = ctx.has_input(2);
  // An absent bound's buffer argument is never read; x stands in for it.
  const Tensor& lo_t = has_lo ? ctx.input(1) : x;
  const Tensor& hi_t = has_hi ? ctx.input(2) : x;
  ctx.launch(ctx.kernel(kProgram, "Clip_f32"), cl_range(size_t(y.numel())), x, y, cl_int(y.numel()), lo_t,
             cl_int(has_lo), lo, hi_t, cl_int(has_hi), hi);
}

void launch_binary(ClContext& ctx, const std::string& kernel, const Tensor& a, const Tensor& b, Tensor& y) {
  ClIndexer ix = broadcast_indexer(y.shape(), {a.shape(), b.shape()});
  ctx.launch(ctx.kernel(kProgram, kernel.c_str()), cl_range(size_t(y.numel())), cl_int(ix.rank), ix.dims,
             ix.strides[0], ix.strides[1], a, b, y, cl_int(y.numel()));
}

void run_binary(ClContext& ctx) {
  launch_binary(ctx, cat(ctx.node.op_type, "_", value_suffix(ctx.input(0).dtype())), ctx.input(0),
                ctx.input(1), ctx.output(0));
}

// Max, Min, Sum, Mean: the inputs folded into the output pairwise.
void run_variadic(ClContext& ctx) {
  const std::string& op = ctx.node.op_type;
  std::string kernel = op == "Max" ? "Max_f32" : op == "Min" ? "Min_f32" : "Add_f32";
  Tensor& y = ctx.output(0);
  size_t n = ctx.input_count();
  if (n == 1) return run_unary_kernel(ctx, "Identity", 0, 0);
  launch_binary(ctx, kernel, ctx.input(0), ctx.input(1), y);
  for (size_t i = 2; i < n; i++) launch_binary(ctx, kernel, y, ctx.input(i), y);
  if (op == "Mean")
    ctx.launch(ctx.kernel(kProgram, "Scale_f32"), cl_range(size_t(y.numel())), 1.f / float(n), 0.f, y, y,
               cl_int(y.numel()));
}

void run_not(ClContext& ctx) {
  Tensor& y = ctx.output(0);
  ctx.launch(ctx.kernel(kProgram, "Not_bool"), cl_range(size_t(y.numel())), ctx.input(0), y,
             cl_int(y.numel()));
}

void run_where(ClContext& ctx) {
  const Tensor &c = ctx.input(0), &x = ctx.input(1), &y = ctx.input(2);
  Tensor& out = ctx.output(0);
  ClIndexer ix = broadcast_indexer(out.shape(), {c.shape(), x.shape(), y.shape()});
  ctx.launch(ctx.kernel(kProgram, cat("Where_", bits_suffix(out.dtype())).c_str()),
             cl_range(size_t(out.numel())), cl_int(ix.rank), ix.dims, ix.strides[0], ix.strides[1],
             ix.strides[2], c, x, y, out, cl_int(out.numel()));
}

void run_cast(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::string name = cat("Cast_", value_suffix(x.dtype()), "_", value_suffix(y.dtype()));
  ctx.launch(ctx.kernel(kProgram, name.c_str()), cl_range(size_t(y.numel())), x, y, cl_int(y.numel()));
}

bool supports_compare(const Node& n, const std::vector<DType>& d, std::string* why) {
  DType t = dtype_at(d, 0);
  if (!value_suffix(t)) return reject_dtype(n, 0, t, "float32, int32, int64 and bool", why);
  if (dtype_at(d, 1) != t) return reject_dtype(n, 1, dtype_at(d, 1), dtype_name(t), why);
  return true;
}

bool supports_bool(const Node& n, const std::vector<DType>& d, std::string* why) {
  for (size_t i = 0; i < d.size(); i++)
    if (d[i] != DType::boolean) return reject_dtype(n, i, d[i], "bool", why);
  return true;
}

bool supports_where(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (dtype_at(d, 0) != DType::boolean) return reject_dtype(n, 0, dtype_at(d, 0), "a bool condition", why);
  if (!bits_suffix(dtype_at(d, 1))) return reject_dtype(n, 1, dtype_at(d, 1), "1, 2, 4 or 8-byte types", why);
  return true;
}

bool supports_cast(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (!value_suffix(dtype_at(d, 0)))
    return reject_dtype(n, 0, dtype_at(d, 0), "float32, int32, int64 and bool", why);
  DType to = dtype_from_onnx(int32_t(n.attr_int("to", 0)));
  if (!value_suffix(to)) return reject(n, cat("casting to ", dtype_name(to)), why);
  return true;
}

}  // namespace

void register_opencl_elementwise(ClOpTable& t) {
  for (const char* op : {"Relu",     "Sigmoid",    "Tanh",  "Exp",         "Log",       "Sqrt", "Erf", "Neg",
                         "Abs",      "Reciprocal", "Floor", "Ceil",        "Round",     "Sign", "Sin", "Cos",
                         "Softplus", "LeakyRelu",  "Elu",   "HardSigmoid", "HardSwish", "Gelu"})
    t[op] = {supports_float, run_unary};
  t["Clip"] = {supports_float, run_clip};
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "PRelu"}) t[op] = {supports_float, run_binary};
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) t[op] = {supports_float, run_variadic};
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    t[op] = {supports_compare, run_binary};
  for (const char* op : {"And", "Or", "Xor"}) t[op] = {supports_bool, run_binary};
  t["Not"] = {supports_bool, run_not};
  t["Where"] = {supports_where, run_where};
  t["Cast"] = {supports_cast, run_cast};
}

}  // namespace vlrt

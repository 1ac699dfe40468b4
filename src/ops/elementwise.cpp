// Elementwise ops: unary math and activations, broadcasting binary and variadic
// ops, comparisons, Where, Clip and Cast.
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// The element types an op accepts, one bit per DType.
using TypeSet = uint32_t;
constexpr TypeSet bit(DType t) { return TypeSet(1) << int(t); }
constexpr TypeSet kFloat = bit(DType::f16) | bit(DType::bf16) | bit(DType::f32) | bit(DType::f64);
constexpr TypeSet kSigned = bit(DType::i8) | bit(DType::i16) | bit(DType::i32) | bit(DType::i64);
constexpr TypeSet kUnsigned = bit(DType::u8) | bit(DType::u16) | bit(DType::u32) | bit(DType::u64);
constexpr TypeSet kNumeric = kFloat | kSigned | kUnsigned;
constexpr TypeSet kBool = bit(DType::boolean);
constexpr TypeSet kAll = kNumeric | kBool;

std::string type_list(TypeSet s) {
  std::string out;
  for (int v = 0; v < 32; v++) {
    if (!(s & (TypeSet(1) << v))) continue;
    out += out.empty() ? "" : ", ";
    out += dtype_name(DType(v));
  }
  return out;
}

DType check_type(const InferContext& ctx, size_t i, TypeSet allowed) {
  DType t = ctx.input_dtype(i);
  if (t == DType::string) unsupported("string tensors (input ", i, ")");
  if (!(allowed & bit(t)))
    fail("input ", i, " has type ", dtype_name(t), ", the op accepts ", type_list(allowed));
  return t;
}

void check_same_type(const InferContext& ctx, size_t i, DType expected) {
  DType t = ctx.input_dtype(i);
  if (t != expected)
    fail("input ", i, " has type ", dtype_name(t), ", expected ", dtype_name(expected), " like input 0");
}

// The shape of input i, or nullptr when it is not known yet and the output does not depend on it.
const Shape* shape_if_known(const InferContext& ctx, size_t i) {
  try {
    return &ctx.input_shape(i);
  } catch (const ShapeDeferred&) {
    return nullptr;
  }
}

template <TypeSet kTypes>
void infer_unary(InferContext& ctx) {
  ctx.set_output(0, check_type(ctx, 0, kTypes), ctx.input_shape(0));
}

void infer_is_special(InferContext& ctx) {
  check_type(ctx, 0, kFloat);
  ctx.set_output(0, DType::boolean, ctx.input_shape(0));
}

void infer_celu(InferContext& ctx) {
  VLRT_CHECK(ctx.node.attr_float("alpha", 1.f) != 0.f, "attribute alpha must not be 0");
  infer_unary<kFloat>(ctx);
}

void infer_gelu(InferContext& ctx) {
  std::string approx = ctx.node.attr_string("approximate", "none");
  VLRT_CHECK(approx == "none" || approx == "tanh", "attribute approximate is '", approx,
             "', expected 'none' or 'tanh'");
  infer_unary<kFloat>(ctx);
}

// Both inputs of the same type, output broadcast; comparisons produce bool.
template <TypeSet kTypes, bool kBoolOut = false>
void infer_binary(InferContext& ctx) {
  DType t = check_type(ctx, 0, kTypes);
  check_same_type(ctx, 1, t);
  ctx.set_output(0, kBoolOut ? DType::boolean : t, broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1)));
}

void infer_mod(InferContext& ctx) {
  int64_t fmod = ctx.node.attr_int("fmod", 0);
  VLRT_CHECK(fmod == 0 || fmod == 1, "attribute fmod is ", fmod, ", expected 0 or 1");
  VLRT_CHECK(fmod == 1 || !dtype_is_float(ctx.input_dtype(0)),
             "floating-point Mod needs fmod=1 (got fmod=0 for ", dtype_name(ctx.input_dtype(0)), ")");
  infer_binary<kNumeric>(ctx);
}

void infer_bitshift(InferContext& ctx) {
  std::string dir = ctx.node.attr_string("direction", "");
  VLRT_CHECK(dir == "LEFT" || dir == "RIGHT", "attribute direction is '", dir,
             "', expected 'LEFT' or 'RIGHT'");
  infer_binary<kUnsigned>(ctx);
}

void infer_pow(InferContext& ctx) {
  DType t = check_type(ctx, 0, kFloat | bit(DType::i32) | bit(DType::i64));
  check_type(ctx, 1, kNumeric);
  ctx.set_output(0, t, broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1)));
}

void infer_prelu(InferContext& ctx) {
  DType t =
      check_type(ctx, 0, kFloat | bit(DType::i32) | bit(DType::i64) | bit(DType::u32) | bit(DType::u64));
  check_same_type(ctx, 1, t);
  const Shape& x = ctx.input_shape(0);
  if (const Shape* slope = shape_if_known(ctx, 1)) {
    VLRT_CHECK(slope->size() <= x.size() && broadcast_shapes(x, *slope) == x, "slope shape ",
               shape_str(*slope), " cannot be broadcast to the input shape ", shape_str(x));
  }
  ctx.set_output(0, t, x);
}

void infer_clip(InferContext& ctx) {
  DType t = check_type(ctx, 0, kNumeric);
  for (size_t i = 1; i < 3; i++) {
    if (!ctx.has_input(i)) continue;
    check_same_type(ctx, i, t);
    if (const Shape* s = shape_if_known(ctx, i))
      VLRT_CHECK(shape_numel(*s) == 1, i == 1 ? "min" : "max", " must be a scalar, got shape ",
                 shape_str(*s));
  }
  ctx.set_output(0, t, ctx.input_shape(0));
}

// Max, Min, Sum, Mean: one or more inputs of one type, broadcast together.
template <TypeSet kTypes>
void infer_variadic(InferContext& ctx) {
  DType t = check_type(ctx, 0, kTypes);
  Shape shape = ctx.input_shape(0);
  for (size_t i = 1; i < ctx.input_count(); i++) {
    check_same_type(ctx, i, t);
    shape = broadcast_shapes(shape, ctx.input_shape(i));
  }
  ctx.set_output(0, t, shape);
}

void infer_where(InferContext& ctx) {
  check_type(ctx, 0, kBool);
  DType t = check_type(ctx, 1, kAll);
  check_same_type(ctx, 2, t);
  Shape shape = broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1));
  ctx.set_output(0, t, broadcast_shapes(shape, ctx.input_shape(2)));
}

DType check_cast_target(DType to, const std::string& what) {
  if (to == DType::string) unsupported("casting to string");
  if (!dtype_supported(to)) fail(what, " is not a supported element type");
  return to;
}

void infer_cast(InferContext& ctx) {
  check_type(ctx, 0, kAll);
  VLRT_CHECK(ctx.node.has_attr("to"), "attribute 'to' is required");
  int64_t to = ctx.node.attr_int("to", 0);
  DType t = check_cast_target(dtype_from_onnx(int32_t(to)), cat("target type ", to));
  ctx.set_output(0, t, ctx.input_shape(0));
}

void infer_cast_like(InferContext& ctx) {
  check_type(ctx, 0, kAll);
  DType t = check_cast_target(ctx.input_dtype(1), cat("target type ", dtype_name(ctx.input_dtype(1))));
  ctx.set_output(0, t, ctx.input_shape(0));
}

}  // namespace

void register_elementwise_schemas(SchemaTable& t) {
  // Unary math.
  t["Abs"] = {infer_unary<kNumeric>};
  t["Neg"] = {infer_unary<kFloat | kSigned>};
  t["Sign"] = {infer_unary<kNumeric>};
  t["Relu"] = {infer_unary<kFloat | kSigned>};
  t["Erf"] = {infer_unary<kNumeric>};
  for (const char* op : {"Reciprocal", "Floor", "Ceil",  "Round", "Sqrt",     "Exp",     "Log",  "Tanh",
                         "Sigmoid",    "Sin",   "Cos",   "Tan",   "Asin",     "Acos",    "Atan", "Sinh",
                         "Cosh",       "Asinh", "Acosh", "Atanh", "Softplus", "Softsign"})
    t[op] = {infer_unary<kFloat>};
  t["Not"] = {infer_unary<kBool>};
  t["IsNaN"] = {infer_is_special};
  t["IsInf"] = {infer_is_special};

  // Activations with attributes.
  for (const char* op : {"LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "ThresholdedRelu", "Mish"})
    t[op] = {infer_unary<kFloat>};
  t["Celu"] = {infer_celu};
  t["Gelu"] = {infer_gelu};
  t["Shrink"] = {infer_unary<kNumeric>};
  t["PRelu"] = {infer_prelu, 2, 2};
  t["Clip"] = {infer_clip, 1, 3};

  // Broadcasting binary ops.
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) t[op] = {infer_binary<kNumeric>, 2, 2};
  t["Pow"] = {infer_pow, 2, 2};
  t["Mod"] = {infer_mod, 2, 2};
  t["BitShift"] = {infer_bitshift, 2, 2};
  for (const char* op : {"And", "Or", "Xor"}) t[op] = {infer_binary<kBool>, 2, 2};
  t["Equal"] = {infer_binary<kAll, true>, 2, 2};
  for (const char* op : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    t[op] = {infer_binary<kNumeric, true>, 2, 2};

  // Variadic.
  t["Max"] = {infer_variadic<kNumeric>, 1, -1};
  t["Min"] = {infer_variadic<kNumeric>, 1, -1};
  t["Sum"] = {infer_variadic<kFloat>, 1, -1};
  t["Mean"] = {infer_variadic<kFloat>, 1, -1};

  t["Where"] = {infer_where, 3, 3};
  t["Cast"] = {infer_cast};
  t["CastLike"] = {infer_cast_like, 2, 2};

  // Kernels that read each element only at its own index may write over a dying input.
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf", "Reciprocal", "Floor",
                         "Ceil", "HardSwish", "HardSigmoid", "LeakyRelu", "Gelu", "Softplus", "Add", "Sub", "Mul",
                         "Div"})
    t[op].in_place = true;
}

}  // namespace vlrt

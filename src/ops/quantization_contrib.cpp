// Shape inference for ONNX Runtime's quantized contrib ops (domain com.microsoft): QLinearAdd,
// QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearGlobalAveragePool, QGemm,
// DynamicQuantizeMatMul, MatMulIntegerToFloat, and the channels-last QLinearConv and NhwcMaxPool.
#include "ops/linalg_semantics.h"
#include "ops/op_schema.h"
#include "ops/quantization_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// Input s is a per-tensor float scale; the zero point at z, when given, is one value of type `t`.
void check_tensor_params(const InferContext& ctx, size_t s, size_t z, DType t, const char* scale,
                         const char* zp, const char* of) {
  check_float_scale(ctx, s, scale);
  check_per_tensor_or_vector(ctx, s, scale, 1, "tensor");
  if (!ctx.has_input(z)) return;
  check_zero_point_type(ctx, z, t, zp, of);
  check_per_tensor_or_vector(ctx, z, zp, 1, "tensor");
}

void infer_qlinear_binary(InferContext& ctx) {
  DType t = check_quantized_input(ctx, 0, "A");
  if (ctx.input_dtype(3) != t)
    fail("B is ", dtype_name(ctx.input_dtype(3)), " but A is ", dtype_name(t), "; they must match");
  check_tensor_params(ctx, 1, 2, t, "A_scale", "A_zero_point", "A");
  check_tensor_params(ctx, 4, 5, t, "B_scale", "B_zero_point", "B");
  check_tensor_params(ctx, 6, 7, t, "C_scale", "C_zero_point", "A");
  ctx.set_output(0, t, broadcast_shapes(ctx.input_shape(0), ctx.input_shape(3)));
}

void infer_qlinear_unary(InferContext& ctx) {
  DType t = check_quantized_input(ctx, 0, "X");
  check_tensor_params(ctx, 1, 2, t, "X_scale", "X_zero_point", "X");
  check_tensor_params(ctx, 3, 4, t, "Y_scale", "Y_zero_point", "X");
  ctx.set_output(0, t, ctx.input_shape(0));
}

void infer_qlinear_concat(InferContext& ctx) {
  if (ctx.input_count() < 5 || (ctx.input_count() - 2) % 3 != 0)
    fail("takes Y_scale, Y_zero_point and then (X, X_scale, X_zero_point) per input; got ", ctx.input_count(),
         " inputs");
  DType t = check_quantized_input(ctx, 1, "Y_zero_point");
  check_tensor_params(ctx, 0, 1, t, "Y_scale", "Y_zero_point", "Y");
  if (!ctx.node.has_attr("axis")) fail("attribute axis is required");
  Shape y = ctx.input_shape(2);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), int64_t(y.size()));
  for (size_t i = 2; i < ctx.input_count(); i += 3) {
    if (ctx.input_dtype(i) != t)
      fail("input ", i, " is ", dtype_name(ctx.input_dtype(i)), " but Y_zero_point is ", dtype_name(t));
    check_tensor_params(ctx, i + 1, i + 2, t, "X_scale", "X_zero_point", "X");
    const Shape& x = ctx.input_shape(i);
    bool fits = x.size() == y.size();
    for (size_t d = 0; fits && d < x.size(); d++) fits = int64_t(d) == axis || x[d] == y[d];
    if (!fits)
      fail("input ", i, " of shape ", shape_str(x), " does not fit ", shape_str(ctx.input_shape(2)),
           " outside axis ", axis);
    if (i > 2) y[axis] += x[axis];
  }
  ctx.set_output(0, t, y);
}

void infer_qlinear_global_average_pool(InferContext& ctx) {
  DType t = check_quantized_input(ctx, 0, "X");
  check_tensor_params(ctx, 1, 2, t, "x_scale", "x_zero_point", "X");
  check_tensor_params(ctx, 3, 4, t, "y_scale", "y_zero_point", "X");
  Shape y = ctx.input_shape(0);
  if (y.size() < 3) fail("X must have rank >= 3, got ", shape_str(y));
  bool last = ctx.node.attr_int("channels_last", 0) != 0;
  for (size_t d = last ? 1 : 2; d < (last ? y.size() - 1 : y.size()); d++) y[d] = 1;
  ctx.set_output(0, t, y);
}

}  // namespace

Node qlinear_average_pool_as_float(const Node& n) {
  Node f = n;
  f.op_type = "AveragePool";
  f.domain.clear();
  f.attrs.erase("channels_last");
  return f;
}

Shape channels_first(const Shape& s) {
  Shape r = s;
  r.insert(r.begin() + 1, r.back());
  r.pop_back();
  return r;
}

Shape channels_last(const Shape& s) {
  Shape r = s;
  r.push_back(r[1]);
  r.erase(r.begin() + 1);
  return r;
}

bool is_channels_last(const Node& n) {
  if (n.domain != "com.microsoft") return false;
  return n.op_type == "NhwcMaxPool" || (n.op_type == "QLinearConv" && n.attr_int("channels_last", 0) != 0);
}

Node as_channels_first(const Node& n) {
  Node f = n;
  f.domain.clear();
  f.attrs.erase("channels_last");
  if (n.op_type == "NhwcMaxPool") f.op_type = "MaxPool";
  return f;
}

namespace {

// The shape of AveragePool (opset 19) over X, moved to channels-last and back when channels_last is set.
void infer_qlinear_average_pool(InferContext& ctx) {
  DType t = check_quantized_input(ctx, 0, "X");
  check_tensor_params(ctx, 1, 2, t, "x_scale", "x_zero_point", "X");
  check_tensor_params(ctx, 3, 4, t, "y_scale", "y_zero_point", "X");
  bool last = ctx.node.attr_int("channels_last", 0) != 0;
  ValueInfo x;
  x.dtype = DType::f32;
  x.shape_known = true;
  x.shape = ctx.input_shape(0);
  if (x.shape.size() < 3) fail("X must have rank >= 3, got ", shape_str(x.shape));
  if (last) x.shape = channels_first(x.shape);
  Shape y = infer_node(qlinear_average_pool_as_float(ctx.node), 19, {&x}).at(0).shape;
  if (last) {
    y.push_back(y[1]);
    y.erase(y.begin() + 1);
  }
  ctx.set_output(0, t, y);
}

// com.microsoft QLinearConv and NhwcMaxPool: the standard op's checks and shape (opset 19), on X
// moved to channels-first where the node is channels-last.
void infer_channels_last(InferContext& ctx) {
  bool last = is_channels_last(ctx.node);
  if (ctx.node.op_type == "NhwcMaxPool") check_quantized_input(ctx, 0, "X");
  std::vector<const ValueInfo*> inputs(ctx.input_count(), nullptr);
  for (size_t i = 0; i < inputs.size(); i++)
    if (ctx.has_input(i)) inputs[i] = &ctx.input_info(i);
  ValueInfo x;
  if (last) {
    const Shape& shape = ctx.input_shape(0);
    if (shape.size() < 3) fail("X must have rank >= 3 ([N, D..., C]), got ", shape_str(shape));
    x.dtype = ctx.input_dtype(0);
    x.shape_known = true;
    x.shape = channels_first(shape);
    inputs[0] = &x;
  }
  ValueInfo y = infer_node(as_channels_first(ctx.node), 19, inputs).at(0);
  ctx.set_output(0, y.dtype, last ? channels_last(y.shape) : y.shape);
}

// A float scale and an optional zero point of b (inputs s, z), each one value or one per column.
void check_column_params(const InferContext& ctx, size_t s, size_t z, DType bt, int64_t n) {
  check_float_scale(ctx, s, "b_scale");
  check_per_tensor_or_vector(ctx, s, "b_scale", n, "column of B");
  if (!ctx.has_input(z)) return;
  check_zero_point_type(ctx, z, bt, "b_zero_point", "B");
  check_per_tensor_or_vector(ctx, z, "b_zero_point", n, "column of B");
}

void check_float_bias(const InferContext& ctx, size_t i, int64_t n) {
  if (!ctx.has_input(i)) return;
  if (ctx.input_dtype(i) != DType::f32) fail("bias must be float32, got ", dtype_name(ctx.input_dtype(i)));
  if (ctx.input_shape(i) != Shape{n}) fail("bias must be [", n, "], got ", shape_str(ctx.input_shape(i)));
}

void infer_qgemm(InferContext& ctx) {
  DType at = check_quantized_input(ctx, 0, "A"), bt = check_quantized_input(ctx, 3, "B");
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(3);
  if (a.size() != 2 || b.size() != 2) fail("A and B must be 2-D, got ", shape_str(a), " and ", shape_str(b));
  bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb) fail("inner dimensions do not match: A' is [", m, ",", k, "] and B' is [", kb, ",", n, "]");
  check_tensor_params(ctx, 1, 2, at, "a_scale", "a_zero_point", "A");
  check_column_params(ctx, 4, 5, bt, n);
  if (ctx.has_input(6)) {
    if (ctx.input_dtype(6) != DType::i32) fail("C must be int32, got ", dtype_name(ctx.input_dtype(6)));
    Shape c = ctx.input_shape(6);
    bool ok = c.size() <= 2 && (c.empty() || c.back() == 1 || c.back() == n) &&
              (c.size() < 2 || c[0] == 1 || c[0] == m);
    if (!ok) fail("C of shape ", shape_str(c), " cannot be broadcast to the output [", m, ",", n, "]");
  }
  DType out = DType::f32;
  if (ctx.has_input(7)) {
    out = ctx.has_input(8) ? check_quantized_input(ctx, 8, "y_zero_point") : at;
    check_tensor_params(ctx, 7, 8, out, "y_scale", "y_zero_point", "Y");
  } else if (ctx.has_input(8)) {
    fail("y_zero_point is given without y_scale");
  }
  ctx.set_output(0, out, {m, n});
}

void infer_dynamic_quantize_matmul(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::f32) fail("A must be float32, got ", dtype_name(ctx.input_dtype(0)));
  DType bt = check_quantized_input(ctx, 1, "B");
  Shape y = matmul_output_shape(ctx.input_shape(0), ctx.input_shape(1));
  int64_t n = matmul_dims(ctx.input_shape(0), ctx.input_shape(1)).n;
  check_column_params(ctx, 2, 3, bt, n);
  check_float_bias(ctx, 4, n);
  ctx.set_output(0, DType::f32, y);
}

void infer_matmul_integer_to_float(InferContext& ctx) {
  DType at = check_quantized_input(ctx, 0, "A"), bt = check_quantized_input(ctx, 1, "B");
  Shape y = matmul_output_shape(ctx.input_shape(0), ctx.input_shape(1));
  int64_t n = matmul_dims(ctx.input_shape(0), ctx.input_shape(1)).n;
  check_tensor_params(ctx, 2, 4, at, "a_scale", "a_zero_point", "A");
  check_column_params(ctx, 3, 5, bt, n);
  check_float_bias(ctx, 6, n);
  ctx.set_output(0, DType::f32, y);
}

}  // namespace

void register_quantization_contrib_schemas(SchemaTable& t) {
  t["com.microsoft.QLinearAdd"] = {infer_qlinear_binary, 7, 8};
  t["com.microsoft.QLinearMul"] = {infer_qlinear_binary, 7, 8};
  t["com.microsoft.QLinearSigmoid"] = {infer_qlinear_unary, 4, 5};
  t["com.microsoft.QLinearLeakyRelu"] = {infer_qlinear_unary, 4, 5};
  t["com.microsoft.QLinearConcat"] = {infer_qlinear_concat, 5, -1};
  t["com.microsoft.QLinearGlobalAveragePool"] = {infer_qlinear_global_average_pool, 5, 5};
  t["com.microsoft.QLinearAveragePool"] = {infer_qlinear_average_pool, 4, 5};
  t["com.microsoft.QLinearConv"] = {infer_channels_last, 8, 9};
  t["com.microsoft.NhwcMaxPool"] = {infer_channels_last, 1, 1};
  t["com.microsoft.QGemm"] = {infer_qgemm, 6, 9};
  t["com.microsoft.DynamicQuantizeMatMul"] = {infer_dynamic_quantize_matmul, 3, 5};
  t["com.microsoft.MatMulIntegerToFloat"] = {infer_matmul_integer_to_float, 4, 7};
}

}  // namespace vlrt

// Shape inference for the standard quantized ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, ConvInteger, QLinearConv and QLinearMatMul (MatMulInteger is with linalg).
#include "ops/linalg_semantics.h"
#include "ops/op_schema.h"
#include "ops/quantization_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

bool is_quantized_type(DType t) {
  return t == DType::u8 || t == DType::i8 || t == DType::u16 || t == DType::i16;
}

QuantLayout quant_layout(const Shape& x, const Shape& scale, int64_t axis, int64_t block_size) {
  QuantLayout l;
  if (block_size < 0) fail("block_size must be >= 0, got ", block_size);
  if (block_size == 0 && shape_numel(scale) == 1 && scale.size() <= 1) return l;
  if (x.empty())
    fail("a scale of shape ", shape_str(scale), " needs an input of rank >= 1 to run along an axis");
  int64_t a = normalize_axis(axis, int64_t(x.size()));
  l.per_tensor = false;
  l.dim = x[a];
  for (size_t i = a + 1; i < x.size(); i++) l.inner *= x[i];
  if (block_size == 0) {
    if (scale != Shape{x[a]})
      fail("scale of shape ", shape_str(scale),
           " fits neither per-tensor (one value) nor per-axis quantization of ", shape_str(x), " along axis ",
           a, " (expected [", x[a], "])");
    l.scale_dim = x[a];
    return l;
  }
  Shape want = x;
  want[a] = (x[a] + block_size - 1) / block_size;
  if (scale != want)
    fail("blocked scale of shape ", shape_str(scale), " does not fit ", shape_str(x), " with block_size ",
         block_size, " on axis ", a, " (expected ", shape_str(want), ")");
  l.scale_dim = want[a];
  l.block = block_size;
  return l;
}

void check_zero_point_shape(const Shape& scale, const Shape& zp, const char* what) {
  if (zp == scale || (shape_numel(zp) == 1 && shape_numel(scale) == 1 && zp.size() <= 1)) return;
  fail(what, " has shape ", shape_str(zp), " but its scale has shape ", shape_str(scale),
       "; they must match");
}

void check_float_scale(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  if (!dtype_is_float(t)) fail(what, " must be a floating-point tensor, got ", dtype_name(t));
}

void check_per_tensor_or_vector(const InferContext& ctx, size_t i, const char* what, int64_t len,
                                const char* per) {
  const Shape& s = ctx.input_shape(i);
  if ((shape_numel(s) == 1 && s.size() <= 1) || s == Shape{len}) return;
  fail(what, " has shape ", shape_str(s), "; expected one value or [", len, "] (one per ", per, ")");
}

DType check_quantized_input(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  if (t != DType::u8 && t != DType::i8) fail(what, " must be uint8 or int8, got ", dtype_name(t));
  return t;
}

void check_zero_point_type(const InferContext& ctx, size_t zp, DType want, const char* what, const char* of) {
  if (!ctx.has_input(zp)) return;
  DType t = ctx.input_dtype(zp);
  if (t != want)
    fail(what, " is ", dtype_name(t), " but ", of, " is ", dtype_name(want), "; they must match");
}

namespace {

DType output_dtype_attr(const InferContext& ctx) {
  int64_t v = ctx.node.attr_int("output_dtype", 0);
  if (v == 0) return DType::undefined;
  DType t = dtype_from_onnx(int32_t(v));
  if (!dtype_supported(t)) unsupported("output_dtype ", v, " (vlrt has no such type)");
  return t;
}

// The scale fits x per tensor, per axis or per block (forms of opset 10, 13 and 21), and the zero point fits
// it.
void check_layout(const InferContext& ctx, size_t scale, size_t zp, const char* zp_name) {
  const Shape& s = ctx.input_shape(scale);
  quant_layout(ctx.input_shape(0), s, ctx.node.attr_int("axis", 1), ctx.node.attr_int("block_size", 0));
  if (ctx.has_input(zp)) check_zero_point_shape(s, ctx.input_shape(zp), zp_name);
}

void infer_quantize_linear(InferContext& ctx) {
  DType xt = ctx.input_dtype(0);
  if (!dtype_is_float(xt) && xt != DType::i32)
    fail("x must be a float or int32 tensor, got ", dtype_name(xt));
  check_float_scale(ctx, 1, "y_scale");
  DType out = output_dtype_attr(ctx);
  if (ctx.has_input(2)) {
    DType zt = ctx.input_dtype(2);
    if (out != DType::undefined && zt != out)
      fail("y_zero_point is ", dtype_name(zt), " but output_dtype asks for ", dtype_name(out),
           "; they must match");
    out = zt;
  }
  if (out == DType::undefined) out = DType::u8;
  if (!is_quantized_type(out))
    unsupported("quantizing to ", dtype_name(out), " (vlrt quantizes to uint8, int8, uint16 or int16)");
  check_layout(ctx, 1, 2, "y_zero_point");
  ctx.set_output(0, out, ctx.input_shape(0));
}

void infer_dequantize_linear(InferContext& ctx) {
  DType xt = ctx.input_dtype(0);
  if (!is_quantized_type(xt) && xt != DType::i32)
    unsupported("dequantizing ", dtype_name(xt), " (vlrt dequantizes uint8, int8, uint16, int16 or int32)");
  check_float_scale(ctx, 1, "x_scale");
  check_zero_point_type(ctx, 2, xt, "x_zero_point", "x");
  check_layout(ctx, 1, 2, "x_zero_point");
  DType out = output_dtype_attr(ctx);
  if (out != DType::undefined && out != ctx.input_dtype(1))
    fail("output_dtype ", dtype_name(out), " differs from x_scale's type ", dtype_name(ctx.input_dtype(1)));
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(0));
}

void infer_dynamic_quantize_linear(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::f32) fail("x must be float32, got ", dtype_name(ctx.input_dtype(0)));
  ctx.set_output(0, DType::u8, ctx.input_shape(0));
  if (ctx.output_count() > 1) ctx.set_output(1, DType::f32, {});
  if (ctx.output_count() > 2) ctx.set_output(2, DType::u8, {});
}

void infer_conv_integer(InferContext& ctx) {
  DType xt = check_quantized_input(ctx, 0, "x"), wt = check_quantized_input(ctx, 1, "w");
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  Shape y = conv_output_shape(ctx.node, x, w);
  check_zero_point_type(ctx, 2, xt, "x_zero_point", "x");
  check_zero_point_type(ctx, 3, wt, "w_zero_point", "w");
  if (ctx.has_input(2)) check_per_tensor_or_vector(ctx, 2, "x_zero_point", 1, "tensor");
  if (ctx.has_input(3)) check_per_tensor_or_vector(ctx, 3, "w_zero_point", w[0], "output channel");
  ctx.set_output(0, DType::i32, y);
}

void infer_qlinear_conv(InferContext& ctx) {
  DType xt = check_quantized_input(ctx, 0, "x"), wt = check_quantized_input(ctx, 3, "w");
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(3);
  Shape y = conv_output_shape(ctx.node, x, w);
  for (size_t i : {1, 4, 6}) check_float_scale(ctx, i, i == 1 ? "x_scale" : i == 4 ? "w_scale" : "y_scale");
  check_zero_point_type(ctx, 2, xt, "x_zero_point", "x");
  check_zero_point_type(ctx, 5, wt, "w_zero_point", "w");
  check_per_tensor_or_vector(ctx, 1, "x_scale", 1, "tensor");
  check_per_tensor_or_vector(ctx, 6, "y_scale", 1, "tensor");
  check_per_tensor_or_vector(ctx, 4, "w_scale", w[0], "output channel");
  if (ctx.has_input(2)) check_per_tensor_or_vector(ctx, 2, "x_zero_point", 1, "tensor");
  if (ctx.has_input(5)) check_per_tensor_or_vector(ctx, 5, "w_zero_point", w[0], "output channel");
  DType yt = ctx.has_input(7) ? check_quantized_input(ctx, 7, "y_zero_point") : xt;
  if (ctx.has_input(7)) check_per_tensor_or_vector(ctx, 7, "y_zero_point", 1, "tensor");
  if (ctx.has_input(8)) {
    if (ctx.input_dtype(8) != DType::i32) fail("bias B must be int32, got ", dtype_name(ctx.input_dtype(8)));
    if (ctx.input_shape(8) != Shape{w[0]})
      fail("bias B must be [", w[0], "], got ", shape_str(ctx.input_shape(8)));
  }
  ctx.set_output(0, yt, y);
}

void infer_qlinear_matmul(InferContext& ctx) {
  DType at = check_quantized_input(ctx, 0, "a"), bt = check_quantized_input(ctx, 3, "b");
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(3);
  MatMulDims d = matmul_dims(a, b);
  for (size_t i : {1, 4, 6}) check_float_scale(ctx, i, i == 1 ? "a_scale" : i == 4 ? "b_scale" : "y_scale");
  int64_t rows = a.size() > 1 ? a[a.size() - 2] : 1;
  check_per_tensor_or_vector(ctx, 1, "a_scale", rows, "row of a");
  check_per_tensor_or_vector(ctx, 4, "b_scale", d.n, "column of b");
  check_per_tensor_or_vector(ctx, 6, "y_scale", 1, "tensor");
  check_zero_point_type(ctx, 2, at, "a_zero_point", "a");
  check_zero_point_type(ctx, 5, bt, "b_zero_point", "b");
  check_zero_point_shape(ctx.input_shape(1), ctx.input_shape(2), "a_zero_point");
  check_zero_point_shape(ctx.input_shape(4), ctx.input_shape(5), "b_zero_point");
  DType yt = check_quantized_input(ctx, 7, "y_zero_point");
  check_per_tensor_or_vector(ctx, 7, "y_zero_point", 1, "tensor");
  ctx.set_output(0, yt, matmul_output_shape(a, b));
}

}  // namespace

void register_quantization_schemas(SchemaTable& t) {
  t["QuantizeLinear"] = {infer_quantize_linear, 2, 3};
  t["DequantizeLinear"] = {infer_dequantize_linear, 2, 3};
  t["DynamicQuantizeLinear"] = {infer_dynamic_quantize_linear, 1, 1};
  t["ConvInteger"] = {infer_conv_integer, 2, 4};
  t["QLinearConv"] = {infer_qlinear_conv, 8, 9};
  t["QLinearMatMul"] = {infer_qlinear_matmul, 8, 8};
}

}  // namespace vlrt

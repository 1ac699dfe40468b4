// Shape inference for MatMul, Gemm, Conv, ConvTranspose, Einsum, MatMulInteger and Det.
#include "ops/linalg_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

bool is_float_type(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

bool is_numeric_type(DType t) { return dtype_supported(t) && t != DType::boolean && t != DType::string; }

void check_same_dtype(const InferContext& ctx, size_t a, size_t b) {
  if (ctx.input_dtype(a) != ctx.input_dtype(b))
    fail("input ", b, " is ", dtype_name(ctx.input_dtype(b)), " but input ", a, " is ",
         dtype_name(ctx.input_dtype(a)), "; they must match");
}

void infer_matmul(InferContext& ctx) {
  check_same_dtype(ctx, 0, 1);
  if (!is_numeric_type(ctx.input_dtype(0)))
    fail("MatMul needs a numeric type, got ", dtype_name(ctx.input_dtype(0)));
  ctx.set_output(0, ctx.input_dtype(0), matmul_output_shape(ctx.input_shape(0), ctx.input_shape(1)));
}

void infer_gemm(InferContext& ctx) {
  check_same_dtype(ctx, 0, 1);
  if (!is_numeric_type(ctx.input_dtype(0)))
    fail("Gemm needs a numeric type, got ", dtype_name(ctx.input_dtype(0)));
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (a.size() != 2 || b.size() != 2)
    fail("Gemm needs 2-D A and B, got ", shape_str(a), " and ", shape_str(b));
  bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb)
    fail("inner dimensions do not match: A' is [", m, ",", k, "] and B' is [", kb, ",", n, "] (transA=", ta,
         ", transB=", tb, ")");
  if (ctx.has_input(2)) {
    check_same_dtype(ctx, 0, 2);
    const Shape& c = ctx.input_shape(2);
    Shape mn{m, n};
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); i++) ok = c[i] == 1 || c[i] == mn[2 - c.size() + i];
    if (!ok) fail("C of shape ", shape_str(c), " cannot be broadcast to the output [", m, ",", n, "]");
  }
  ctx.set_output(0, ctx.input_dtype(0), {m, n});
}

void check_bias(const InferContext& ctx, int64_t channels) {
  if (!ctx.has_input(2)) return;
  check_same_dtype(ctx, 0, 2);
  const Shape& b = ctx.input_shape(2);
  if (b != Shape{channels}) fail("bias B must be [", channels, "], got ", shape_str(b));
}

void infer_conv(InferContext& ctx) {
  check_same_dtype(ctx, 0, 1);
  if (!is_float_type(ctx.input_dtype(0)))
    fail("Conv needs a float type, got ", dtype_name(ctx.input_dtype(0)));
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  Shape y = conv_output_shape(ctx.node, x, w);
  check_bias(ctx, w[0]);
  ctx.set_output(0, ctx.input_dtype(0), y);
}

void infer_conv_transpose(InferContext& ctx) {
  check_same_dtype(ctx, 0, 1);
  if (!is_float_type(ctx.input_dtype(0)))
    fail("ConvTranspose needs a float type, got ", dtype_name(ctx.input_dtype(0)));
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  ConvAttrs a = conv_attrs(ctx.node, x, w);
  int64_t group = ctx.node.attr_int("group", 1);
  if (w[0] != x[1] || x[1] % group != 0)
    fail("with group=", group, ", W [C, M/group, ...] = ", shape_str(w), " does not fit X with C=", x[1],
         " (needs W[0] == C and C divisible by group)");
  check_bias(ctx, w[1] * group);
  size_t nsp = x.size() - 2;
  std::vector<int64_t> out_pad = spatial_attr(ctx.node, "output_padding", nsp, 0, 0);
  std::vector<int64_t> out_shape = ctx.node.attr_ints("output_shape");
  if (out_shape.size() == nsp + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != nsp)
    fail("output_shape ", shape_str(out_shape), " must have one value per spatial axis (", nsp, ")");
  Shape y{x[0], w[1] * group};
  for (size_t i = 0; i < nsp; i++) {
    int64_t s = a.strides[i], d = a.dilations[i];
    if (out_pad[i] >= s && out_pad[i] >= d)
      fail("output_padding ", out_pad[i], " on spatial axis ", i, " must be less than the stride (", s,
           ") or the dilation (", d, ")");
    int64_t full = s * (x[i + 2] - 1) + out_pad[i] + a.kernel_extent(i);
    int64_t out;
    if (!out_shape.empty()) {
      out = out_shape[i];
      // Beyond full + stride - 1 the input would need another element (onnxruntime rejects it too).
      if (out >= full + s)
        fail("output_shape ", shape_str(out_shape), " is too large on spatial axis ", i, ": at most ",
             full + s - 1, " fits an input of size ", x[i + 2]);
    } else if (a.same_pad()) {
      out = x[i + 2] * s;
    } else if (a.auto_pad == "VALID") {
      out = full;
    } else {
      out = full - a.pads[i] - a.pads[i + nsp];
    }
    if (out < 1)
      fail("spatial axis ", i, ": the output size would be ", out, "; check pads and output_shape");
    y.push_back(out);
  }
  ctx.set_output(0, ctx.input_dtype(0), y);
}

void infer_einsum(InferContext& ctx) {
  std::string eq = ctx.node.attr_string("equation", "");
  if (eq.empty()) fail("attribute 'equation' is required");
  std::vector<size_t> ranks;
  for (size_t i = 0; i < ctx.input_count(); i++) {
    check_same_dtype(ctx, 0, i);
    ranks.push_back(ctx.input_shape(i).size());
  }
  if (!is_numeric_type(ctx.input_dtype(0)))
    fail("Einsum needs a numeric type, got ", dtype_name(ctx.input_dtype(0)));
  EinsumLabels l = einsum_labels(eq, ranks);
  // A label's size is the same everywhere, except that 1 broadcasts.
  std::map<int, int64_t> size;
  for (size_t t = 0; t < l.inputs.size(); t++) {
    const Shape& s = ctx.input_shape(t);
    for (size_t i = 0; i < s.size(); i++) {
      int id = l.inputs[t][i];
      auto it = size.find(id);
      if (it == size.end() || it->second == 1) {
        size[id] = s[i];
      } else if (s[i] != 1 && s[i] != it->second) {
        fail("equation '", eq,
             "': ", id < 256 ? cat("label '", char(id), "'") : std::string("an ellipsis dim"), " has size ",
             it->second, " in one input and ", s[i], " in input ", t);
      }
    }
  }
  Shape y;
  for (int id : l.output) y.push_back(size.at(id));
  ctx.set_output(0, ctx.input_dtype(0), y);
}

void infer_matmul_integer(InferContext& ctx) {
  for (size_t i = 0; i < 4; i++) {
    if (!ctx.has_input(i)) continue;
    DType t = ctx.input_dtype(i);
    if (t != DType::u8 && t != DType::i8) fail("input ", i, " must be uint8 or int8, got ", dtype_name(t));
  }
  if (ctx.has_input(2)) check_same_dtype(ctx, 0, 2);
  if (ctx.has_input(3)) check_same_dtype(ctx, 1, 3);
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  Shape y = matmul_output_shape(a, b);
  // Zero points: per tensor (one value), per row of A ([M] or [...,M,1]), per column of B ([N] or [...,1,N]).
  auto check_zp = [&](size_t i, const Shape& x, bool rows) {
    if (!ctx.has_input(i)) return;
    const Shape& z = ctx.input_shape(i);
    if (shape_numel(z) == 1) return;
    int64_t len = rows ? (x.size() > 1 ? x[x.size() - 2] : 1) : (x.size() > 1 ? x.back() : 1);
    bool ok = z == Shape{len};
    if (!ok && z.size() == x.size()) {
      Shape want = x;
      want[rows ? x.size() - 1 : x.size() - 2] = 1;
      ok = z == want;
    }
    if (!ok)
      fail("zero point ", i, " has shape ", shape_str(z), "; expected one value, [", len, "] or one per ",
           rows ? "row of A" : "column of B");
  };
  check_zp(2, a, true);
  check_zp(3, b, false);
  ctx.set_output(0, DType::i32, y);
}

// Det of [*, M, M] is [*].
void infer_det(InferContext& ctx) {
  if (!is_float_type(ctx.input_dtype(0))) fail("Det needs a float type, got ", dtype_name(ctx.input_dtype(0)));
  const Shape& x = ctx.input_shape(0);
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    fail("Det needs square matrices [*, M, M], got ", shape_str(x));
  ctx.set_output(0, ctx.input_dtype(0), Shape(x.begin(), x.end() - 2));
}

}  // namespace

void register_linalg_schemas(SchemaTable& t) {
  t["MatMul"] = {infer_matmul, 2, 2};
  t["Gemm"] = {infer_gemm, 2, 3};
  t["Conv"] = {infer_conv, 2, 3};
  t["ConvTranspose"] = {infer_conv_transpose, 2, 3};
  t["Einsum"] = {infer_einsum, 1, -1};
  t["MatMulInteger"] = {infer_matmul_integer, 2, 4};
  t["Det"] = {infer_det, 1, 1};
}

}  // namespace vlrt

// vlrt's own fused ops (domain "vlrt"), written by the fusion passes (src/passes/fuse_*.cpp);
// never in a model file. Their semantics, exactly:
//
// vlrt.FusedMatMul(A, B, Bias?, Z?) -> Y
//   Y = act(MatMul(A, B') + Bias + Z), B' = B with its last two axes swapped when transB = 1.
//   MatMul broadcasting as ONNX MatMul; Bias has shape [N] (added to every row); Z has exactly
//   Y's shape. Attributes: transB (0), activation ("" = none) and activation_params, as FusedConv's
//   (ops/contrib_semantics.h lists them). B may also be float16 or bfloat16 where A is float32: a
//   weight stored in half precision, used as its exact float32 value (MatMul(A, Cast(B))).
//
// vlrt.Attention(Q, K, V, Mask?) -> Y
//   Scaled dot-product attention over rank-3 or rank-4 float32 tensors. q_perm, k_perm, v_perm
//   (default: identity) bring Q, K, V to the logical layout [batch..., S, D]:
//   q = Transpose(Q, q_perm) [b..., Sq, D], k = Transpose(K, k_perm) [b..., Sk, D],
//   v = Transpose(V, v_perm) [b..., Sk, Dv], with the same batch axes.
//   Y = Transpose(Softmax(scale * q k^T + Mask, axis -1) v, out_perm)
//   Mask (optional, additive) broadcasts to the scores [b..., Sq, Sk]. Attribute scale (float,
//   required). The permutations let the op read the heads out of [B, S, H, D] without a copy.
//
// vlrt.WeightedSum(A, W) -> Y
//   Y = ReduceSum(Mul(A, W), axes = [-1], keepdims): float32 A and W of one rank and the same last
//   axis, the others broadcasting as Mul's. Attribute keepdims (1). Multi-scale deformable
//   attention's sum of its sampled values by their attention weights, without the product tensor.
//
// vlrt.DeformableSampleSum(W, X_0, Grid_0, ..., X_{L-1}, Grid_{L-1}) -> Y
//   Y[b, c, q] = sum over levels l and points p of W[b, 0, q, l * P + p] *
//   GridSample(X_l, Grid_l)[b, c, q, p]: float32 X_l [B, C, H_l, W_l], Grid_l [B, Q, P, 2] and W
//   [B, 1, Q, L * P]; Y is [B, C, Q] (keepdims 1: [B, C, Q, 1]). Attributes as GridSample's,
//   mode bilinear (or linear) only, and keepdims (1). Multi-scale deformable attention's sampling
//   of every level and its weighted sum, as written by the PyTorch reference (GridSample per
//   level, Unsqueeze, Concat, Reshape, Mul, ReduceSum), without the sampled values in memory.
//
// vlrt.DynamicQuantizeMatMuls(A, B_0, B_scale_0, B_zero_point_0, Bias_0, B_1, ...) -> Y_0, Y_1, ...
//   Y_i = com.microsoft DynamicQuantizeMatMul(A, B_i, B_scale_i, B_zero_point_i, Bias_i): several
//   dynamically quantized products of one A (attention's query, key and value projections), four
//   inputs per product ("" where absent). A is quantized once, and the products can run as one.
#include "ops/contrib_semantics.h"
#include "ops/fused_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

void infer_fused_matmul(InferContext& ctx) {
  DType t = ctx.input_dtype(0);
  VLRT_CHECK(dtype_is_float(t), "A must be a floating-point tensor, got ", dtype_name(t));
  for (size_t i = 1; i < ctx.input_count(); i++) {
    if (!ctx.has_input(i)) continue;
    DType d = ctx.input_dtype(i);
    bool half_weight = i == 1 && t == DType::f32 && dtype_is_half(d);
    VLRT_CHECK(d == t || half_weight, "input ", i, " is ", dtype_name(d), " but A is ", dtype_name(t),
               "; they must match (B may be float16 or bfloat16 where A is float32)");
  }
  fused_conv_activation(ctx.node);
  Shape b = ctx.input_shape(1);
  VLRT_CHECK(b.size() >= 2 || !ctx.node.attr_int("transB", 0), "transB needs B of rank >= 2, got ", shape_str(b));
  if (ctx.node.attr_int("transB", 0)) std::swap(b[b.size() - 1], b[b.size() - 2]);
  ValueInfo a_info{t, true, ctx.input_shape(0), {}}, b_info{t, true, b, {}};
  InferContext inner(ctx.node, ctx.opset, {&a_info, &b_info});
  find_schema("", "MatMul")->infer(inner);
  const Shape& y = inner.outputs[0].shape;
  int64_t n = y.empty() ? 1 : y.back();
  if (ctx.has_input(2))
    VLRT_CHECK(ctx.input_shape(2) == Shape{n}, "Bias must have shape [", n, "] (the output's last axis), got ",
               shape_str(ctx.input_shape(2)));
  if (ctx.has_input(3))
    VLRT_CHECK(ctx.input_shape(3) == y, "Z (added before the activation) must have the output's shape ",
               shape_str(y), ", got ", shape_str(ctx.input_shape(3)));
  ctx.set_output(0, t, y);
}

void infer_weighted_sum(InferContext& ctx) {
  VLRT_CHECK(ctx.input_dtype(0) == DType::f32 && ctx.input_dtype(1) == DType::f32,
             "A and W must be float32, got ", dtype_name(ctx.input_dtype(0)), " and ",
             dtype_name(ctx.input_dtype(1)));
  const Shape &a = ctx.input_shape(0), &w = ctx.input_shape(1);
  VLRT_CHECK(!a.empty() && a.size() == w.size() && a.back() == w.back(),
             "A and W must have one rank and the same last axis, got ", shape_str(a), " and ", shape_str(w));
  Shape y = broadcast_shapes(Shape(a.begin(), a.end() - 1), Shape(w.begin(), w.end() - 1));
  if (ctx.node.attr_int("keepdims", 1)) y.push_back(1);
  ctx.set_output(0, DType::f32, y);
}

void infer_deformable_sample_sum(InferContext& ctx) {
  const Node& n = ctx.node;
  size_t inputs = ctx.input_count();
  VLRT_CHECK(inputs >= 3 && inputs % 2 == 1, "takes W and then one X and Grid per level, got ", inputs,
             " inputs");
  std::string mode = n.attr_string("mode", "bilinear");
  VLRT_CHECK(mode == "bilinear" || mode == "linear", "mode must be 'bilinear' (or 'linear'), got '", mode,
             "'");
  std::string pad = n.attr_string("padding_mode", "zeros");
  VLRT_CHECK(pad == "zeros" || pad == "border" || pad == "reflection",
             "padding_mode must be 'zeros', 'border' or 'reflection', got '", pad, "'");
  for (size_t i = 0; i < inputs; i++) {
    VLRT_CHECK(ctx.has_input(i), "input ", i, " is required");
    VLRT_CHECK(ctx.input_dtype(i) == DType::f32, "input ", i, " must be float32, got ",
               dtype_name(ctx.input_dtype(i)));
    VLRT_CHECK(ctx.input_shape(i).size() == 4, "input ", i, " must have rank 4, got ",
               shape_str(ctx.input_shape(i)));
  }
  const int64_t levels = int64_t(inputs - 1) / 2;
  const Shape &x0 = ctx.input_shape(1), &g0 = ctx.input_shape(2);
  const int64_t b = x0[0], c = x0[1], q = g0[1], p = g0[2];
  for (int64_t l = 0; l < levels; l++) {
    const Shape &x = ctx.input_shape(size_t(1 + 2 * l)), &g = ctx.input_shape(size_t(2 + 2 * l));
    VLRT_CHECK(x[0] == b && x[1] == c, "X_", l, " ", shape_str(x), " must have X_0's batch and channels [", b,
               ", ", c, ", ..]");
    VLRT_CHECK(g == Shape({b, q, p, 2}), "Grid_", l, " must have shape ", shape_str(Shape{b, q, p, 2}),
               ", got ", shape_str(g));
  }
  VLRT_CHECK(ctx.input_shape(0) == Shape({b, 1, q, levels * p}), "W must have shape ",
             shape_str(Shape{b, 1, q, levels * p}), " (a weight per level and point), got ",
             shape_str(ctx.input_shape(0)));
  Shape y{b, c, q};
  if (n.attr_int("keepdims", 1)) y.push_back(1);
  ctx.set_output(0, DType::f32, y);
}

void infer_attention(InferContext& ctx) {
  for (size_t i = 0; i < ctx.input_count(); i++)
    if (ctx.has_input(i))
      VLRT_CHECK(ctx.input_dtype(i) == DType::f32, "input ", i, " must be float32, got ",
                 dtype_name(ctx.input_dtype(i)));
  VLRT_CHECK(ctx.node.has_attr("scale"), "the attribute 'scale' is required");
  AttentionDims d = attention_dims(ctx.node, ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2));
  if (ctx.has_input(3)) {
    Shape scores = d.batch;
    scores.push_back(d.sq);
    scores.push_back(d.sk);
    const Shape& m = ctx.input_shape(3);
    VLRT_CHECK(broadcast_shapes(m, scores) == scores, "Mask ", shape_str(m), " must broadcast to the scores ",
               shape_str(scores));
  }
  ctx.set_output(0, DType::f32, d.output);
}

}  // namespace

namespace {

// perm (default identity) must be a permutation of the operand's axes.
std::vector<int64_t> attention_perm(const Node& n, const char* attr, size_t rank) {
  std::vector<int64_t> identity(rank);
  for (size_t i = 0; i < rank; i++) identity[i] = int64_t(i);
  std::vector<int64_t> perm = n.attr_ints(attr, identity);
  std::vector<bool> seen(rank, false);
  VLRT_CHECK(perm.size() == rank, attr, " has ", perm.size(), " axes, the operand has ", rank);
  for (int64_t p : perm) {
    VLRT_CHECK(p >= 0 && p < int64_t(rank) && !seen[size_t(p)], attr, " is not a permutation of ", rank, " axes");
    seen[size_t(p)] = true;
  }
  return perm;
}

// The logical shape and strides of an operand read through perm.
std::pair<Shape, std::vector<int64_t>> permuted_view(const Shape& s, const std::vector<int64_t>& perm) {
  std::vector<int64_t> strides = contiguous_strides(s), view_strides;
  Shape view;
  for (int64_t p : perm) {
    view.push_back(s[size_t(p)]);
    view_strides.push_back(strides[size_t(p)]);
  }
  return {view, view_strides};
}

}  // namespace

AttentionDims attention_dims(const Node& n, const Shape& q, const Shape& k, const Shape& v) {
  size_t rank = q.size();
  VLRT_CHECK(rank == 3 || rank == 4, "Q must have rank 3 or 4, got ", shape_str(q));
  VLRT_CHECK(k.size() == rank && v.size() == rank, "Q, K and V must have the same rank, got ", shape_str(q), ", ",
             shape_str(k), " and ", shape_str(v));
  auto [qs, qst] = permuted_view(q, attention_perm(n, "q_perm", rank));
  auto [ks, kst] = permuted_view(k, attention_perm(n, "k_perm", rank));
  auto [vs, vst] = permuted_view(v, attention_perm(n, "v_perm", rank));
  AttentionDims d;
  d.batch.assign(qs.begin(), qs.end() - 2);
  VLRT_CHECK(Shape(ks.begin(), ks.end() - 2) == d.batch && Shape(vs.begin(), vs.end() - 2) == d.batch,
             "q, k and v (after their permutations) must share the batch axes, got ", shape_str(qs), ", ",
             shape_str(ks), " and ", shape_str(vs));
  d.sq = qs[rank - 2];
  d.d = qs[rank - 1];
  d.sk = ks[rank - 2];
  d.dv = vs[rank - 1];
  VLRT_CHECK(ks[rank - 1] == d.d, "q and k must have the same head size, got ", shape_str(qs), " and ",
             shape_str(ks));
  VLRT_CHECK(vs[rank - 2] == d.sk, "k and v must have the same length, got ", shape_str(ks), " and ",
             shape_str(vs));
  d.q_strides = qst;
  d.k_strides = kst;
  d.v_strides = vst;
  d.out_perm = attention_perm(n, "out_perm", rank);
  Shape logical = d.batch;
  logical.push_back(d.sq);
  logical.push_back(d.dv);
  for (int64_t p : d.out_perm) d.output.push_back(logical[size_t(p)]);
  return d;
}

size_t dynamic_product_count(const Node& n) { return n.inputs.empty() ? 0 : (n.inputs.size() - 1 + 3) / 4; }

Node dynamic_product(const Node& n, size_t i) {
  Node p;
  p.name = cat(n.name, "_", i);
  p.op_type = "DynamicQuantizeMatMul";
  p.domain = "com.microsoft";
  p.inputs = {n.inputs[0]};
  for (size_t k = 1 + 4 * i; k < 5 + 4 * i; k++) p.inputs.push_back(k < n.inputs.size() ? n.inputs[k] : "");
  while (p.inputs.back().empty()) p.inputs.pop_back();
  p.outputs = {n.outputs.at(i)};
  return p;
}

namespace {

void infer_dynamic_quantize_matmuls(InferContext& ctx) {
  size_t count = dynamic_product_count(ctx.node);
  if (count != ctx.output_count())
    fail("has ", ctx.output_count(), " outputs for ", count, " products (four inputs each after A)");
  std::vector<const ValueInfo*> inputs;
  for (size_t k = 0; k < ctx.input_count(); k++)
    inputs.push_back(ctx.has_input(k) ? &ctx.input_info(k) : nullptr);
  for (size_t i = 0; i < count; i++) {
    ValueInfo y = infer_node(dynamic_product(ctx.node, i), 1, dynamic_product_inputs(inputs, i)).at(0);
    ctx.set_output(i, y.dtype, y.shape);
  }
}

}  // namespace

void register_fused_schemas(SchemaTable& t) {
  t["vlrt.DynamicQuantizeMatMuls"] = {infer_dynamic_quantize_matmuls, 3, -1};
  t["vlrt.FusedMatMul"] = {infer_fused_matmul, 2, 4};
  t["vlrt.Attention"] = {infer_attention, 3, 4};
  t["vlrt.WeightedSum"] = {infer_weighted_sum, 2, 2};
  t["vlrt.DeformableSampleSum"] = {infer_deformable_sample_sum, 3, 65};
}

}  // namespace vlrt

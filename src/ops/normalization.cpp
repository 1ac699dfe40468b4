// Normalization and softmax-like ops: shapes are unchanged, the work is validating
// the per-channel parameters and the axis attributes.
#include <algorithm>

#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

void require_float(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  VLRT_CHECK(dtype_is_float(t), what, " must be a floating-point tensor, got ", dtype_name(t));
}

// normalize_axis also accepts axis 0 for rank 0, which these ops cannot index.
int64_t checked_axis(int64_t axis, const Shape& s) {
  VLRT_CHECK(!s.empty(), "the input must have rank >= 1, got a scalar");
  return normalize_axis(axis, int64_t(s.size()));
}

// True when `from` broadcasts to `to` without changing `to` (ONNX unidirectional broadcasting).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); i++)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

// Checks that input i is a float vector of length n (a per-channel parameter).
void require_vector(const InferContext& ctx, size_t i, const char* what, int64_t n, const char* of) {
  require_float(ctx, i, what);
  const Shape& s = ctx.input_shape(i);
  VLRT_CHECK(s.size() == 1 && s[0] == n, what, " must have shape [", n, "] (", of, "), got ", shape_str(s));
}

void infer_batch_norm(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() >= 2, "X must have rank >= 2 (N x C x ...), got ", shape_str(x));
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; i++) require_vector(ctx, i, names[i - 1], x[1], "the channel count");
  bool training = ctx.node.attr_int("training_mode", 0) != 0;
  ctx.set_output(0, ctx.input_dtype(0), x);
  for (size_t i = 1; i < ctx.output_count(); i++) {
    if (!ctx.node.outputs[i].empty()) {
      VLRT_CHECK(i <= 2, "has ", ctx.output_count(),
                 " outputs, expected at most 3 (Y, running_mean, running_var)");
      VLRT_CHECK(training, "running_mean and running_var are only produced with training_mode=1");
    }
    ctx.set_output(i, ctx.input_dtype(3), {x[1]});
  }
}

void infer_layer_norm(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  int64_t axis = checked_axis(ctx.node.attr_int("axis", -1), x);
  for (size_t i = 1; i < 3; i++) {
    if (!ctx.has_input(i)) continue;
    const char* what = i == 1 ? "Scale" : "B";
    require_float(ctx, i, what);
    VLRT_CHECK(broadcasts_to(ctx.input_shape(i), x), what, " ", shape_str(ctx.input_shape(i)),
               " must broadcast to X ", shape_str(x));
  }
  int64_t stash_type = ctx.node.attr_int("stash_type", 1);
  VLRT_CHECK(stash_type == 1 || stash_type == 11 || stash_type == 16, "stash_type ", stash_type,
             " is not float, double or bfloat16 (1, 11 or 16)");
  VLRT_CHECK(ctx.output_count() <= 3, "has ", ctx.output_count(), " outputs, expected at most 3");
  ctx.set_output(0, ctx.input_dtype(0), x);
  Shape stat = x;
  std::fill(stat.begin() + axis, stat.end(), 1);
  for (size_t i = 1; i < ctx.output_count(); i++) ctx.set_output(i, dtype_from_onnx(int32_t(stash_type)), stat);
}

void infer_instance_norm(InferContext& ctx) {
  require_float(ctx, 0, "input");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() >= 3, "input must have rank >= 3 (N x C x D1 ...), got ", shape_str(x));
  require_vector(ctx, 1, "scale", x[1], "the channel count");
  require_vector(ctx, 2, "B", x[1], "the channel count");
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_group_norm(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() >= 2, "X must have rank >= 2 (N x C x ...), got ", shape_str(x));
  VLRT_CHECK(ctx.node.has_attr("num_groups"), "attribute num_groups is required");
  int64_t groups = ctx.node.attr_int("num_groups", 0);
  VLRT_CHECK(groups > 0 && x[1] % groups == 0, "num_groups ", groups, " must be positive and divide the ",
             x[1], " channels");
  // Opset 18 gives scale/bias per group, opset 21 per channel; both are accepted.
  for (size_t i = 1; i < 3; i++) {
    const char* what = i == 1 ? "scale" : "bias";
    require_float(ctx, i, what);
    const Shape& s = ctx.input_shape(i);
    VLRT_CHECK(s.size() == 1 && (s[0] == groups || s[0] == x[1]), what, " must have shape [", groups,
               "] (num_groups) or [", x[1], "] (channels), got ", shape_str(s));
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_lp_norm(InferContext& ctx) {
  require_float(ctx, 0, "input");
  const Shape& x = ctx.input_shape(0);
  checked_axis(ctx.node.attr_int("axis", -1), x);
  int64_t p = ctx.node.attr_int("p", 2);
  VLRT_CHECK(p == 1 || p == 2, "p must be 1 or 2, got ", p);
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_mvn(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  std::vector<bool> seen(x.size(), false);
  for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3})) {
    int64_t n = checked_axis(a, x);
    VLRT_CHECK(!seen[n], "axes lists axis ", a, " twice");
    seen[n] = true;
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_lrn(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() >= 3, "X must have rank >= 3 (N x C x D1 ...), got ", shape_str(x));
  VLRT_CHECK(ctx.node.has_attr("size"), "attribute size is required");
  int64_t size = ctx.node.attr_int("size", 0);
  VLRT_CHECK(size > 0, "size must be positive, got ", size);
  ctx.set_output(0, ctx.input_dtype(0), x);
}

// Softmax, LogSoftmax and Hardmax.
void infer_softmax(InferContext& ctx) {
  require_float(ctx, 0, "input");
  const Shape& x = ctx.input_shape(0);
  checked_axis(ctx.node.attr_int("axis", -1), x);
  ctx.set_output(0, ctx.input_dtype(0), x);
}

}  // namespace

void register_normalization_schemas(SchemaTable& t) {
  t["BatchNormalization"] = {infer_batch_norm, 5, 5};
  t["LayerNormalization"] = {infer_layer_norm, 2, 3};
  t["InstanceNormalization"] = {infer_instance_norm, 3, 3};
  t["GroupNormalization"] = {infer_group_norm, 3, 3};
  t["LpNormalization"] = {infer_lp_norm, 1, 1};
  t["MeanVarianceNormalization"] = {infer_mvn, 1, 1};
  t["LRN"] = {infer_lrn, 1, 1};
  t["Softmax"] = {infer_softmax, 1, 1};
  t["LogSoftmax"] = {infer_softmax, 1, 1};
  t["Hardmax"] = {infer_softmax, 1, 1};
}

}  // namespace vlrt

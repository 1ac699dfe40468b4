// Reductions (Reduce*, ArgMax/ArgMin), TopK and CumSum.
#include <algorithm>

#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

const char* const kReduceOps[] = {"ReduceSum",       "ReduceMean",     "ReduceMax", "ReduceMin",
                                  "ReduceProd",      "ReduceL1",       "ReduceL2",  "ReduceLogSum",
                                  "ReduceLogSumExp", "ReduceSumSquare"};

// Which axes a Reduce* node reduces. Empty axes mean all axes, or none with noop_with_empty_axes.
std::vector<bool> reduced_axes(const InferContext& ctx, size_t rank) {
  const Node& node = ctx.node;
  VLRT_CHECK(!node.has_attr("axes"), "axes is an input since opset ", node.op_type == "ReduceSum" ? 13 : 18,
             ", not an attribute");
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor& t = ctx.input_value(1);
    VLRT_CHECK(t.rank() <= 1, "axes must be a 1-D tensor, got ", t.describe());
    axes = t.to_int64_vector();
  }
  bool noop = node.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> mask(rank, axes.empty() && !noop);
  for (int64_t a : axes) {
    VLRT_CHECK(a >= -int64_t(rank) && a < int64_t(rank), "axis ", a, " is out of range for rank ", rank);
    size_t n = size_t(a < 0 ? a + int64_t(rank) : a);
    VLRT_CHECK(!mask[n], "axes lists axis ", a, " twice");
    mask[n] = true;
  }
  return mask;
}

// Reduce* and CumSum take 32/64-bit integers and floats; ReduceMax/ReduceMin also 8-bit integers.
void require_reducible(const InferContext& ctx, const char* what) {
  DType t = ctx.input_dtype(0);
  bool small_int = t == DType::i8 || t == DType::u8 || t == DType::i16 || t == DType::u16;
  bool max_min = ctx.node.op_type == "ReduceMax" || ctx.node.op_type == "ReduceMin";
  bool ok = t != DType::boolean && t != DType::string &&
            (!small_int || (max_min && (t == DType::i8 || t == DType::u8)));
  VLRT_CHECK(ok, what, " of type ", dtype_name(t), " is not supported by ", ctx.node.op_type,
             " (expected 32/64-bit integers or floats", max_min ? ", or 8-bit integers)" : ")");
}

void infer_reduce(InferContext& ctx) {
  require_reducible(ctx, "data");
  DType t = ctx.input_dtype(0);
  const Shape& x = ctx.input_shape(0);
  std::vector<bool> mask = reduced_axes(ctx, x.size());
  bool keep = ctx.node.attr_int("keepdims", 1) != 0;
  Shape out;
  for (size_t d = 0; d < x.size(); d++) {
    if (!mask[d])
      out.push_back(x[d]);
    else if (keep)
      out.push_back(1);
  }
  ctx.set_output(0, t, out);
}

int64_t checked_axis(int64_t axis, const Shape& s) {
  VLRT_CHECK(!s.empty(), "the input must have rank >= 1, got a scalar");
  return normalize_axis(axis, int64_t(s.size()));
}

void infer_arg(InferContext& ctx) {
  DType t = ctx.input_dtype(0);
  VLRT_CHECK(t != DType::boolean && t != DType::string, "data must be numeric, got ", dtype_name(t));
  Shape x = ctx.input_shape(0);
  int64_t axis = checked_axis(ctx.node.attr_int("axis", 0), x);
  VLRT_CHECK(x[axis] > 0, "cannot take ", ctx.node.op_type, " over axis ", axis, " of size 0");
  if (ctx.node.attr_int("keepdims", 1) != 0)
    x[axis] = 1;
  else
    x.erase(x.begin() + axis);
  ctx.set_output(0, DType::i64, x);
}

void infer_topk(InferContext& ctx) {
  DType t = ctx.input_dtype(0);
  VLRT_CHECK(t != DType::boolean && t != DType::string, "X must be numeric, got ", dtype_name(t));
  Shape x = ctx.input_shape(0);
  int64_t axis = checked_axis(ctx.node.attr_int("axis", -1), x);
  VLRT_CHECK(ctx.has_input(1), "input K is required from opset 10");
  const Tensor& kt = ctx.input_value(1);
  VLRT_CHECK(kt.numel() == 1 && kt.rank() <= 1, "K must hold a single value, got ", kt.describe());
  int64_t k = kt.to_int64_vector()[0];
  VLRT_CHECK(k >= 0 && k <= x[axis], "k = ", k, " must be in [0, ", x[axis], "] (the size of axis ", axis,
             ")");
  x[axis] = k;
  ctx.set_output(0, t, x);
  if (ctx.output_count() > 1) ctx.set_output(1, DType::i64, x);
}

void infer_cumsum(InferContext& ctx) {
  require_reducible(ctx, "x");
  DType t = ctx.input_dtype(0);
  const Shape& x = ctx.input_shape(0);
  DType at = ctx.input_dtype(1);
  VLRT_CHECK(at == DType::i32 || at == DType::i64, "axis must be int32 or int64, got ", dtype_name(at));
  if (const Tensor* a = ctx.input_value_if_known(1)) {
    VLRT_CHECK(a->numel() == 1 && a->rank() <= 1, "axis must be a scalar, got ", a->describe());
    checked_axis(a->to_int64_vector()[0], x);
  }
  ctx.set_output(0, t, x);
}

}  // namespace

void register_reduction_schemas(SchemaTable& t) {
  for (const char* op : kReduceOps) t[op] = {infer_reduce, 1, 2};
  t["ArgMax"] = {infer_arg, 1, 1};
  t["ArgMin"] = {infer_arg, 1, 1};
  t["TopK"] = {infer_topk, 1, 2};
  t["CumSum"] = {infer_cumsum, 2, 2};
}

}  // namespace vlrt

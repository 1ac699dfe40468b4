// Data movement and tensor creation: views (Reshape, Squeeze ...), copies (Transpose, Slice,
// Concat ...), gathers and scatters, and ops that create tensors (Constant, Range, EyeLike ...).
#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/dispatch.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"
#include "ops/tensor_semantics.h"

namespace vlrt {
namespace {

void check_index_dtype(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  VLRT_CHECK(t == DType::i32 || t == DType::i64, what, " must be int32 or int64, got ", dtype_name(t));
}

// The values of a 1-D integer input that determines the output shape (Reshape's shape, Slice's
// starts ...); throws ShapeDeferred while the value is unknown.
std::vector<int64_t> int_input(const InferContext& ctx, size_t i, const char* what) {
  check_index_dtype(ctx, i, what);
  const Tensor& v = ctx.input_value(i);
  VLRT_CHECK(v.rank() <= 1, what, " must be a 1-D tensor, got shape ", shape_str(v.shape()));
  return v.to_int64_vector();
}

// A scalar or one-element input (Trilu's k, OneHot's depth, Range's arguments).
void check_single_element(const Shape& s, const char* what) {
  VLRT_CHECK(s.size() <= 1 && shape_numel(s) == 1, what, " must be a scalar or hold one element, got shape ",
             shape_str(s));
}

void check_same_dtype(const InferContext& ctx, size_t a, size_t b, const char* what) {
  VLRT_CHECK(ctx.input_dtype(a) == ctx.input_dtype(b), what, " must have the same type as input ", a, " (",
             dtype_name(ctx.input_dtype(a)), "), got ", dtype_name(ctx.input_dtype(b)));
}

// normalize_axis, but a scalar has no axis at all.
int64_t tensor_axis(int64_t axis, int64_t rank) {
  VLRT_CHECK(rank >= 1, "axis ", axis, " given for a scalar input (rank 0)");
  return normalize_axis(axis, rank);
}

// Axes to [0, rank), rejecting repeats.
std::vector<int64_t> normalize_axes(std::vector<int64_t> axes, int64_t rank) {
  for (auto& a : axes) a = tensor_axis(a, rank);
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  VLRT_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "axes ", shape_str(axes),
             " name an axis twice");
  return axes;
}

// Squeeze's and Unsqueeze's axes (input 1); none when absent.
std::optional<std::vector<int64_t>> axes_arg(const InferContext& ctx) {
  if (!ctx.has_input(1)) return std::nullopt;
  return int_input(ctx, 1, "axes");
}

void set_like_input(InferContext& ctx, Shape s) { ctx.set_output(0, ctx.input_dtype(0), std::move(s)); }

void infer_reshape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  std::vector<int64_t> target = int_input(ctx, 1, "shape (input 1)");
  bool allowzero = ctx.node.attr_int("allowzero", 0) != 0;
  Shape out(target.size());
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < target.size(); i++) {
    int64_t d = target[i];
    if (d == -1) {
      VLRT_CHECK(infer_at < 0, "target shape ", shape_str(target), " has more than one -1");
      infer_at = int64_t(i);
      continue;
    }
    if (d == 0 && !allowzero) {
      VLRT_CHECK(i < in.size(), "target shape ", shape_str(target),
                 " has 0 (copy the input dimension) at index ", i, " but the input ", shape_str(in),
                 " has only ", in.size(), " dimensions");
      d = in[i];
    }
    VLRT_CHECK(d >= 0, "target shape ", shape_str(target), " has ", d, "; dimensions must be >= -1");
    out[i] = d;
    known *= d;
  }
  int64_t n = shape_numel(in);
  if (infer_at >= 0) {
    VLRT_CHECK(known != 0, "cannot infer the -1 in target shape ", shape_str(target),
               " because the other dimensions multiply to 0");
    VLRT_CHECK(n % known == 0, "cannot reshape ", shape_str(in), " (", n, " elements) to ", shape_str(target),
               ": ", n, " is not a multiple of ", known);
    out[infer_at] = n / known;
  }
  VLRT_CHECK(shape_numel(out) == n, "cannot reshape ", shape_str(in), " (", n, " elements) to ",
             shape_str(target), " (", shape_numel(out), " elements)");
  set_like_input(ctx, out);
}

void infer_flatten(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int64_t r = int64_t(in.size());
  int64_t axis = ctx.node.attr_int("axis", 1);
  VLRT_CHECK(axis >= -r && axis <= r, "axis ", axis, " is out of range [", -r, ", ", r, "] for rank ", r);
  if (axis < 0) axis += r;
  Shape outer(in.begin(), in.begin() + axis), inner(in.begin() + axis, in.end());
  set_like_input(ctx, {shape_numel(outer), shape_numel(inner)});
}

void infer_squeeze(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  auto axes = axes_arg(ctx);
  Shape out;
  if (!axes) {
    for (int64_t d : in)
      if (d != 1) out.push_back(d);
  } else {
    std::vector<int64_t> ax = normalize_axes(*axes, int64_t(in.size()));
    std::vector<bool> drop(in.size(), false);
    for (int64_t a : ax) {
      VLRT_CHECK(in[a] == 1, "cannot squeeze axis ", a, " of shape ", shape_str(in), ": its size is ", in[a],
                 ", not 1");
      drop[a] = true;
    }
    for (size_t i = 0; i < in.size(); i++)
      if (!drop[i]) out.push_back(in[i]);
  }
  set_like_input(ctx, out);
}

void infer_unsqueeze(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  auto axes = axes_arg(ctx);
  VLRT_CHECK(axes.has_value(), "input 1 (axes) is required");
  int64_t r = int64_t(in.size() + axes->size());
  std::vector<bool> added(r, false);
  for (int64_t a : normalize_axes(*axes, r)) added[a] = true;
  Shape out(r);
  size_t next = 0;
  for (int64_t i = 0; i < r; i++) out[i] = added[i] ? 1 : in[next++];
  set_like_input(ctx, out);
}

void infer_identity(InferContext& ctx) {
  set_like_input(ctx, ctx.input_shape(0));
  ctx.outputs[0].kind = ctx.input_kind(0);
}

void infer_dropout(InferContext& ctx) {
  // Training mode drops at random unless the ratio is 0; its value is needed (deferring until execution when
  // it is a runtime input) because output 0 aliases the input and no kernel runs to check it later.
  if (ctx.has_input(2)) {
    const Tensor& training = ctx.input_value(2);
    check_single_element(training.shape(), "training_mode (input 2)");
    if (training.to_double_vector()[0] != 0) {
      double ratio = 0.5;
      if (ctx.has_input(1)) {
        check_single_element(ctx.input_shape(1), "ratio (input 1)");
        ratio = ctx.input_value(1).to_double_vector()[0];
      }
      if (ratio != 0)
        unsupported("training_mode=true with ratio ", ratio, ": vlrt implements inference only");
    }
  }
  const Shape& in = ctx.input_shape(0);
  set_like_input(ctx, in);
  if (ctx.output_count() > 1) ctx.set_output(1, DType::boolean, in);
}

void infer_transpose(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  size_t r = in.size();
  std::vector<int64_t> perm = transpose_perm(ctx.node, r);
  VLRT_CHECK(perm.size() == r, "perm ", shape_str(perm), " has ", perm.size(),
             " entries for an input of rank ", r);
  std::vector<bool> seen(r, false);
  Shape out(r);
  for (size_t i = 0; i < r; i++) {
    VLRT_CHECK(perm[i] >= 0 && perm[i] < int64_t(r) && !seen[perm[i]], "perm ", shape_str(perm),
               " is not a permutation of 0..", r - 1);
    seen[perm[i]] = true;
    out[i] = in[perm[i]];
  }
  set_like_input(ctx, out);
}

void infer_concat(InferContext& ctx) {
  VLRT_CHECK(ctx.node.has_attr("axis"), "attribute 'axis' is required");
  Shape out = ctx.input_shape(0);
  int64_t r = int64_t(out.size());
  VLRT_CHECK(r >= 1, "cannot concatenate scalars; inputs must have rank >= 1");
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), r);
  for (size_t i = 1; i < ctx.input_count(); i++) {
    check_same_dtype(ctx, 0, i, cat("input ", i).c_str());
    const Shape& s = ctx.input_shape(i);
    bool ok = int64_t(s.size()) == r;
    for (int64_t d = 0; ok && d < r; d++) ok = d == axis || s[d] == out[d];
    VLRT_CHECK(ok, "input ", i, " has shape ", shape_str(s), ", incompatible with input 0 ",
               shape_str(ctx.input_shape(0)), " for concatenation on axis ", axis,
               " (all other dimensions must match)");
    out[axis] += s[axis];
  }
  set_like_input(ctx, out);
}

// Lengths of Split's outputs along the axis (the kernel computes the same).
std::vector<int64_t> split_sizes(const InferContext& ctx, int64_t dim) {
  size_t n = ctx.output_count();
  std::optional<std::vector<int64_t>> split;
  // An empty split input counts as absent, as in onnxruntime.
  if (ctx.has_input(1) && shape_numel(ctx.input_shape(1)) > 0) split = int_input(ctx, 1, "split (input 1)");
  if (split) {
    VLRT_CHECK(!ctx.node.has_attr("num_outputs"),
               "give either input 'split' or attribute 'num_outputs', not both");
    VLRT_CHECK(split->size() == n, "split ", shape_str(*split), " has ", split->size(), " entries for ", n,
               " outputs");
    int64_t sum = 0;
    for (int64_t s : *split) {
      VLRT_CHECK(s >= 0, "split ", shape_str(*split), " has a negative length");
      sum += s;
    }
    VLRT_CHECK(sum == dim, "split ", shape_str(*split), " sums to ", sum, ", not to the axis size ", dim);
    return *split;
  }
  if (ctx.node.has_attr("num_outputs")) {
    int64_t num = ctx.node.attr_int("num_outputs", 0);
    VLRT_CHECK(num == int64_t(n), "num_outputs is ", num, " but the node has ", n, " outputs");
  }
  int64_t parts = int64_t(n);
  std::vector<int64_t> sizes = split_equal_sizes(dim, parts);
  VLRT_CHECK(sizes.back() >= 0, "cannot split an axis of size ", dim, " into ", parts, " parts");
  return sizes;
}

void infer_split(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  VLRT_CHECK(!in.empty(), "cannot split a scalar");
  VLRT_CHECK(ctx.output_count() >= 1, "the node has no outputs");
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), int64_t(in.size()));
  std::vector<int64_t> sizes = split_sizes(ctx, in[axis]);
  for (size_t i = 0; i < sizes.size(); i++) {
    Shape s = in;
    s[axis] = sizes[i];
    ctx.set_output(i, ctx.input_dtype(0), s);
  }
}

void infer_slice(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int64_t r = int64_t(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  VLRT_CHECK(ctx.has_input(1) && ctx.has_input(2), "inputs 1 (starts) and 2 (ends) are required");
  starts = int_input(ctx, 1, "starts (input 1)");
  ends = int_input(ctx, 2, "ends (input 2)");
  bool have_axes = ctx.has_input(3);
  if (have_axes) axes = int_input(ctx, 3, "axes (input 3)");
  if (ctx.has_input(4)) steps = int_input(ctx, 4, "steps (input 4)");
  check_same_dtype(ctx, 1, 2, "ends (input 2)");
  size_t n = starts.size();
  VLRT_CHECK(ends.size() == n, "starts has ", n, " entries but ends has ", ends.size());
  if (!have_axes) {
    axes.resize(n);
    std::iota(axes.begin(), axes.end(), 0);
  }
  VLRT_CHECK(axes.size() == n, "starts has ", n, " entries but axes has ", axes.size());
  if (steps.empty()) steps.assign(n, 1);
  VLRT_CHECK(steps.size() == n, "starts has ", n, " entries but steps has ", steps.size());
  axes = normalize_axes(axes, r);
  Shape out = in;
  for (size_t i = 0; i < n; i++) {
    int64_t dim = in[axes[i]], step = steps[i];
    VLRT_CHECK(step != 0, "steps ", shape_str(steps), " contains 0");
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t count = 0;
    // Clamped as the spec says; the counts are written so that no step (even INT64_MIN) overflows.
    if (dim > 0 && step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else if (dim > 0) {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (end - start + 1) / step + 1 : 0;
    }
    out[axes[i]] = count;
  }
  set_like_input(ctx, out);
}

void infer_gather(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  check_index_dtype(ctx, 1, "indices (input 1)");
  VLRT_CHECK(!data.empty(), "data must have rank >= 1");
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), int64_t(data.size()));
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  set_like_input(ctx, out);
}

// GatherElements and ScatterElements index `data` with an `indices` tensor of the same rank.
int64_t check_elements_indices(const InferContext& ctx, const Shape& data, const Shape& idx) {
  check_index_dtype(ctx, 1, "indices (input 1)");
  VLRT_CHECK(!data.empty(), "data must have rank >= 1");
  VLRT_CHECK(idx.size() == data.size(), "indices ", shape_str(idx), " must have the rank of data ",
             shape_str(data));
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), int64_t(data.size()));
  for (size_t d = 0; d < data.size(); d++)
    VLRT_CHECK(int64_t(d) == axis || idx[d] <= data[d], "indices ", shape_str(idx), " exceed data ",
               shape_str(data), " on axis ", d, " (only the axis ", axis, " may be larger)");
  return axis;
}

void infer_gather_elements(InferContext& ctx) {
  check_elements_indices(ctx, ctx.input_shape(0), ctx.input_shape(1));
  set_like_input(ctx, ctx.input_shape(1));
}

void infer_gather_nd(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  check_index_dtype(ctx, 1, "indices (input 1)");
  int64_t r = int64_t(data.size()), q = int64_t(idx.size());
  int64_t b = ctx.node.attr_int("batch_dims", 0);
  VLRT_CHECK(r >= 1 && q >= 1, "data and indices must have rank >= 1");
  VLRT_CHECK(b >= 0 && b < std::min(r, q), "batch_dims ", b, " must be in [0, ", std::min(r, q), ")");
  int64_t k = idx.back();
  VLRT_CHECK(k >= 1 && k <= r - b, "indices' last dimension ", k, " must be in [1, ", r - b,
             "] (data rank minus batch_dims)");
  for (int64_t d = 0; d < b; d++)
    VLRT_CHECK(data[d] == idx[d], "batch dimension ", d, " differs: data ", shape_str(data), ", indices ",
               shape_str(idx));
  Shape out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + k, data.end());
  set_like_input(ctx, out);
}

void check_reduction(const InferContext& ctx) {
  std::string red = ctx.node.attr_string("reduction", "none");
  VLRT_CHECK(red == "none" || red == "add" || red == "mul" || red == "max" || red == "min", "reduction '",
             red, "' is not one of none, add, mul, max, min");
}

void infer_scatter_nd(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  const Shape& upd = ctx.input_shape(2);
  check_index_dtype(ctx, 1, "indices (input 1)");
  check_same_dtype(ctx, 0, 2, "updates (input 2)");
  check_reduction(ctx);
  int64_t r = int64_t(data.size());
  VLRT_CHECK(r >= 1 && !idx.empty(), "data and indices must have rank >= 1");
  int64_t k = idx.back();
  VLRT_CHECK(k >= 1 && k <= r, "indices' last dimension ", k, " must be in [1, ", r, "] (the data rank)");
  Shape want(idx.begin(), idx.end() - 1);
  want.insert(want.end(), data.begin() + k, data.end());
  VLRT_CHECK(upd == want, "updates have shape ", shape_str(upd), "; expected ", shape_str(want),
             " (indices.shape[:-1] + data.shape[", k, ":])");
  set_like_input(ctx, data);
}

void infer_scatter_elements(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  check_elements_indices(ctx, data, idx);
  check_same_dtype(ctx, 0, 2, "updates (input 2)");
  VLRT_CHECK(ctx.input_shape(2) == idx, "updates ", shape_str(ctx.input_shape(2)),
             " must have the shape of indices ", shape_str(idx));
  check_reduction(ctx);
  set_like_input(ctx, data);
}

void infer_expand(InferContext& ctx) {
  std::vector<int64_t> shape = int_input(ctx, 1, "shape (input 1)");
  for (int64_t d : shape) VLRT_CHECK(d >= 0, "shape ", shape_str(shape), " has a negative dimension");
  set_like_input(ctx, broadcast_shapes(ctx.input_shape(0), shape));
}

void infer_tile(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  std::vector<int64_t> reps = int_input(ctx, 1, "repeats (input 1)");
  VLRT_CHECK(reps.size() == in.size(), "repeats ", shape_str(reps),
             " must have one entry per input dimension (", in.size(), ")");
  Shape out = in;
  for (size_t i = 0; i < in.size(); i++) {
    VLRT_CHECK(reps[i] >= 0, "repeats ", shape_str(reps), " has a negative entry");
    out[i] *= reps[i];
  }
  set_like_input(ctx, out);
}

void infer_shape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  auto [start, end] = shape_axes_range(ctx.node, int64_t(in.size()));
  Shape dims(in.begin() + start, in.begin() + std::max(start, end));
  int64_t n = int64_t(dims.size());
  ctx.set_output(0, DType::i64, {n});
  // Known as soon as the input's shape is: lets shape arithmetic fold before execution.
  ctx.outputs[0].value = Tensor::from_vector<int64_t>(dims, {n});
}

void infer_size(InferContext& ctx) {
  int64_t n = shape_numel(ctx.input_shape(0));
  ctx.set_output(0, DType::i64, {});
  ctx.outputs[0].value = Tensor::scalar<int64_t>(n);
}

void infer_constant_of_shape(InferContext& ctx) {
  DType t = DType::f32;
  if (const Tensor* v = ctx.node.attr_tensor("value")) {
    VLRT_CHECK(v->numel() == 1, "attribute 'value' must hold one element, got ", v->describe());
    t = v->dtype();
  }
  VLRT_CHECK(ctx.input_dtype(0) == DType::i64, "input 0 (shape) must be int64, got ",
             dtype_name(ctx.input_dtype(0)));
  std::vector<int64_t> shape = int_input(ctx, 0, "shape (input 0)");
  for (int64_t d : shape) VLRT_CHECK(d >= 0, "shape ", shape_str(shape), " has a negative dimension");
  ctx.set_output(0, t, shape);
}

void infer_constant(InferContext& ctx) {
  Tensor v = constant_value(ctx.node);
  ctx.set_output(0, v.dtype(), v.shape());
  ctx.outputs[0].value = v;
}

void infer_range(InferContext& ctx) {
  // Every numeric type, beyond the spec's float, double, int16, int32 and int64 (as ONNX Runtime).
  DType t = ctx.input_dtype(0);
  VLRT_CHECK(t != DType::boolean && t != DType::string && dtype_supported(t), "type ", dtype_name(t),
             " is not allowed (a numeric type)");
  for (size_t i = 0; i < 3; i++) {
    check_same_dtype(ctx, 0, i, cat("input ", i).c_str());
    check_single_element(ctx.input_shape(i), cat("input ", i).c_str());
  }
  bool half = t == DType::f16 || t == DType::bf16;
  int64_t n = 0;
  dispatch_numeric(half ? DType::f32 : t, [&]<class T>() {
    auto value = [&](size_t i) { return half ? T(ctx.input_value(i).to_double_vector()[0]) : ctx.input_value(i).data<T>()[0]; };
    T start = value(0), limit = value(1), delta = value(2);
    VLRT_CHECK(delta != 0, "delta (input 2) must not be 0");
    if constexpr (std::is_floating_point_v<T>) {
      double count = std::ceil((double(limit) - double(start)) / double(delta));
      VLRT_CHECK(std::isfinite(count) && count < 1e15, "Range from ", start, " to ", limit, " by ", delta,
                 " does not give a finite number of elements that fits in memory");
      n = int64_t(std::max(count, 0.0));
    } else {
      // 128-bit so that int64 extremes cannot overflow; ceiling division for either sign.
      __int128 span = __int128(limit) - __int128(start), d = delta;
      __int128 q = span / d + ((span % d != 0) && ((span > 0) == (d > 0)) ? 1 : 0);
      n = int64_t(std::clamp<__int128>(q, 0, INT64_MAX));
    }
  });
  ctx.set_output(0, t, {n});
}

void infer_non_zero(InferContext& ctx) {
  const Tensor& x = ctx.input_value(0);
  int64_t nnz = 0;
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16) {
    for (double v : x.to_double_vector()) nnz += v != 0;
  } else {
    dispatch_all(x.dtype(), [&]<class T>() {
      const T* p = x.data<T>();
      for (int64_t i = 0; i < x.numel(); i++) nnz += p[i] != T(0);
    });
  }
  // A scalar is treated as a 1-D tensor of one element.
  ctx.set_output(0, DType::i64, {std::max<int64_t>(x.rank(), 1), nnz});
}

void infer_trilu(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  VLRT_CHECK(in.size() >= 2, "input must have rank >= 2, got ", shape_str(in));
  if (ctx.has_input(1)) {
    VLRT_CHECK(ctx.input_dtype(1) == DType::i64, "k (input 1) must be int64, got ",
               dtype_name(ctx.input_dtype(1)));
    check_single_element(ctx.input_shape(1), "k (input 1)");
  }
  set_like_input(ctx, in);
}

void infer_eye_like(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  VLRT_CHECK(in.size() == 2, "input must be 2-D, got ", shape_str(in));
  DType t = ctx.input_dtype(0);
  if (ctx.node.has_attr("dtype")) {
    int64_t code = ctx.node.attr_int("dtype", 0);
    t = dtype_from_onnx(int32_t(code));
    if (!dtype_supported(t) || t == DType::string) unsupported("dtype ", code);
  }
  ctx.set_output(0, t, in);
}

void infer_one_hot(InferContext& ctx) {
  const Shape& idx = ctx.input_shape(0);
  check_single_element(ctx.input_shape(1), "depth (input 1)");
  VLRT_CHECK(ctx.input_shape(2) == Shape{2},
             "values (input 2) must be [off_value, on_value] of shape [2], got ",
             shape_str(ctx.input_shape(2)));
  double depth_f = ctx.input_value(1).to_double_vector()[0];
  VLRT_CHECK(depth_f >= 0 && depth_f < double(INT64_MAX), "depth must be >= 0, got ", depth_f);
  int64_t r = int64_t(idx.size());
  int64_t axis = ctx.node.attr_int("axis", -1);
  VLRT_CHECK(axis >= -r - 1 && axis <= r, "axis ", axis, " is out of range [", -r - 1, ", ", r,
             "] for indices of rank ", r);
  if (axis < 0) axis += r + 1;
  Shape out = idx;
  out.insert(out.begin() + axis, int64_t(depth_f));
  ctx.set_output(0, ctx.input_dtype(2), out);
}

void infer_compress(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  VLRT_CHECK(ctx.input_dtype(1) == DType::boolean, "condition (input 1) must be bool, got ",
             dtype_name(ctx.input_dtype(1)));
  const Tensor& cond = ctx.input_value(1);
  VLRT_CHECK(cond.rank() == 1, "condition must be 1-D, got shape ", shape_str(cond.shape()));
  bool has_axis = ctx.node.has_attr("axis");
  int64_t axis = has_axis ? tensor_axis(ctx.node.attr_int("axis", 0), int64_t(in.size())) : 0;
  int64_t len = has_axis ? in[axis] : shape_numel(in);
  VLRT_CHECK(cond.numel() <= len, "condition has ", cond.numel(), " entries, more than the ", len,
             has_axis ? " slices along the axis" : " elements");
  int64_t kept = std::count(cond.data<bool>(), cond.data<bool>() + cond.numel(), true);
  Shape out = has_axis ? in : Shape{kept};
  if (has_axis) out[axis] = kept;
  set_like_input(ctx, out);
}

void infer_reverse_sequence(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  VLRT_CHECK(in.size() >= 2, "input must have rank >= 2, got ", shape_str(in));
  int64_t time_axis = ctx.node.attr_int("time_axis", 0), batch_axis = ctx.node.attr_int("batch_axis", 1);
  VLRT_CHECK((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0),
             "time_axis and batch_axis must be 0 and 1 in some order, got ", time_axis, " and ", batch_axis);
  VLRT_CHECK(ctx.input_dtype(1) == DType::i64, "sequence_lens must be int64, got ",
             dtype_name(ctx.input_dtype(1)));
  VLRT_CHECK(ctx.input_shape(1) == Shape{in[batch_axis]}, "sequence_lens has shape ",
             shape_str(ctx.input_shape(1)), "; expected [", in[batch_axis], "] (the batch size)");
  set_like_input(ctx, in);
}

void infer_unique(InferContext& ctx) {
  const Tensor& x = ctx.input_value(0);
  int64_t outer = 1, n = x.numel(), inner = 1;
  bool has_axis = ctx.node.has_attr("axis");
  int64_t axis = 0;
  if (has_axis) {
    axis = tensor_axis(ctx.node.attr_int("axis", 0), x.rank());
    n = x.shape()[axis];
    outer = shape_numel(Shape(x.shape().begin(), x.shape().begin() + axis));
    inner = shape_numel(Shape(x.shape().begin() + axis + 1, x.shape().end()));
  }
  // Only the number of groups matters here; the order is the kernel's concern.
  auto count = [&](const auto* p) { return int64_t(unique_groups(p, outer, n, inner, true).first.size()); };
  int64_t u;
  if (x.dtype() == DType::f16 || x.dtype() == DType::bf16) {
    std::vector<double> v = x.to_double_vector();
    u = count(v.data());
  } else {
    u = dispatch_all(x.dtype(), [&]<class T>() { return count(x.data<T>()); });
  }
  Shape y = has_axis ? x.shape() : Shape{u};
  if (has_axis) y[axis] = u;
  ctx.set_output(0, x.dtype(), y);
  if (ctx.output_count() > 1) ctx.set_output(1, DType::i64, {u});
  if (ctx.output_count() > 2) ctx.set_output(2, DType::i64, {n});
  if (ctx.output_count() > 3) ctx.set_output(3, DType::i64, {u});
}

}  // namespace

void register_tensor_schemas(SchemaTable& t) {
  t["Reshape"] = {infer_reshape, 2, 2, 0};
  t["Flatten"] = {infer_flatten, 1, 1, 0};
  t["Squeeze"] = {infer_squeeze, 1, 2, 0};
  t["Unsqueeze"] = {infer_unsqueeze, 1, 2, 0};
  t["Identity"] = {infer_identity, 1, 1, 0};
  t["Identity"].non_tensor_values = true;
  t["Dropout"] = {infer_dropout, 1, 3, 0};
  t["Transpose"] = {infer_transpose, 1, 1};
  t["Concat"] = {infer_concat, 1, -1};
  t["Split"] = {infer_split, 1, 2};
  t["Slice"] = {infer_slice, 1, 5};
  t["Gather"] = {infer_gather, 2, 2};
  t["GatherElements"] = {infer_gather_elements, 2, 2};
  t["GatherND"] = {infer_gather_nd, 2, 2};
  t["ScatterND"] = {infer_scatter_nd, 3, 3};
  t["ScatterElements"] = {infer_scatter_elements, 3, 3};
  t["Scatter"] = {infer_scatter_elements, 3, 3};
  t["Expand"] = {infer_expand, 2, 2};
  t["Tile"] = {infer_tile, 2, 2};
  t["Shape"] = {infer_shape, 1, 1};
  t["Size"] = {infer_size, 1, 1};
  t["ConstantOfShape"] = {infer_constant_of_shape, 1, 1};
  t["Constant"] = {infer_constant, 0, 0};
  t["Range"] = {infer_range, 3, 3};
  t["NonZero"] = {infer_non_zero, 1, 1};
  t["Trilu"] = {infer_trilu, 1, 2};
  t["EyeLike"] = {infer_eye_like, 1, 1};
  t["OneHot"] = {infer_one_hot, 3, 3};
  t["Compress"] = {infer_compress, 2, 2};
  t["ReverseSequence"] = {infer_reverse_sequence, 2, 2};
  t["Unique"] = {infer_unique, 1, 1};
  for (const char* op : {"NonZero", "Compress", "Unique"}) t[op].data_dependent_shape = true;
}

}  // namespace vlrt

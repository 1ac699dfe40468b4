// Shape inference for the signal ops: DFT, STFT, the window functions (HannWindow,
// HammingWindow, BlackmanWindow) and MelWeightMatrix.
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

bool is_float_type(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

void check_float_input(const InferContext& ctx, size_t i, const char* what) {
  VLRT_CHECK(is_float_type(ctx.input_dtype(i)), what, " must be float16, bfloat16, float or double, got ",
             dtype_name(ctx.input_dtype(i)));
}

// A scalar (or one-element) int32/int64 input; throws ShapeDeferred while unknown.
int64_t int_scalar(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  VLRT_CHECK(t == DType::i32 || t == DType::i64, what, " must be int32 or int64, got ", dtype_name(t));
  const Tensor& v = ctx.input_value(i);
  VLRT_CHECK(v.rank() <= 1 && v.numel() == 1, what, " must be a scalar, got shape ", shape_str(v.shape()));
  return v.to_int64_vector()[0];
}

// The last axis of a signal holds 1 (real) or 2 (real, imaginary) components.
void check_signal_shape(const Shape& s, const char* what) {
  VLRT_CHECK(s.size() >= 2 && (s.back() == 1 || s.back() == 2), what,
             " must be [batch, ..., n, 1] (real) or [batch, ..., n, 2] (complex), got ", shape_str(s));
}

void infer_dft(InferContext& ctx) {
  check_float_input(ctx, 0, "input");
  Shape s = ctx.input_shape(0);
  check_signal_shape(s, "input");
  int64_t rank = int64_t(s.size());
  int64_t axis = ctx.node.attr_int("axis", 1);
  VLRT_CHECK(axis >= -rank && axis <= rank - 2 && axis != -1, "axis ", axis, " is out of range for input ",
             shape_str(s), " (expected [", -rank, ", -2] or [0, ", rank - 2, "])");
  axis = normalize_axis(axis, rank);
  bool onesided = ctx.node.attr_int("onesided", 0) != 0, inverse = ctx.node.attr_int("inverse", 0) != 0;
  if (onesided && inverse)
    unsupported("onesided=1 with inverse=1 (a complex-to-real inverse DFT); use onesided=0");
  int64_t n = s[axis];
  if (ctx.has_input(1)) {
    n = int_scalar(ctx, 1, "dft_length (input 1)");
    VLRT_CHECK(n >= 1, "dft_length (input 1) must be at least 1, got ", n);
  }
  s[axis] = onesided ? n / 2 + 1 : n;
  s.back() = 2;
  ctx.set_output(0, ctx.input_dtype(0), s);
}

void infer_stft(InferContext& ctx) {
  check_float_input(ctx, 0, "signal");
  const Shape& s = ctx.input_shape(0);
  VLRT_CHECK(s.size() == 3 && (s[2] == 1 || s[2] == 2), "signal must be [batch, length, 1] (real) or ",
             "[batch, length, 2] (complex), got ", shape_str(s));
  int64_t step = int_scalar(ctx, 1, "frame_step (input 1)");
  VLRT_CHECK(step >= 1, "frame_step (input 1) must be at least 1, got ", step);
  int64_t length = -1;
  if (ctx.has_input(2)) {
    VLRT_CHECK(ctx.input_dtype(2) == ctx.input_dtype(0), "window (input 2) must have the signal's type ",
               dtype_name(ctx.input_dtype(0)), ", got ", dtype_name(ctx.input_dtype(2)));
    const Shape& w = ctx.input_shape(2);
    VLRT_CHECK(w.size() == 1, "window (input 2) must be 1-D, got ", shape_str(w));
    length = w[0];
  }
  if (ctx.has_input(3)) {
    int64_t fl = int_scalar(ctx, 3, "frame_length (input 3)");
    VLRT_CHECK(length < 0 || fl == length, "frame_length (input 3) is ", fl, " but the window has ", length,
               " values; they must match");
    length = fl;
  }
  VLRT_CHECK(length >= 0, "needs a window (input 2) or a frame_length (input 3)");
  VLRT_CHECK(length >= 1 && length <= s[1], "frame length ", length, " must be in [1, ", s[1],
             "] (the signal's length)");
  bool onesided = ctx.node.attr_int("onesided", 1) != 0;
  int64_t frames = (s[1] - length) / step + 1;
  ctx.set_output(0, ctx.input_dtype(0), {s[0], frames, onesided ? length / 2 + 1 : length, 2});
}

DType output_datatype(const InferContext& ctx) {
  int64_t v = ctx.node.attr_int("output_datatype", 1);
  DType t = dtype_from_onnx(int32_t(v));
  VLRT_CHECK(dtype_supported(t) && t != DType::boolean && t != DType::string, "output_datatype ", v,
             " is not a numeric tensor type");
  return t;
}

void infer_window(InferContext& ctx) {
  int64_t size = int_scalar(ctx, 0, "size (input 0)");
  VLRT_CHECK(size >= 0, "size (input 0) must not be negative, got ", size);
  ctx.set_output(0, output_datatype(ctx), {size});
}

void infer_mel_weight_matrix(InferContext& ctx) {
  int64_t bins = int_scalar(ctx, 0, "num_mel_bins (input 0)");
  int64_t dft_length = int_scalar(ctx, 1, "dft_length (input 1)");
  int_scalar(ctx, 2, "sample_rate (input 2)");
  VLRT_CHECK(ctx.input_dtype(1) == ctx.input_dtype(0) && ctx.input_dtype(2) == ctx.input_dtype(0),
             "num_mel_bins, dft_length and sample_rate must have one type");
  check_float_input(ctx, 3, "lower_edge_hertz (input 3)");
  VLRT_CHECK(ctx.input_dtype(4) == ctx.input_dtype(3), "upper_edge_hertz (input 4) must have the type of ",
             "lower_edge_hertz (", dtype_name(ctx.input_dtype(3)), "), got ", dtype_name(ctx.input_dtype(4)));
  VLRT_CHECK(bins >= 1 && dft_length >= 1, "num_mel_bins and dft_length must be positive, got ", bins,
             " and ", dft_length);
  ctx.set_output(0, output_datatype(ctx), {dft_length / 2 + 1, bins});
}

}  // namespace

void register_signal_schemas(SchemaTable& t) {
  t["DFT"] = {infer_dft, 1, 2};
  t["STFT"] = {infer_stft, 2, 4};
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) t[w] = {infer_window, 1, 1};
  t["MelWeightMatrix"] = {infer_mel_weight_matrix, 5, 5};
}

}  // namespace vlrt

// Recurrent ops: RNN, GRU, LSTM and com.microsoft.DynamicQuantizeLSTM (an LSTM whose W and R are
// 8-bit with per-tensor or per-channel scales and zero points).
#include "ops/op_schema.h"
#include "ops/recurrent_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

const char* gate_names(RnnKind kind) {
  return kind == RnnKind::rnn ? "" : kind == RnnKind::gru ? " (gates z, r, h)" : " (gates i, o, f, c)";
}

bool is_recurrent_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

void check_shape(InferContext& ctx, size_t i, const char* name, const Shape& expected,
                 const std::string& why) {
  const Shape& s = ctx.input_shape(i);
  VLRT_CHECK(s == expected, name, " must have shape ", shape_str(expected), " (", why, "), got ",
             shape_str(s));
}

// The shape of initial_h, initial_c, Y_h and Y_c.
Shape state_shape(const RnnAttrs& a, int64_t batch, int64_t hidden) {
  return a.layout == 0 ? Shape{a.num_directions, batch, hidden} : Shape{batch, a.num_directions, hidden};
}

void infer_recurrent(InferContext& ctx) {
  const bool quantized = ctx.node.domain == "com.microsoft";
  RnnAttrs a = rnn_attrs(ctx.node);
  const int64_t gates = rnn_gate_count(a.kind), nd = a.num_directions;
  DType t = ctx.input_dtype(0);
  VLRT_CHECK(is_recurrent_float(t), "X must be float32, float64, float16 or bfloat16, got ", dtype_name(t));
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() == 3, "X must have rank 3 (",
             a.layout == 0 ? "[seq_length, batch_size, input_size]" : "[batch_size, seq_length, input_size]",
             " for layout ", a.layout, "), got ", shape_str(x));
  const int64_t seq = a.layout == 0 ? x[0] : x[1], batch = a.layout == 0 ? x[1] : x[0], input = x[2];

  // W and R give the hidden size; hidden_size, when given, must agree.
  const Shape& w = ctx.input_shape(1);
  const Shape& r = ctx.input_shape(2);
  VLRT_CHECK(w.size() == 3 && r.size() == 3, "W and R must have rank 3, got W ", shape_str(w), " and R ",
             shape_str(r));
  int64_t hidden = a.hidden_size;
  if (hidden < 0) hidden = quantized ? r[1] : r[2];
  const std::string gate_rows = cat(gates == 1 ? "" : cat(gates, "*"), "hidden_size");
  const std::string hs = cat("hidden_size=", hidden, a.hidden_size >= 0 ? " from the attribute" : " from R");
  if (quantized) {
    for (size_t i : {size_t(1), size_t(2)}) {
      DType q = ctx.input_dtype(i);
      VLRT_CHECK(q == DType::u8 || q == DType::i8, i == 1 ? "W" : "R", " must be uint8 or int8, got ",
                 dtype_name(q));
    }
    check_shape(ctx, 1, "W", {nd, input, gates * hidden},
                cat("[num_directions, input_size, ", gate_rows, "]", gate_names(a.kind), ", ", hs));
    check_shape(ctx, 2, "R", {nd, hidden, gates * hidden},
                cat("[num_directions, hidden_size, ", gate_rows, "], ", hs));
    const char* names[] = {"W_scale", "W_zero_point", "R_scale", "R_zero_point"};
    for (size_t k = 0; k < 4; k++) {
      size_t i = 8 + k;
      VLRT_CHECK(ctx.has_input(i), names[k], " (input ", i, ") is required");
      const Shape& s = ctx.input_shape(i);
      const Shape per_tensor{nd}, per_channel{nd, gates * hidden};
      VLRT_CHECK(s == per_tensor || s == per_channel, names[k], " must have shape ", shape_str(per_tensor),
                 " (per tensor) or ", shape_str(per_channel), " (per channel), got ", shape_str(s));
      if (k % 2 == 0) {
        VLRT_CHECK(ctx.input_dtype(i) == DType::f32, names[k], " must be float32, got ",
                   dtype_name(ctx.input_dtype(i)));
      } else {
        DType q = ctx.input_dtype(k < 2 ? 1 : 2);
        VLRT_CHECK(ctx.input_dtype(i) == q, names[k], " must have the type of ", k < 2 ? "W" : "R", " (",
                   dtype_name(q), "), got ", dtype_name(ctx.input_dtype(i)));
        VLRT_CHECK(s == ctx.input_shape(i - 1), names[k], " must have the shape of ", names[k - 1], " ",
                   shape_str(ctx.input_shape(i - 1)), ", got ", shape_str(s));
      }
    }
  } else {
    for (size_t i : {size_t(1), size_t(2)})
      VLRT_CHECK(ctx.input_dtype(i) == t, i == 1 ? "W" : "R", " must have the type of X (", dtype_name(t),
                 "), got ", dtype_name(ctx.input_dtype(i)));
    check_shape(ctx, 1, "W", {nd, gates * hidden, input},
                cat("[num_directions, ", gate_rows, ", input_size]", gate_names(a.kind), ", ", hs));
    check_shape(ctx, 2, "R", {nd, gates * hidden, hidden},
                cat("[num_directions, ", gate_rows, ", hidden_size], ", hs));
  }
  auto check_float = [&](size_t i, const char* name, const Shape& expected, const std::string& why) {
    if (!ctx.has_input(i)) return;
    VLRT_CHECK(ctx.input_dtype(i) == t, name, " must have the type of X (", dtype_name(t), "), got ",
               dtype_name(ctx.input_dtype(i)));
    check_shape(ctx, i, name, expected, why);
  };
  check_float(3, "B", {nd, 2 * gates * hidden}, cat("[num_directions, 2*", gate_rows, "]: Wb then Rb, ", hs));
  if (ctx.has_input(4)) {
    DType l = ctx.input_dtype(4);
    VLRT_CHECK(l == DType::i32 || l == DType::i64, "sequence_lens must be int32, got ", dtype_name(l));
    check_shape(ctx, 4, "sequence_lens", {batch}, "[batch_size]");
  }
  const Shape state = state_shape(a, batch, hidden);
  const std::string state_why = a.layout == 0
                                    ? cat("[num_directions, batch_size, hidden_size], ", hs)
                                    : cat("[batch_size, num_directions, hidden_size] for layout 1, ", hs);
  check_float(5, "initial_h", state, state_why);
  if (a.kind == RnnKind::lstm) {
    check_float(6, "initial_c", state, state_why);
    check_float(7, "P", {nd, 3 * hidden}, cat("[num_directions, 3*hidden_size]: peepholes i, o, f, ", hs));
  }

  size_t max_outputs = a.kind == RnnKind::lstm ? 3 : 2;
  VLRT_CHECK(ctx.output_count() <= max_outputs, "has ", ctx.output_count(), " outputs, expected at most ",
             max_outputs, a.kind == RnnKind::lstm ? " (Y, Y_h, Y_c)" : " (Y, Y_h)");
  if (ctx.output_count() > 0)
    ctx.set_output(0, t, a.layout == 0 ? Shape{seq, nd, batch, hidden} : Shape{batch, seq, nd, hidden});
  for (size_t i = 1; i < ctx.output_count(); i++) ctx.set_output(i, t, state);
}

}  // namespace

void register_recurrent_schemas(SchemaTable& t) {
  t["RNN"] = {infer_recurrent, 3, 6};
  t["GRU"] = {infer_recurrent, 3, 6};
  t["LSTM"] = {infer_recurrent, 3, 8};
  t["com.microsoft.DynamicQuantizeLSTM"] = {infer_recurrent, 12, 12};
}

}  // namespace vlrt

// ONNX Runtime's Attention (packed QKV weights), MultiHeadAttention (separate Q, K, V) and
// GroupQueryAttention (fewer K/V heads than Q heads, with a KV cache): the shapes ONNX
// Runtime's CPU kernels accept.
#include <algorithm>

#include "ops/contrib_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

void require_float(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  VLRT_CHECK(dtype_is_float(t), what, " must be a floating-point tensor, got ", dtype_name(t));
  VLRT_CHECK(t == ctx.input_dtype(0), what, " is ", dtype_name(t), " but the input is ",
             dtype_name(ctx.input_dtype(0)), "; they must match");
}

int64_t num_heads_of(const InferContext& ctx) {
  VLRT_CHECK(ctx.node.has_attr("num_heads"), "attribute num_heads is required");
  int64_t n = ctx.node.attr_int("num_heads", 0);
  VLRT_CHECK(n > 0, "num_heads must be positive, got ", n);
  return n;
}

void require_heads_divide(int64_t heads, int64_t hidden, const char* what) {
  VLRT_CHECK(hidden % heads == 0, "num_heads ", heads, " does not divide the ", what, " ", hidden);
}

// attention_bias [B or 1, N or 1, S, T], added to the scores.
void check_attention_bias(const InferContext& ctx, size_t i, int64_t b, int64_t n, int64_t s, int64_t t) {
  if (!ctx.has_input(i)) return;
  require_float(ctx, i, "attention_bias");
  const Shape& a = ctx.input_shape(i);
  VLRT_CHECK(a.size() == 4 && (a[0] == b || a[0] == 1) && (a[1] == n || a[1] == 1) && a[2] == s && a[3] == t,
             "attention_bias must have shape [", b, " or 1, ", n, " or 1, ", s, ", ", t, "], got ",
             shape_str(a));
}

void infer_attention(InferContext& ctx) {
  VLRT_CHECK(dtype_is_float(ctx.input_dtype(0)), "input must be a floating-point tensor");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() == 3, "input must be 3-D [batch, sequence, input_hidden], got ", shape_str(x));
  int64_t b = x[0], s = x[1], heads = num_heads_of(ctx);
  require_float(ctx, 1, "weights");
  const Shape& w = ctx.input_shape(1);
  VLRT_CHECK(w.size() == 2 && w[0] == x[2], "weights must be 2-D [", x[2],
             " (input hidden size), q+k+v hidden], got ", shape_str(w));
  std::vector<int64_t> sizes = ctx.node.attr_ints("qkv_hidden_sizes");
  if (sizes.empty()) {
    VLRT_CHECK(w[1] % 3 == 0, "weights' second dimension ", w[1], " must be 3 * hidden size");
    sizes = {w[1] / 3, w[1] / 3, w[1] / 3};
  }
  VLRT_CHECK(sizes.size() == 3 && sizes[0] == sizes[1] && sizes[0] > 0 && sizes[2] > 0 &&
                 sizes[0] + sizes[1] + sizes[2] == w[1],
             "qkv_hidden_sizes must be 3 positive sizes with q == k summing to weights' ", w[1], " columns");
  require_heads_divide(heads, sizes[0], "q/k hidden size");
  require_heads_divide(heads, sizes[2], "v hidden size");
  if (ctx.has_input(2)) {
    require_float(ctx, 2, "bias");
    VLRT_CHECK(ctx.input_shape(2) == Shape{w[1]}, "bias must have shape [", w[1], "], got ",
               shape_str(ctx.input_shape(2)));
  }
  VLRT_CHECK(!ctx.node.attr_int("past_present_share_buffer", 0),
             "past_present_share_buffer=1 is not supported");
  VLRT_CHECK(!ctx.node.attr_int("do_rotary", 0), "do_rotary=1 is not supported");
  int64_t past = 0, head = sizes[0] / heads;
  if (ctx.has_input(4)) {
    require_float(ctx, 4, "past");
    const Shape& p = ctx.input_shape(4);
    VLRT_CHECK(sizes[0] == sizes[2], "past needs equal q, k and v hidden sizes");
    VLRT_CHECK(p.size() == 5 && p[0] == 2 && p[1] == b && p[2] == heads && p[4] == head,
               "past must have shape [2, ", b, ", ", heads, ", past_sequence, ", head, "], got ",
               shape_str(p));
    past = p[3];
  }
  int64_t total = past + s;
  if (ctx.has_input(3)) {
    VLRT_CHECK(ctx.input_dtype(3) == DType::i32, "mask_index must be int32, got ",
               dtype_name(ctx.input_dtype(3)));
    const Shape& m = ctx.input_shape(3);
    bool ok = (m.size() == 1 && (m[0] == b || m[0] == 2 * b)) ||
              (m.size() == 2 && m[0] == b && m[1] == total) ||
              (m.size() == 3 && m[0] == b && m[1] == s && m[2] == total) ||
              (m.size() == 4 && m[0] == b && m[1] == 1 && m[2] == m[3] && m[2] >= total);
    VLRT_CHECK(ok, "mask_index must be [", b, "] or [", 2 * b, "] (key lengths), [", b, ", ", total, "], [",
               b, ", ", s, ", ", total, "] or [", b, ", 1, max_sequence, max_sequence], got ", shape_str(m));
  }
  check_attention_bias(ctx, 5, b, heads, s, total);
  VLRT_CHECK(ctx.output_count() <= 2, "has ", ctx.output_count(),
             " outputs, expected at most 2 (output, present)");
  ctx.set_output(0, ctx.input_dtype(0), {b, s, sizes[2]});
  if (ctx.output_count() > 1) ctx.set_output(1, ctx.input_dtype(0), {2, b, heads, total, head});
}

void infer_multi_head_attention(InferContext& ctx) {
  VLRT_CHECK(dtype_is_float(ctx.input_dtype(0)), "query must be a floating-point tensor");
  const Shape& q = ctx.input_shape(0);
  VLRT_CHECK(q.size() == 3, "query must be 3-D [batch, sequence, hidden] (packed QKV is not supported), got ",
             shape_str(q));
  VLRT_CHECK(ctx.has_input(1) && ctx.has_input(2),
             "key and value are required (packed QKV is not supported)");
  int64_t b = q[0], s = q[1], d = q[2], heads = num_heads_of(ctx);
  require_float(ctx, 1, "key");
  require_float(ctx, 2, "value");
  const Shape &k = ctx.input_shape(1), &v = ctx.input_shape(2);
  VLRT_CHECK(k.size() == 3 && k[0] == b && k[2] == d, "key must be 3-D [", b, ", kv_sequence, ", d,
             "] (BNSH keys are not supported), got ", shape_str(k));
  VLRT_CHECK(v.size() == 3 && v[0] == b && v[1] == k[1], "value must be 3-D [", b, ", ", k[1],
             ", v_hidden], got ", shape_str(v));
  require_heads_divide(heads, d, "hidden size");
  require_heads_divide(heads, v[2], "v hidden size");
  int64_t head = d / heads, vhead = v[2] / heads;
  if (ctx.has_input(3)) {
    require_float(ctx, 3, "bias");
    VLRT_CHECK(ctx.input_shape(3) == Shape{2 * d + v[2]}, "bias must have shape [", 2 * d + v[2],
               "] (q, k and v biases), got ", shape_str(ctx.input_shape(3)));
  }
  int64_t past = 0;
  VLRT_CHECK(ctx.has_input(6) == ctx.has_input(7), "past_key and past_value come together");
  if (ctx.has_input(6)) {
    require_float(ctx, 6, "past_key");
    require_float(ctx, 7, "past_value");
    const Shape &pk = ctx.input_shape(6), &pv = ctx.input_shape(7);
    VLRT_CHECK(pk.size() == 4 && pk[0] == b && pk[1] == heads && pk[3] == head, "past_key must be [", b, ", ",
               heads, ", past_sequence, ", head, "], got ", shape_str(pk));
    VLRT_CHECK(pv.size() == 4 && pv[0] == b && pv[1] == heads && pv[2] == pk[2] && pv[3] == vhead,
               "past_value must be [", b, ", ", heads, ", ", pk[2], ", ", vhead, "], got ", shape_str(pv));
    past = pk[2];
  }
  int64_t total = past + k[1];
  if (ctx.has_input(4)) {
    VLRT_CHECK(ctx.input_dtype(4) == DType::i32, "key_padding_mask must be int32, got ",
               dtype_name(ctx.input_dtype(4)));
    const Shape& m = ctx.input_shape(4);
    VLRT_CHECK((m.size() == 1 && m[0] == b) || (m.size() == 2 && m[0] == b && m[1] == total),
               "key_padding_mask must be [", b, "] (key lengths) or [", b, ", ", total, "], got ",
               shape_str(m));
  }
  check_attention_bias(ctx, 5, b, heads, s, total);
  VLRT_CHECK(!ctx.has_input(8) && !ctx.has_input(9),
             "past_sequence_length and cache_indirection are not supported");
  VLRT_CHECK(ctx.output_count() <= 3, "has ", ctx.output_count(),
             " outputs, expected at most 3 (output, present_key, present_value)");
  ctx.set_output(0, ctx.input_dtype(0), {b, s, v[2]});
  if (ctx.output_count() > 1) ctx.set_output(1, ctx.input_dtype(0), {b, heads, total, head});
  if (ctx.output_count() > 2) ctx.set_output(2, ctx.input_dtype(0), {b, heads, total, vhead});
}

// ---- GroupQueryAttention ------------------------------------------------------------

void check_rotary_caches(const InferContext& ctx, const GroupQueryDims& d) {
  VLRT_CHECK(ctx.has_input(7) == ctx.has_input(8), "cos_cache and sin_cache come together");
  if (!ctx.node.attr_int("do_rotary", 0)) return;
  VLRT_CHECK(ctx.has_input(7), "do_rotary=1 needs cos_cache and sin_cache (inputs 7 and 8)");
  require_float(ctx, 7, "cos_cache");
  require_float(ctx, 8, "sin_cache");
  const Shape &c = ctx.input_shape(7), &s = ctx.input_shape(8);
  VLRT_CHECK(c.size() == 2 && s == c && c[1] > 0 && 2 * c[1] <= d.head_size,
             "cos_cache and sin_cache must be 2-D [max_position, rotary_dim / 2] of one shape with "
             "rotary_dim <= the head size ",
             d.head_size, ", got ", shape_str(c), " and ", shape_str(s));
}

void infer_group_query_attention(InferContext& ctx) {
  VLRT_CHECK(dtype_is_float(ctx.input_dtype(0)), "query must be a floating-point tensor");
  const Shape& q = ctx.input_shape(0);
  VLRT_CHECK(q.size() == 3, "query must be 3-D [batch, sequence, hidden], got ", shape_str(q));
  bool packed = !ctx.has_input(1);
  VLRT_CHECK(packed == !ctx.has_input(2), "key and value come together (both absent for packed QKV)");
  GroupQueryDims d = group_query_dims(ctx.node, q[2], packed);
  int64_t b = q[0], s = q[1], kv_hidden = d.kv_heads * d.head_size;
  if (!packed) {
    for (size_t i = 1; i < 3; i++) {
      const char* what = i == 1 ? "key" : "value";
      require_float(ctx, i, what);
      VLRT_CHECK(ctx.input_shape(i) == (Shape{b, s, kv_hidden}), what, " must be [", b, ", ", s, ", ",
                 kv_hidden, "] (kv_num_heads * head size), got ", shape_str(ctx.input_shape(i)));
    }
  }
  VLRT_CHECK(ctx.has_input(3) == ctx.has_input(4), "past_key and past_value come together");
  int64_t past = 0;
  if (ctx.has_input(3)) {
    require_float(ctx, 3, "past_key");
    require_float(ctx, 4, "past_value");
    const Shape& pk = ctx.input_shape(3);
    VLRT_CHECK(pk.size() == 4 && pk[0] == b && pk[1] == d.kv_heads && pk[3] == d.head_size &&
                   ctx.input_shape(4) == pk,
               "past_key and past_value must both be [", b, ", ", d.kv_heads, ", past_sequence, ",
               d.head_size, "], got ", shape_str(pk), " and ", shape_str(ctx.input_shape(4)));
    past = pk[2];
  }
  VLRT_CHECK(ctx.input_dtype(5) == DType::i32, "seqlens_k must be int32, got ",
             dtype_name(ctx.input_dtype(5)));
  VLRT_CHECK(ctx.input_shape(5) == Shape{b}, "seqlens_k must have shape [", b,
             "] (each sequence's total length - 1), got ", shape_str(ctx.input_shape(5)));
  VLRT_CHECK(ctx.input_dtype(6) == DType::i32, "total_sequence_length must be int32, got ",
             dtype_name(ctx.input_dtype(6)));
  VLRT_CHECK(shape_numel(ctx.input_shape(6)) == 1, "total_sequence_length must have one element, got ",
             shape_str(ctx.input_shape(6)));
  check_rotary_caches(ctx, d);
  if (ctx.has_input(9)) {
    VLRT_CHECK(ctx.input_dtype(9) == DType::i64, "position_ids must be int64, got ",
               dtype_name(ctx.input_dtype(9)));
    VLRT_CHECK(ctx.input_shape(9) == (Shape{b, s}), "position_ids must be [", b, ", ", s, "], got ",
               shape_str(ctx.input_shape(9)));
  }
  VLRT_CHECK(!ctx.has_input(11), "head_sink (input 11) is not supported");
  VLRT_CHECK(!ctx.node.attr_int("qk_output", 0) && ctx.output_count() <= 3, "has ", ctx.output_count(),
             " outputs; output_qk is not supported (at most output, present_key, present_value)");
  int64_t total = ctx.input_value(6).to_int64_vector()[0];
  VLRT_CHECK(total >= s, "total_sequence_length ", total, " is less than the query's ", s, " positions");
  int64_t present = std::max(total, past);
  check_attention_bias(ctx, 10, b, d.heads, s, present);
  ctx.set_output(0, ctx.input_dtype(0), {b, s, d.heads * d.head_size});
  for (size_t i = 1; i < ctx.output_count(); i++)
    ctx.set_output(i, ctx.input_dtype(0), {b, d.kv_heads, present, d.head_size});
}

}  // namespace

GroupQueryDims group_query_dims(const Node& n, int64_t hidden, bool packed) {
  VLRT_CHECK(n.has_attr("num_heads") && n.has_attr("kv_num_heads"),
             "attributes num_heads and kv_num_heads are required");
  GroupQueryDims d{n.attr_int("num_heads", 0), n.attr_int("kv_num_heads", 0), 0};
  VLRT_CHECK(d.heads > 0 && d.kv_heads > 0, "num_heads and kv_num_heads must be positive, got ", d.heads,
             " and ", d.kv_heads);
  VLRT_CHECK(d.heads % d.kv_heads == 0, "num_heads ", d.heads, " is not a multiple of kv_num_heads ",
             d.kv_heads);
  int64_t slots = packed ? d.heads + 2 * d.kv_heads : d.heads;
  VLRT_CHECK(hidden % slots == 0, "query's hidden size ", hidden, " is not a multiple of ",
             packed ? "num_heads + 2 * kv_num_heads = " : "num_heads = ", slots);
  d.head_size = hidden / slots;
  return d;
}

namespace {}  // namespace

void register_contrib_attention_schemas(SchemaTable& t) {
  t["com.microsoft.Attention"] = {infer_attention, 2, 7};
  t["com.microsoft.MultiHeadAttention"] = {infer_multi_head_attention, 1, 10};
  t["com.microsoft.GroupQueryAttention"] = {infer_group_query_attention, 7, 12};
}

}  // namespace vlrt

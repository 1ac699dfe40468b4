// ONNX Runtime's contrib ops (domain com.microsoft) that its transformer optimizer and
// onnxruntime-genai's model builder write, with the shapes ONNX Runtime accepts
// (docs/ContribOperators.md). SimplifiedLayerNormalization is keyed in the default domain,
// where ONNX Runtime registers it.
#include <algorithm>
#include <cmath>

#include "ops/contrib_semantics.h"
#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

const char* const kMs = "com.microsoft.";

void require_float(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.input_dtype(i);
  VLRT_CHECK(dtype_is_float(t), what, " must be a floating-point tensor, got ", dtype_name(t));
}

void require_same_dtype(const InferContext& ctx, size_t i, const char* what, const char* of) {
  VLRT_CHECK(ctx.input_dtype(i) == ctx.input_dtype(0), what, " is ", dtype_name(ctx.input_dtype(i)), " but ",
             of, " is ", dtype_name(ctx.input_dtype(0)), "; they must match");
}

// Input i (when given) must be a 1-D tensor of n elements of the input's dtype.
void require_vector(const InferContext& ctx, size_t i, const char* what, int64_t n, const char* of) {
  if (!ctx.has_input(i)) return;
  require_same_dtype(ctx, i, what, "the input");
  const Shape& s = ctx.input_shape(i);
  VLRT_CHECK(s.size() == 1 && s[0] == n, what, " must have shape [", n, "] (", of, "), got ", shape_str(s));
}

void require_int32(const InferContext& ctx, size_t i, const char* what) {
  VLRT_CHECK(ctx.input_dtype(i) == DType::i32, what, " must be int32, got ", dtype_name(ctx.input_dtype(i)));
}

// ---- Gelu family -------------------------------------------------------------------

void infer_unary_float(InferContext& ctx) {
  require_float(ctx, 0, "X");
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

// FastGelu and BiasGelu: X plus an optional bias over its last axis.
void infer_bias_gelu(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(!x.empty(), "X must have rank >= 1, got a scalar");
  require_vector(ctx, 1, "bias", x.back(), "the last dimension of X");
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_bias_add(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() == 3, "X must be 3-D [batch, sequence, channels], got ", shape_str(x));
  require_vector(ctx, 1, "bias", x[2], "the channels of X");
  require_same_dtype(ctx, 2, "skip", "X");
  VLRT_CHECK(ctx.input_shape(2) == x, "skip must have X's shape ", shape_str(x), ", got ",
             shape_str(ctx.input_shape(2)));
  ctx.set_output(0, ctx.input_dtype(0), x);
}

// ---- Layer normalizations ------------------------------------------------------------

// x with its last axis set to 1: the shape of per-row statistics.
Shape row_stat_shape(Shape x) {
  x.back() = 1;
  return x;
}

// SkipLayerNormalization (bias at 4, simplified=false) and SkipSimplifiedLayerNormalization
// (bias at 3): input [B,S,H] or [B*S,H]; skip of the same shape, [1,S,H] or [S,H].
void infer_skip_norm(InferContext& ctx, bool simplified) {
  require_float(ctx, 0, "input");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() == 2 || x.size() == 3, "input must be 3-D [batch, sequence, hidden] or 2-D, got ",
             shape_str(x));
  int64_t hidden = x.back();
  require_same_dtype(ctx, 1, "skip", "input");
  const Shape& skip = ctx.input_shape(1);
  bool ok = skip == x;
  if (!ok && x.size() == 3 && skip.size() == 3) ok = skip[0] == 1 && skip[1] == x[1] && skip[2] == hidden;
  if (!ok && x.size() == 3 && skip.size() == 2) ok = skip[0] == x[1] && skip[1] == hidden;
  VLRT_CHECK(ok, "skip must have input's shape ", shape_str(x),
             " or [1, sequence, hidden] or [sequence, hidden], got ", shape_str(skip));
  require_vector(ctx, 2, "gamma", hidden, "the hidden size");
  if (!simplified) require_vector(ctx, 3, "beta", hidden, "the hidden size");
  require_vector(ctx, simplified ? 3 : 4, "bias", hidden, "the hidden size");
  VLRT_CHECK(ctx.output_count() <= 4, "has ", ctx.output_count(),
             " outputs, expected at most 4 (output, mean, inv_std_var, input_skip_bias_sum)");
  ctx.set_output(0, ctx.input_dtype(0), x);
  for (size_t i = 1; i < ctx.output_count(); i++)
    ctx.set_output(i, ctx.input_dtype(0), i == 3 ? x : row_stat_shape(x));
}

void infer_skip_layer_norm(InferContext& ctx) { infer_skip_norm(ctx, false); }
void infer_skip_simplified_layer_norm(InferContext& ctx) { infer_skip_norm(ctx, true); }

// RMS normalization over the axes from `axis` on; scale has the normalized shape.
void infer_simplified_layer_norm(InferContext& ctx) {
  require_float(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(!x.empty(), "X must have rank >= 1, got a scalar");
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", -1), int64_t(x.size()));
  Shape norm(x.begin() + axis, x.end());
  require_same_dtype(ctx, 1, "scale", "X");
  VLRT_CHECK(shape_numel(ctx.input_shape(1)) == shape_numel(norm), "scale must have the normalized shape ",
             shape_str(norm), " (X's axes from axis=", axis, "), got ", shape_str(ctx.input_shape(1)));
  int64_t stash_type = ctx.node.attr_int("stash_type", 1);
  VLRT_CHECK(stash_type == 1, "stash_type ", stash_type, " is not supported, only 1 (float)");
  VLRT_CHECK(ctx.output_count() <= 2, "has ", ctx.output_count(),
             " outputs, expected at most 2 (Y, inv_std_var)");
  ctx.set_output(0, ctx.input_dtype(0), x);
  if (ctx.output_count() > 1) {
    Shape stat = x;
    for (size_t d = size_t(axis); d < stat.size(); d++) stat[d] = 1;
    ctx.set_output(1, DType::f32, stat);
  }
}

// input_ids [B,S] look up word, position and segment embeddings of hidden size H.
void infer_embed_layer_norm(InferContext& ctx) {
  require_int32(ctx, 0, "input_ids");
  const Shape& ids = ctx.input_shape(0);
  VLRT_CHECK(ids.size() == 2, "input_ids must be 2-D [batch, sequence], got ", shape_str(ids));
  require_float(ctx, 2, "word_embedding");
  const Shape& word = ctx.input_shape(2);
  VLRT_CHECK(word.size() == 2, "word_embedding must be 2-D [vocab, hidden], got ", shape_str(word));
  int64_t hidden = word[1];
  DType t = ctx.input_dtype(2);
  auto table = [&](size_t i, const char* what) {
    if (!ctx.has_input(i)) return;
    VLRT_CHECK(ctx.input_dtype(i) == t, what, " must be ", dtype_name(t), " like word_embedding, got ",
               dtype_name(ctx.input_dtype(i)));
    const Shape& s = ctx.input_shape(i);
    VLRT_CHECK(s.size() == 2 && s[1] == hidden, what, " must be 2-D [rows, ", hidden,
               "] (the hidden size of word_embedding), got ", shape_str(s));
  };
  table(3, "position_embedding");
  VLRT_CHECK(ctx.has_input(1) == ctx.has_input(4), "segment_ids and segment_embedding come together; ",
             ctx.has_input(1) ? "segment_embedding" : "segment_ids", " is missing");
  table(4, "segment_embedding");
  for (size_t i = 5; i < 7; i++) {
    const char* what = i == 5 ? "gamma" : "beta";
    if (i == 6 && !ctx.has_input(6)) continue;
    VLRT_CHECK(ctx.input_dtype(i) == t, what, " must be ", dtype_name(t), ", got ",
               dtype_name(ctx.input_dtype(i)));
    VLRT_CHECK(ctx.input_shape(i) == Shape{hidden}, what, " must have shape [", hidden,
               "] (the hidden size), got ", shape_str(ctx.input_shape(i)));
  }
  auto per_token = [&](size_t i, const char* what, bool may_share_batch) {
    if (!ctx.has_input(i)) return;
    require_int32(ctx, i, what);
    const Shape& s = ctx.input_shape(i);
    VLRT_CHECK(s == ids || (may_share_batch && s.size() == 2 && s[0] == 1 && s[1] == ids[1]), what,
               " must have input_ids' shape ", shape_str(ids), may_share_batch ? " or [1, sequence]" : "",
               ", got ", shape_str(s));
  };
  per_token(1, "segment_ids", false);
  per_token(7, "mask", false);
  per_token(8, "position_ids", true);
  VLRT_CHECK(ctx.output_count() <= 3, "has ", ctx.output_count(),
             " outputs, expected at most 3 (output, mask_index, embedding_sum)");
  ctx.set_output(0, t, {ids[0], ids[1], hidden});
  if (ctx.output_count() > 1) ctx.set_output(1, DType::i32, {ids[0]});
  if (ctx.output_count() > 2) ctx.set_output(2, t, {ids[0], ids[1], hidden});
}

// ---- FusedMatMul and FusedConv: MatMul and Conv with more attributes ----------------

// FusedMatMul's operand `i` as MatMul sees it: transBatch moves the first axis behind the
// other batch axes, trans swaps the last two.
Shape fused_matmul_operand(const Shape& s, bool trans_batch, bool trans) {
  std::vector<int64_t> perm = fused_matmul_perm(s.size(), trans_batch, trans);
  Shape out(s.size());
  for (size_t d = 0; d < s.size(); d++) out[d] = s[size_t(perm[d])];
  return out;
}

void infer_fused_matmul(InferContext& ctx) {
  require_float(ctx, 0, "A");
  require_same_dtype(ctx, 1, "B", "A");
  const Node& n = ctx.node;
  ValueInfo a{ctx.input_dtype(0),
              true,
              fused_matmul_operand(ctx.input_shape(0), n.attr_int("transBatchA", 0), n.attr_int("transA", 0)),
              {}};
  ValueInfo b{ctx.input_dtype(1),
              true,
              fused_matmul_operand(ctx.input_shape(1), n.attr_int("transBatchB", 0), n.attr_int("transB", 0)),
              {}};
  InferContext inner(n, ctx.opset, {&a, &b});
  find_schema("", "MatMul")->infer(inner);
  ctx.outputs[0] = inner.outputs[0];
}

void infer_fused_conv(InferContext& ctx) {
  fused_conv_activation(ctx.node);
  FusedActivation::Kind pre = fused_conv_activation(ctx.node, "pre_activation").kind;
  VLRT_CHECK(pre == FusedActivation::none || pre == FusedActivation::quantize_dequantize,
             "pre_activation must be QuantizeDequantize (or absent), got ",
             ctx.node.attr_string("pre_activation", ""));
  std::vector<const ValueInfo*> conv_inputs;
  std::vector<ValueInfo> given(std::min<size_t>(ctx.input_count(), 3));
  for (size_t i = 0; i < given.size(); i++) {
    if (!ctx.has_input(i)) {
      conv_inputs.push_back(nullptr);
      continue;
    }
    given[i] = {ctx.input_dtype(i), true, ctx.input_shape(i), {}};
    conv_inputs.push_back(&given[i]);
  }
  InferContext inner(ctx.node, ctx.opset, conv_inputs);
  find_schema("", "Conv")->infer(inner);
  ctx.outputs[0] = inner.outputs[0];
  if (ctx.has_input(3)) {
    require_same_dtype(ctx, 3, "Z", "X");
    VLRT_CHECK(ctx.input_shape(3) == ctx.outputs[0].shape,
               "Z (added before the activation) must have the output's shape ",
               shape_str(ctx.outputs[0].shape), ", got ", shape_str(ctx.input_shape(3)));
  }
}

// ---- MatMulNBits ----------------------------------------------------------------------

void infer_matmul_nbits(InferContext& ctx) {
  MatMulNBitsDims d = matmul_nbits_dims(ctx.node);
  require_float(ctx, 0, "A");
  const Shape& a = ctx.input_shape(0);
  VLRT_CHECK(!a.empty() && a.back() == d.k, "A's last dimension must be K=", d.k, ", got ", shape_str(a));
  VLRT_CHECK(ctx.input_dtype(1) == DType::u8, "B must be uint8, got ", dtype_name(ctx.input_dtype(1)));
  Shape b{d.n, d.blocks, d.block_size / 2};
  VLRT_CHECK(ctx.input_shape(1) == b, "B must have shape ", shape_str(b),
             " (N, ceil(K / block_size), block_size / 2), got ", shape_str(ctx.input_shape(1)));
  require_same_dtype(ctx, 2, "scales", "A");
  VLRT_CHECK(shape_numel(ctx.input_shape(2)) == d.n * d.blocks,
             "scales must have N * ceil(K / block_size) = ", d.n * d.blocks, " elements, got ",
             shape_str(ctx.input_shape(2)));
  if (ctx.has_input(3)) {
    bool packed = ctx.input_dtype(3) == DType::u8;
    VLRT_CHECK(packed || ctx.input_dtype(3) == ctx.input_dtype(0),
               "zero_points must be uint8 (packed 4-bit) or ", dtype_name(ctx.input_dtype(0)), ", got ",
               dtype_name(ctx.input_dtype(3)));
    int64_t want = packed ? d.n * ((d.blocks + 1) / 2) : d.n * d.blocks;
    VLRT_CHECK(shape_numel(ctx.input_shape(3)) == want, "zero_points must have ", want, " elements (",
               packed ? "N * ceil(blocks / 2) packed bytes" : "N * blocks", "), got ",
               shape_str(ctx.input_shape(3)));
  }
  if (ctx.has_input(4)) unsupported("g_idx (input 4) is not supported");
  require_vector(ctx, 5, "bias", d.n, "N");
  Shape y = a;
  y.back() = d.n;
  ctx.set_output(0, ctx.input_dtype(0), y);
}

// ---- GatherBlockQuantized --------------------------------------------------------------

void infer_gather_block_quantized(InferContext& ctx) {
  GatherBlockQuantizedDims d = gather_block_quantized_dims(ctx.node, ctx.input_dtype(0), ctx.input_shape(0));
  DType idx = ctx.input_dtype(1);
  VLRT_CHECK(idx == DType::i32 || idx == DType::i64, "indices must be int32 or int64, got ", dtype_name(idx));
  VLRT_CHECK(dtype_is_float(ctx.input_dtype(2)), "scales must be a floating-point tensor, got ",
             dtype_name(ctx.input_dtype(2)));
  Shape scales = d.logical;
  scales.back() = d.blocks;
  VLRT_CHECK(ctx.input_shape(2) == scales, "scales must have shape ", shape_str(scales), " (data's ",
             shape_str(d.logical), " values with ceil(", d.logical.back(), " / block_size ", d.block_size,
             ") blocks on the last axis), got ", shape_str(ctx.input_shape(2)));
  if (ctx.has_input(3)) {
    VLRT_CHECK(ctx.input_dtype(3) == DType::u8, "zero_points must be uint8 like data, got ",
               dtype_name(ctx.input_dtype(3)));
    Shape zp = scales;
    zp.back() = (d.blocks + d.values - 1) / d.values;
    VLRT_CHECK(ctx.input_shape(3) == zp, "zero_points must have shape ", shape_str(zp), " (", d.values,
               " per byte), got ", shape_str(ctx.input_shape(3)));
  }
  Shape y = ctx.input_shape(1);
  y.insert(y.end(), d.logical.begin() + 1, d.logical.end());
  ctx.set_output(0, ctx.input_dtype(2), y);
}

// ---- RotaryEmbedding --------------------------------------------------------------------

void infer_rotary_embedding(InferContext& ctx) {
  require_float(ctx, 0, "input");
  const Shape& x = ctx.input_shape(0);
  VLRT_CHECK(x.size() == 3 || x.size() == 4,
             "input must be [batch, sequence, hidden] or [batch, heads, sequence, head], got ", shape_str(x));
  VLRT_CHECK(!ctx.node.attr_int("is_packed_batching", 0), "is_packed_batching=1 is not supported");
  for (size_t i = 2; i < 4; i++) require_same_dtype(ctx, i, i == 2 ? "cos_cache" : "sin_cache", "input");
  const Shape& cache = ctx.input_shape(2);
  VLRT_CHECK(cache.size() == 2 && ctx.input_shape(3) == cache,
             "cos_cache and sin_cache must be 2-D [max_position, rotary_dim / 2] of one shape, got ",
             shape_str(cache), " and ", shape_str(ctx.input_shape(3)));
  RotaryDims d = rotary_dims(ctx.node, x, cache);
  VLRT_CHECK(d.rotary_dim <= d.head_size && d.rotary_dim == 2 * cache[1], "rotary dim ", d.rotary_dim,
             " must be twice the cache's ", cache[1], " columns and at most the head size ", d.head_size);
  VLRT_CHECK(ctx.input_dtype(1) == DType::i64, "position_ids must be int64, got ",
             dtype_name(ctx.input_dtype(1)));
  const Shape& pos = ctx.input_shape(1);
  int64_t b = x[0], s = x.size() == 3 ? x[1] : x[2];
  VLRT_CHECK(pos == Shape{1} || pos == (Shape{b, s}), "position_ids must be [", b, ", ", s,
             "] or [1] (an offset), got ", shape_str(pos));
  ctx.set_output(0, ctx.input_dtype(0), x);
}

}  // namespace

RotaryDims rotary_dims(const Node& n, const Shape& x, const Shape& cache) {
  int64_t heads = n.attr_int("num_heads", 0), rot = n.attr_int("rotary_embedding_dim", 0);
  VLRT_CHECK(heads >= 0 && rot >= 0, "num_heads and rotary_embedding_dim must not be negative");
  RotaryDims d{};
  if (x.size() == 4) {
    d.heads = x[1];
    d.head_size = x[3];
  } else if (heads > 0) {
    VLRT_CHECK(x[2] % heads == 0, "num_heads ", heads, " does not divide the hidden size ", x[2]);
    d.heads = heads;
    d.head_size = x[2] / heads;
  } else {
    d.head_size = rot > 0 ? rot : 2 * cache[1];
    VLRT_CHECK(d.head_size > 0 && x[2] % d.head_size == 0, "the head size ", d.head_size,
               " (from the cache; set num_heads) does not divide the hidden size ", x[2]);
    d.heads = x[2] / d.head_size;
  }
  d.rotary_dim = rot > 0 ? rot : 2 * cache[1];
  return d;
}

GatherBlockQuantizedDims gather_block_quantized_dims(const Node& n, DType data, const Shape& shape) {
  if (data != DType::u8) unsupported("data of type ", dtype_name(data), " (only uint8 data is supported)");
  VLRT_CHECK(shape.size() >= 2, "data must have rank >= 2, got ", shape_str(shape));
  int64_t rank = int64_t(shape.size());
  int64_t gather_axis = normalize_axis(n.attr_int("gather_axis", 0), rank);
  int64_t quantize_axis = normalize_axis(n.attr_int("quantize_axis", 1), rank);
  VLRT_CHECK(gather_axis == 0 && quantize_axis == rank - 1,
             "uint8 data needs gather_axis 0 and quantize_axis ", rank - 1, " (the last), got ", gather_axis,
             " and ", quantize_axis);
  GatherBlockQuantizedDims d{n.attr_int("bits", 4), n.attr_int("block_size", 128), 0, shape, 0};
  VLRT_CHECK(d.bits == 2 || d.bits == 4 || d.bits == 8, "bits must be 2, 4 or 8 for uint8 data, got ",
             d.bits);
  VLRT_CHECK(d.block_size >= 16 && (d.block_size & (d.block_size - 1)) == 0,
             "block_size must be a power of two >= 16, got ", d.block_size);
  d.values = 8 / d.bits;
  d.logical.back() *= d.values;
  d.blocks = (d.logical.back() + d.block_size - 1) / d.block_size;
  return d;
}

MatMulNBitsDims matmul_nbits_dims(const Node& n) {
  VLRT_CHECK(n.has_attr("K") && n.has_attr("N") && n.has_attr("block_size"),
             "attributes K, N and block_size are required");
  MatMulNBitsDims d{n.attr_int("K", 0), n.attr_int("N", 0), n.attr_int("block_size", 0), 0};
  int64_t bits = n.attr_int("bits", 4);
  if (bits != 4) unsupported("bits=", bits, " (only 4-bit weights are supported)");
  VLRT_CHECK(d.k > 0 && d.n > 0, "K and N must be positive, got K=", d.k, ", N=", d.n);
  VLRT_CHECK(d.block_size >= 16 && (d.block_size & (d.block_size - 1)) == 0,
             "block_size must be a power of two >= 16, got ", d.block_size);
  d.blocks = (d.k + d.block_size - 1) / d.block_size;
  return d;
}

std::vector<int64_t> fused_matmul_perm(size_t rank, bool trans_batch, bool trans) {
  std::vector<int64_t> perm;
  if (rank < 2) {
    VLRT_CHECK(!trans && !trans_batch,
               "a 1-D operand cannot be transposed (transA/transB/transBatch must be 0)");
    return {0};
  }
  if (trans_batch && rank > 2) {
    for (size_t d = 1; d + 1 < rank; d++) perm.push_back(int64_t(d));
    perm.push_back(0);
  } else {
    for (size_t d = 0; d + 1 < rank; d++) perm.push_back(int64_t(d));
  }
  perm.push_back(int64_t(rank - 1));
  if (trans) std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

FusedActivation fused_conv_activation(const Node& n, const std::string& attribute) {
  std::string name = n.attr_string(attribute, "");
  std::vector<float> p = n.attr_floats(attribute + "_params");
  auto params = [&](size_t count, std::vector<float> fallback) {
    if (p.empty()) p = std::move(fallback);
    VLRT_CHECK(p.size() == count, attribute, " ", name, " takes ", count, " ", attribute, "_params, got ",
               p.size());
  };
  FusedActivation a;
  if (name.empty() || name == "Identity") {
    a.kind = FusedActivation::none;
  } else if (name == "Relu") {
    a.kind = FusedActivation::relu;
  } else if (name == "Tanh") {
    a.kind = FusedActivation::tanh;
  } else if (name == "Sigmoid") {
    a.kind = FusedActivation::sigmoid;
  } else if (name == "LeakyRelu") {
    params(1, {0.01f});
    a = {FusedActivation::leaky_relu, p[0], 0};
  } else if (name == "Clip") {
    params(2, {});
    a = {FusedActivation::clip, p[0], p[1]};
  } else if (name == "HardSigmoid") {
    params(2, {0.2f, 0.5f});
    a = {FusedActivation::hard_sigmoid, p[0], p[1]};
  } else if (name == "HardSwish") {
    a.kind = FusedActivation::hard_swish;
  } else if (name == "SiLU") {
    a.kind = FusedActivation::silu;
  } else if (name == "Gelu") {
    a.kind = FusedActivation::gelu;
  } else if (name == "FastGelu") {
    a.kind = FusedActivation::fast_gelu;
  } else if (name == "QuantizeDequantize") {
    params(3, {});
    VLRT_CHECK(p[1] <= p[2], attribute, " QuantizeDequantize: low ", p[1], " above high ", p[2]);
    a = {FusedActivation::quantize_dequantize, p[0], p[1], p[2]};
  } else {
    unsupported(
        attribute, " '", name,
        "' (expected Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid, HardSwish, SiLU, Gelu, FastGelu or "
        "QuantizeDequantize)");
  }
  return a;
}

float quantize_dequantize(float x, float scale, float low, float high) {
  // As QuantizeLinear then DequantizeLinear: NaN saturates to the low end; the + 0 makes a -0
  // the integer 0 it is after quantization.
  float r = std::nearbyint(x / scale);
  r = !(r >= low) ? low : r > high ? high : r;
  return (r + 0.0f) * scale;
}

// Attention and MultiHeadAttention, in contrib_attention.cpp.
void register_contrib_attention_schemas(SchemaTable& t);

void register_contrib_schemas(SchemaTable& t) {
  register_contrib_attention_schemas(t);
  std::string ms = kMs;
  t[ms + "Gelu"] = {infer_unary_float, 1, 1, -1, true};
  t[ms + "QuickGelu"] = {infer_unary_float, 1, 1, -1, true};
  t[ms + "FastGelu"] = {infer_bias_gelu, 1, 2};
  t[ms + "BiasGelu"] = {infer_bias_gelu, 2, 2};
  t[ms + "BiasAdd"] = {infer_bias_add, 3, 3};
  t[ms + "SkipLayerNormalization"] = {infer_skip_layer_norm, 3, 5};
  t[ms + "SkipSimplifiedLayerNormalization"] = {infer_skip_simplified_layer_norm, 3, 4};
  t["SimplifiedLayerNormalization"] = {infer_simplified_layer_norm, 2, 2};
  t[ms + "EmbedLayerNormalization"] = {infer_embed_layer_norm, 7, 9};
  t[ms + "FusedMatMul"] = {infer_fused_matmul, 2, 2};
  t[ms + "FusedConv"] = {infer_fused_conv, 2, 4};
  t[ms + "MatMulNBits"] = {infer_matmul_nbits, 3, 6};
  t[ms + "RotaryEmbedding"] = {infer_rotary_embedding, 4, 4};
  t[ms + "GatherBlockQuantized"] = {infer_gather_block_quantized, 3, 4};
}

}  // namespace vlrt

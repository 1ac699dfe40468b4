// Reference kernels of ONNX Runtime's contrib ops (src/ops/contrib.cpp has their shapes).
// Plain loops in double; FusedMatMul and FusedConv run the MatMul and Conv kernels.
#include "backends/cpu/ops/contrib.h"

#include <cmath>
#include <cstring>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/fused.h"
#include "core/dispatch.h"
#include "ops/contrib_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

// The values of optional input i, or n zeros when it is absent.
std::vector<double> values_or_zeros(const KernelContext& ctx, size_t i, size_t n) {
  return ctx.has_input(i) ? ctx.input(i).to_double_vector() : std::vector<double>(n, 0.0);
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x * M_SQRT1_2)); }

double tanh_gelu(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// ---- Gelu family -------------------------------------------------------------------

// Applies f to X plus the optional bias (input 1) over the last axis; float32 through the
// fused epilogue's vector form of the same activation.
template <double (*F)(double), FusedActivation::Kind Kind>
void biased_unary_kernel(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::f32) {
    Tensor& y = ctx.output(0);
    if (y.data<float>() != ctx.input(0).data<float>()) std::memcpy(y.data<float>(), ctx.input(0).data<float>(), y.nbytes());
    FusedActivation act;
    act.kind = Kind;
    return apply_fused_epilogue(ctx.pool, act, y, ctx.has_input(1) ? &ctx.input(1) : nullptr, nullptr);
  }
  std::vector<double> x = ctx.input(0).to_double_vector();
  if (ctx.has_input(1)) {
    std::vector<double> b = ctx.input(1).to_double_vector();
    for (size_t i = 0; i < x.size(); i++) x[i] += b[i % b.size()];
  }
  for (double& v : x) v = F(v);
  ctx.output(0).assign_doubles(x);
}

void quick_gelu_kernel(KernelContext& ctx) {
  double alpha = ctx.node.attr_float("alpha", 1.702f);
  std::vector<double> x = ctx.input(0).to_double_vector();
  for (double& v : x) v = v / (1 + std::exp(-alpha * v));
  ctx.output(0).assign_doubles(x);
}

void bias_add_kernel(KernelContext& ctx) {
  std::vector<double> x = ctx.input(0).to_double_vector();
  std::vector<double> b = ctx.input(1).to_double_vector(), skip = ctx.input(2).to_double_vector();
  for (size_t i = 0; i < x.size(); i++) x[i] += b[i % b.size()] + skip[i];
  ctx.output(0).assign_doubles(x);
}

// ---- Layer normalizations ------------------------------------------------------------

// SkipLayerNormalization and SkipSimplifiedLayerNormalization: x = input + skip + bias per
// row of the hidden size, then LayerNorm (or RMSNorm) with gamma and beta.
template <bool Simplified>
void skip_norm_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  int64_t hidden = in.shape().back(), rows = in.numel() / hidden;
  double eps = ctx.node.attr_float("epsilon", 1e-12f);
  std::vector<double> x = in.to_double_vector(), skip = ctx.input(1).to_double_vector();
  std::vector<double> gamma = ctx.input(2).to_double_vector();
  std::vector<double> beta =
      Simplified ? std::vector<double>(size_t(hidden), 0.0) : values_or_zeros(ctx, 3, size_t(hidden));
  std::vector<double> bias = values_or_zeros(ctx, Simplified ? 3 : 4, size_t(hidden));
  std::vector<double> y(x.size()), mean(static_cast<size_t>(rows)), inv_std(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; r++) {
    double* xr = x.data() + r * hidden;
    // A smaller skip ([1,S,H] or [S,H]) repeats over the batch.
    const double* sr = skip.data() + (r * hidden) % int64_t(skip.size());
    double s = 0, ss = 0;
    for (int64_t i = 0; i < hidden; i++) {
      xr[i] += sr[i] + bias[size_t(i)];
      s += xr[i];
      ss += xr[i] * xr[i];
    }
    double m = Simplified ? 0.0 : s / double(hidden);
    double var = Simplified ? ss / double(hidden) : ss / double(hidden) - m * m;
    mean[size_t(r)] = m;
    inv_std[size_t(r)] = 1 / std::sqrt(var + eps);
    for (int64_t i = 0; i < hidden; i++)
      y[size_t(r * hidden + i)] = (xr[i] - m) * inv_std[size_t(r)] * gamma[size_t(i)] + beta[size_t(i)];
  }
  ctx.output(0).assign_doubles(y);
  if (ctx.has_output(1)) ctx.output(1).assign_doubles(mean);
  if (ctx.has_output(2)) ctx.output(2).assign_doubles(inv_std);
  if (ctx.has_output(3)) ctx.output(3).assign_doubles(x);
}

void simplified_layer_norm_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", -1), in.rank());
  int64_t cols = 1;
  for (int d = int(axis); d < in.rank(); d++) cols *= in.dim(d);
  int64_t rows = cols ? in.numel() / cols : 0;
  double eps = ctx.node.attr_float("epsilon", 1e-5f);
  std::vector<double> x = in.to_double_vector(), scale = ctx.input(1).to_double_vector();
  std::vector<double> inv_std(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; r++) {
    double* xr = x.data() + r * cols;
    double ss = 0;
    for (int64_t i = 0; i < cols; i++) ss += xr[i] * xr[i];
    inv_std[size_t(r)] = 1 / std::sqrt(ss / double(cols) + eps);
    for (int64_t i = 0; i < cols; i++) xr[i] *= inv_std[size_t(r)] * scale[size_t(i)];
  }
  ctx.output(0).assign_doubles(x);
  if (ctx.has_output(1)) ctx.output(1).assign_doubles(inv_std);
}

// Row `id` of a [rows, hidden] table; fails when the id is out of range.
const double* table_row(const std::vector<double>& table, int64_t hidden, int64_t id, const char* what) {
  int64_t rows = hidden ? int64_t(table.size()) / hidden : 0;
  VLRT_CHECK(id >= 0 && id < rows, what, " ", id, " is out of range [0, ", rows, ")");
  return table.data() + id * hidden;
}

void embed_layer_norm_kernel(KernelContext& ctx) {
  std::vector<int64_t> ids = ctx.input(0).to_int64_vector();
  int64_t batch = ctx.input(0).dim(0), seq = ctx.input(0).dim(1), hidden = ctx.input(2).dim(1);
  double eps = ctx.node.attr_float("epsilon", 1e-12f);
  std::vector<double> word = ctx.input(2).to_double_vector(), pos = ctx.input(3).to_double_vector();
  std::vector<double> gamma = ctx.input(5).to_double_vector(), beta = values_or_zeros(ctx, 6, size_t(hidden));
  std::vector<double> seg_table = ctx.has_input(4) ? ctx.input(4).to_double_vector() : std::vector<double>();
  std::vector<int64_t> seg = ctx.has_input(1) ? ctx.input(1).to_int64_vector() : std::vector<int64_t>();
  std::vector<int64_t> pos_ids = ctx.has_input(8) ? ctx.input(8).to_int64_vector() : std::vector<int64_t>();
  std::vector<double> y(size_t(batch * seq * hidden)), sum(y.size());
  for (int64_t t = 0; t < batch * seq; t++) {
    const double* w = table_row(word, hidden, ids[size_t(t)], "input_ids value");
    // position_ids of shape [1, S] serve every batch.
    int64_t p = pos_ids.empty() ? t % seq : pos_ids[size_t(t) % pos_ids.size()];
    const double* pe = table_row(pos, hidden, p, "position id");
    const double* se =
        seg.empty() ? nullptr : table_row(seg_table, hidden, seg[size_t(t)], "segment_ids value");
    double* e = sum.data() + t * hidden;
    double m = 0, ss = 0;
    for (int64_t i = 0; i < hidden; i++) {
      e[i] = w[i] + pe[i] + (se ? se[i] : 0.0);
      m += e[i];
    }
    m /= double(hidden);
    for (int64_t i = 0; i < hidden; i++) ss += (e[i] - m) * (e[i] - m);
    double inv = 1 / std::sqrt(ss / double(hidden) + eps);
    for (int64_t i = 0; i < hidden; i++)
      y[size_t(t * hidden + i)] = (e[i] - m) * inv * gamma[size_t(i)] + beta[size_t(i)];
  }
  ctx.output(0).assign_doubles(y);
  if (ctx.has_output(1)) {
    // The number of tokens the mask keeps per sequence; 0 without a mask.
    int32_t* mi = ctx.output(1).data<int32_t>();
    std::vector<int64_t> mask = ctx.has_input(7) ? ctx.input(7).to_int64_vector() : std::vector<int64_t>();
    for (int64_t b = 0; b < batch; b++) {
      int32_t n = 0;
      for (int64_t s = 0; !mask.empty() && s < seq; s++) n += mask[size_t(b * seq + s)] != 0;
      mi[b] = n;
    }
  }
  if (ctx.has_output(2)) ctx.output(2).assign_doubles(sum);
}

// ---- FusedMatMul and FusedConv ----------------------------------------------------------

Tensor permuted(const Tensor& t, const std::vector<int64_t>& perm) {
  const Shape& s = t.shape();
  Shape out(s.size());
  for (size_t d = 0; d < s.size(); d++) out[d] = s[size_t(perm[d])];
  std::vector<int64_t> in_strides = contiguous_strides(s);
  std::vector<double> src = t.to_double_vector(), dst(src.size());
  std::vector<int64_t> idx(s.size(), 0);
  for (size_t i = 0; i < dst.size(); i++) {
    int64_t off = 0;
    for (size_t d = 0; d < s.size(); d++) off += idx[d] * in_strides[size_t(perm[d])];
    dst[i] = src[size_t(off)];
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  Tensor r(t.dtype(), out);
  r.assign_doubles(dst);
  return r;
}

void fused_matmul_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  Tensor a = permuted(ctx.input(0), fused_matmul_perm(size_t(ctx.input(0).rank()),
                                                      n.attr_int("transBatchA", 0), n.attr_int("transA", 0)));
  Tensor b = permuted(ctx.input(1), fused_matmul_perm(size_t(ctx.input(1).rank()),
                                                      n.attr_int("transBatchB", 0), n.attr_int("transB", 0)));
  KernelContext inner(n, ctx.opset, ctx.pool, {&a, &b}, {&ctx.output(0)});
  find_cpu_kernel("", "MatMul")->fn(inner);
  double alpha = n.attr_float("alpha", 1.0f);
  if (alpha == 1.0) return;
  std::vector<double> y = ctx.output(0).to_double_vector();
  for (double& v : y) v *= alpha;
  ctx.output(0).assign_doubles(y);
}

// act(pre(Conv(X, W, B)) + Z)
void fused_conv_kernel(KernelContext& ctx) {
  FusedActivation act = fused_conv_activation(ctx.node),
                  pre = fused_conv_activation(ctx.node, "pre_activation");
  std::vector<const Tensor*> conv_inputs;
  for (size_t i = 0; i < std::min<size_t>(ctx.input_count(), 3); i++)
    conv_inputs.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  KernelContext inner(ctx.node, ctx.opset, ctx.pool, conv_inputs, {&ctx.output(0)});
  find_cpu_kernel("", "Conv")->fn(inner);
  apply_fused_epilogue(ctx.pool, pre, ctx.output(0), nullptr, nullptr);
  apply_fused_epilogue(ctx.pool, act, ctx.output(0), nullptr, ctx.has_input(3) ? &ctx.input(3) : nullptr);
}

// ---- MatMulNBits -----------------------------------------------------------------------

// Y = A W^T + bias, W[n, k] = (q - zero_point) * scale of k's block; q is the low nibble of a
// byte for even positions in the block, the high nibble for odd ones. Without zero points
// the zero point is 8.
void matmul_nbits_kernel(KernelContext& ctx) {
  MatMulNBitsDims d = matmul_nbits_dims(ctx.node);
  const uint8_t* b = ctx.input(1).data<uint8_t>();
  std::vector<double> scales = ctx.input(2).to_double_vector();
  std::vector<double> zp(size_t(d.n * d.blocks), 8.0);
  if (ctx.has_input(3) && ctx.input(3).dtype() == DType::u8) {
    const uint8_t* z = ctx.input(3).data<uint8_t>();
    int64_t row = (d.blocks + 1) / 2;
    for (int64_t n = 0; n < d.n; n++)
      for (int64_t kb = 0; kb < d.blocks; kb++)
        zp[size_t(n * d.blocks + kb)] = (z[n * row + kb / 2] >> (4 * (kb % 2))) & 15;
  } else if (ctx.has_input(3)) {
    zp = ctx.input(3).to_double_vector();
  }
  std::vector<double> w(size_t(d.n * d.k));
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t k = 0; k < d.k; k++) {
      int64_t kb = k / d.block_size, j = k % d.block_size;
      int q = (b[(n * d.blocks + kb) * (d.block_size / 2) + j / 2] >> (4 * (j % 2))) & 15;
      w[size_t(n * d.k + k)] = (q - zp[size_t(n * d.blocks + kb)]) * scales[size_t(n * d.blocks + kb)];
    }
  std::vector<double> a = ctx.input(0).to_double_vector(), bias = values_or_zeros(ctx, 5, size_t(d.n));
  int64_t rows = int64_t(a.size()) / d.k;
  std::vector<double> y(size_t(rows * d.n));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t n = 0; n < d.n; n++) {
      double s = bias[size_t(n)];
      for (int64_t k = 0; k < d.k; k++) s += a[size_t(r * d.k + k)] * w[size_t(n * d.k + k)];
      y[size_t(r * d.n + n)] = s;
    }
  ctx.output(0).assign_doubles(y);
}

// ---- GatherBlockQuantized -------------------------------------------------------------

// The value at `i` of `bits`-bit values packed low bits first.
int unpack(const uint8_t* packed, int64_t i, int64_t bits) {
  int64_t per_byte = 8 / bits;
  return (packed[i / per_byte] >> (bits * (i % per_byte))) & ((1 << bits) - 1);
}

// Rows of data (axis 0) picked by indices, each value (q - zero_point) * scale of its block;
// without zero points the zero point is the middle of the range, 2^(bits - 1).
void gather_block_quantized_kernel(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  GatherBlockQuantizedDims d = gather_block_quantized_dims(ctx.node, data.dtype(), data.shape());
  const uint8_t* q = data.data<uint8_t>();
  const uint8_t* zp = ctx.has_input(3) ? ctx.input(3).data<uint8_t>() : nullptr;
  std::vector<double> scales = ctx.input(2).to_double_vector();
  std::vector<int64_t> indices = ctx.input(1).to_int64_vector();
  int64_t rows = d.logical[0], cols = d.logical.back(), per_row = shape_numel(d.logical) / rows;
  int64_t zp_cols = (d.blocks + d.values - 1) / d.values;
  std::vector<double> y;
  y.reserve(indices.size() * size_t(per_row));
  for (int64_t index : indices) {
    VLRT_CHECK(index >= -rows && index < rows, "indices value ", index, " is out of range [", -rows, ", ",
               rows, ")");
    int64_t first = (index < 0 ? index + rows : index) * per_row;
    for (int64_t i = first; i < first + per_row; i++) {
      int64_t line = i / cols, block = i % cols / d.block_size;
      double zero = zp ? unpack(zp + line * zp_cols, block, d.bits) : double(1 << (d.bits - 1));
      y.push_back((unpack(q, i, d.bits) - zero) * scales[size_t(line * d.blocks + block)]);
    }
  }
  ctx.output(0).assign_doubles(y);
}

// ---- RotaryEmbedding ------------------------------------------------------------------

}  // namespace

void rotate_pairs(double* h, int64_t half, const double* cos, const double* sin, bool interleaved) {
  for (int64_t i = 0; i < half; i++) {
    int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
    double a = h[i0], e = h[i1];
    h[i0] = a * cos[i] - e * sin[i];
    h[i1] = e * cos[i] + a * sin[i];
  }
}

namespace {

// Rotates pairs (i, i + rot/2), or (2i, 2i + 1) when interleaved, of each head's first
// rotary_dim values by the angle whose cos and sin the caches hold at the token's position.
void rotary_embedding_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Shape& cache = ctx.input(2).shape();
  RotaryDims d = rotary_dims(ctx.node, in.shape(), cache);
  bool bnsh = in.rank() == 4, interleaved = ctx.node.attr_int("interleaved", 0) != 0;
  int64_t b = in.dim(0), s = bnsh ? in.dim(2) : in.dim(1), half = d.rotary_dim / 2;
  std::vector<double> x = in.to_double_vector(), cos = ctx.input(2).to_double_vector(),
                      sin = ctx.input(3).to_double_vector();
  std::vector<int64_t> pos = ctx.input(1).to_int64_vector();
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t si = 0; si < s; si++) {
      int64_t p = pos.size() == 1 ? pos[0] + si : pos[size_t(bi * s + si)];
      VLRT_CHECK(p >= 0 && p < cache[0], "position ", p, " is outside the caches' ", cache[0], " positions");
      for (int64_t n = 0; n < d.heads; n++) {
        int64_t base =
            bnsh ? ((bi * d.heads + n) * s + si) * d.head_size : ((bi * s + si) * d.heads + n) * d.head_size;
        rotate_pairs(x.data() + base, half, cos.data() + p * half, sin.data() + p * half, interleaved);
      }
    }
  ctx.output(0).assign_doubles(x);
}

}  // namespace

// Attention and MultiHeadAttention, in contrib_attention.cpp.
void register_contrib_attention_kernels(CpuKernelTable& t);

void register_contrib_kernels(CpuKernelTable& t) {
  register_contrib_attention_kernels(t);
  t["com.microsoft.Gelu"] = {biased_unary_kernel<gelu, FusedActivation::gelu>};
  t["com.microsoft.BiasGelu"] = {biased_unary_kernel<gelu, FusedActivation::gelu>};
  t["com.microsoft.FastGelu"] = {biased_unary_kernel<tanh_gelu, FusedActivation::fast_gelu>};
  t["com.microsoft.QuickGelu"] = {quick_gelu_kernel};
  t["com.microsoft.BiasAdd"] = {bias_add_kernel};
  t["com.microsoft.SkipLayerNormalization"] = {skip_norm_kernel<false>};
  t["com.microsoft.SkipSimplifiedLayerNormalization"] = {skip_norm_kernel<true>};
  t["SimplifiedLayerNormalization"] = {simplified_layer_norm_kernel};
  t["com.microsoft.EmbedLayerNormalization"] = {embed_layer_norm_kernel};
  t["com.microsoft.FusedMatMul"] = {fused_matmul_kernel};
  t["com.microsoft.FusedConv"] = {fused_conv_kernel};
  t["com.microsoft.MatMulNBits"] = {matmul_nbits_kernel};
  t["com.microsoft.RotaryEmbedding"] = {rotary_embedding_kernel};
  t["com.microsoft.GatherBlockQuantized"] = {gather_block_quantized_kernel};
}

}  // namespace vlrt

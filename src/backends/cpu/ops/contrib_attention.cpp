// Reference kernels of Attention, MultiHeadAttention and GroupQueryAttention as ONNX
// Runtime's CPU kernels compute them. Attention and MultiHeadAttention add mask_filter_value
// to masked scores (not -inf), so a fully masked row is the softmax of the raw scores;
// GroupQueryAttention leaves masked keys out of the softmax.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/contrib.h"
#include "core/dispatch.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

namespace {

// Per-head tensors in [B, N, T, H] layout, scores [B, N, S, T] before the softmax.
struct Heads {
  int64_t batch, heads, seq, total, head, vhead;
  std::vector<double> q, k, v;  // [B,N,S,H], [B,N,T,H], [B,N,T,Hv]
  std::vector<double> mask;     // [B,S,T] additive, or empty
};

// [B, L, N*H] rows (columns `col0` on of a row of `stride`) plus bias, into [B, N, L, H]
// placed at sequence offset `at` of a sequence of length `len`.
void split_heads(const std::vector<double>& x, int64_t stride, int64_t col0, const double* bias, int64_t b,
                 int64_t l, int64_t n, int64_t h, std::vector<double>& out, int64_t at, int64_t len) {
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t li = 0; li < l; li++)
      for (int64_t ni = 0; ni < n; ni++)
        for (int64_t hi = 0; hi < h; hi++)
          out[size_t(((bi * n + ni) * len + at + li) * h + hi)] =
              x[size_t((bi * l + li) * stride + col0 + ni * h + hi)] + (bias ? bias[ni * h + hi] : 0.0);
}

// Copies [B, N, P, H] into the first P positions of [B, N, len, H].
void put_past(const std::vector<double>& past, int64_t bn, int64_t p, int64_t h, std::vector<double>& out,
              int64_t len) {
  for (int64_t i = 0; i < bn; i++)
    for (int64_t j = 0; j < p * h; j++) out[size_t(i * len * h + j)] = past[size_t(i * p * h + j)];
}

// Additive key-lengths mask: keys outside [start, end) of each batch are masked.
void mask_key_lengths(const std::vector<int64_t>& m, Heads& a, double filter) {
  a.mask.assign(size_t(a.batch * a.seq * a.total), 0.0);
  for (int64_t b = 0; b < a.batch; b++) {
    int64_t end = m[size_t(b)], start = m.size() == size_t(2 * a.batch) ? m[size_t(a.batch + b)] : 0;
    for (int64_t s = 0; s < a.seq; s++)
      for (int64_t t = 0; t < a.total; t++)
        if (t >= end || t < start) a.mask[size_t((b * a.seq + s) * a.total + t)] = filter;
  }
}

// Raw 0/1 masks: [B, T], [B, S, T] or [B, 1, M, M] (rows past..past+S of the square).
void mask_raw(const Tensor& m, Heads& a, double filter, int64_t past) {
  std::vector<int64_t> v = m.to_int64_vector();
  a.mask.assign(size_t(a.batch * a.seq * a.total), 0.0);
  for (int64_t b = 0; b < a.batch; b++)
    for (int64_t s = 0; s < a.seq; s++)
      for (int64_t t = 0; t < a.total; t++) {
        int64_t i = 0;
        if (m.rank() == 2) i = b * a.total + t;
        if (m.rank() == 3) i = (b * a.seq + s) * a.total + t;
        if (m.rank() == 4) i = (b * m.dim(2) + past + s) * m.dim(3) + t;
        if (v[size_t(i)] == 0) a.mask[size_t((b * a.seq + s) * a.total + t)] = filter;
      }
}

// Keys after query s's own position (past + s) are masked.
void mask_causal(Heads& a, double filter) {
  if (a.mask.empty()) a.mask.assign(size_t(a.batch * a.seq * a.total), 0.0);
  int64_t past = a.total - a.seq;
  for (int64_t b = 0; b < a.batch; b++)
    for (int64_t s = 0; s < a.seq; s++)
      for (int64_t t = past + s + 1; t < a.total; t++) a.mask[size_t((b * a.seq + s) * a.total + t)] = filter;
}

// softmax(cap(scale * Q K^T) + mask + attention_bias) V, as [B, S, N*Hv]. cap(x) is
// softcap * tanh(x / softcap) when softcap > 0; a smooth softmax has an extra zero logit in
// its denominator.
std::vector<double> attend(const Heads& a, double scale, const Tensor* attention_bias, double softcap = 0,
                           bool smooth = false) {
  std::vector<double> bias = attention_bias ? attention_bias->to_double_vector() : std::vector<double>();
  int64_t bias_b = attention_bias ? attention_bias->dim(0) : 0,
          bias_n = attention_bias ? attention_bias->dim(1) : 0;
  std::vector<double> out(size_t(a.batch * a.seq * a.heads * a.vhead)), p(size_t(a.total));
  for (int64_t b = 0; b < a.batch; b++)
    for (int64_t n = 0; n < a.heads; n++)
      for (int64_t s = 0; s < a.seq; s++) {
        const double* q = a.q.data() + ((b * a.heads + n) * a.seq + s) * a.head;
        double mx = -INFINITY;
        for (int64_t t = 0; t < a.total; t++) {
          const double* k = a.k.data() + ((b * a.heads + n) * a.total + t) * a.head;
          double dot = 0;
          for (int64_t h = 0; h < a.head; h++) dot += q[h] * k[h];
          p[size_t(t)] = softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale;
          if (!a.mask.empty()) p[size_t(t)] += a.mask[size_t((b * a.seq + s) * a.total + t)];
          if (!bias.empty())
            p[size_t(t)] += bias[size_t(
                (((bias_b == 1 ? 0 : b) * bias_n + (bias_n == 1 ? 0 : n)) * a.seq + s) * a.total + t)];
          mx = std::max(mx, p[size_t(t)]);
        }
        if (smooth) mx = std::max(mx, 0.0);
        double sum = smooth ? std::exp(-mx) : 0.0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        double* o = out.data() + ((b * a.seq + s) * a.heads + n) * a.vhead;
        for (int64_t t = 0; t < a.total; t++) {
          const double* v = a.v.data() + ((b * a.heads + n) * a.total + t) * a.vhead;
          for (int64_t h = 0; h < a.vhead; h++) o[h] += p[size_t(t)] / sum * v[h];
        }
      }
  return out;
}

double scale_of(const Node& n, int64_t head) {
  double s = n.attr_float("scale", 0.0f);
  return s != 0 ? s : 1 / std::sqrt(double(head));
}

// The mask (input `mask_input`: key lengths, or a 2-D to 4-D mask), the causal mask when
// unidirectional, then attention with the attention_bias of input 5: Attention's and
// MultiHeadAttention's common tail.
std::vector<double> masked_attention(KernelContext& ctx, Heads& a, size_t mask_input, double filter,
                                     int64_t past) {
  if (ctx.has_input(mask_input)) {
    const Tensor& m = ctx.input(mask_input);
    if (m.rank() == 1)
      mask_key_lengths(m.to_int64_vector(), a, filter);
    else
      mask_raw(m, a, filter, past);
  }
  if (ctx.node.attr_int("unidirectional", 0)) mask_causal(a, filter);
  return attend(a, scale_of(ctx.node, a.head), ctx.has_input(5) ? &ctx.input(5) : nullptr);
}

void attention_kernel(KernelContext& ctx) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  int64_t b = x.dim(0), s = x.dim(1), din = x.dim(2), cols = w.dim(1),
          heads = ctx.node.attr_int("num_heads", 1);
  std::vector<int64_t> sizes = ctx.node.attr_ints("qkv_hidden_sizes", {cols / 3, cols / 3, cols / 3});
  double filter = ctx.node.attr_float("mask_filter_value", -10000.0f);
  // QKV = input @ weights, [B*S, q+k+v]; the bias is added per head below.
  std::vector<double> xv = x.to_double_vector(), wv = w.to_double_vector(), qkv(size_t(b * s * cols));
  for (int64_t r = 0; r < b * s; r++)
    for (int64_t i = 0; i < din; i++)
      for (int64_t c = 0; c < cols; c++)
        qkv[size_t(r * cols + c)] += xv[size_t(r * din + i)] * wv[size_t(i * cols + c)];
  std::vector<double> bias =
      ctx.has_input(2) ? ctx.input(2).to_double_vector() : std::vector<double>(size_t(cols));
  int64_t past = ctx.has_input(4) ? ctx.input(4).dim(3) : 0;
  Heads a{b, heads, s, past + s, sizes[0] / heads, sizes[2] / heads, {}, {}, {}, {}};
  a.q.resize(size_t(b * heads * s * a.head));
  a.k.resize(size_t(b * heads * a.total * a.head));
  a.v.resize(size_t(b * heads * a.total * a.vhead));
  split_heads(qkv, cols, 0, bias.data(), b, s, heads, a.head, a.q, 0, s);
  split_heads(qkv, cols, sizes[0], bias.data() + sizes[0], b, s, heads, a.head, a.k, past, a.total);
  split_heads(qkv, cols, 2 * sizes[0], bias.data() + 2 * sizes[0], b, s, heads, a.vhead, a.v, past, a.total);
  if (past) {
    std::vector<double> pv = ctx.input(4).to_double_vector();
    size_t half = pv.size() / 2;
    put_past(std::vector<double>(pv.begin(), pv.begin() + long(half)), b * heads, past, a.head, a.k, a.total);
    put_past(std::vector<double>(pv.begin() + long(half), pv.end()), b * heads, past, a.head, a.v, a.total);
  }
  ctx.output(0).assign_doubles(masked_attention(ctx, a, 3, filter, past));
  if (ctx.has_output(1)) {
    std::vector<double> present = a.k;
    present.insert(present.end(), a.v.begin(), a.v.end());
    ctx.output(1).assign_doubles(present);
  }
}

void multi_head_attention_kernel(KernelContext& ctx) {
  const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
  int64_t b = q.dim(0), s = q.dim(1), d = q.dim(2), l = k.dim(1), dv = v.dim(2);
  int64_t heads = ctx.node.attr_int("num_heads", 1);
  double filter = ctx.node.attr_float("mask_filter_value", -10000.0f);
  int64_t past = ctx.has_input(6) ? ctx.input(6).dim(2) : 0;
  Heads a{b, heads, s, past + l, d / heads, dv / heads, {}, {}, {}, {}};
  a.q.resize(size_t(b * heads * s * a.head));
  a.k.resize(size_t(b * heads * a.total * a.head));
  a.v.resize(size_t(b * heads * a.total * a.vhead));
  std::vector<double> bias =
      ctx.has_input(3) ? ctx.input(3).to_double_vector() : std::vector<double>(size_t(2 * d + dv));
  split_heads(q.to_double_vector(), d, 0, bias.data(), b, s, heads, a.head, a.q, 0, s);
  split_heads(k.to_double_vector(), d, 0, bias.data() + d, b, l, heads, a.head, a.k, past, a.total);
  split_heads(v.to_double_vector(), dv, 0, bias.data() + 2 * d, b, l, heads, a.vhead, a.v, past, a.total);
  if (past) {
    put_past(ctx.input(6).to_double_vector(), b * heads, past, a.head, a.k, a.total);
    put_past(ctx.input(7).to_double_vector(), b * heads, past, a.vhead, a.v, a.total);
  }
  ctx.output(0).assign_doubles(masked_attention(ctx, a, 4, filter, past));
  if (ctx.has_output(1)) ctx.output(1).assign_doubles(a.k);
  if (ctx.has_output(2)) ctx.output(2).assign_doubles(a.v);
}

// ---- GroupQueryAttention ----------------------------------------------------------------

// Where each sequence's S new tokens go: after `past` cached positions, `total` in all.
struct CacheRows {
  int64_t past, total;
};

// seqlens_k holds each sequence's total length - 1. A first prompt (S equal to
// total_sequence_length) starts at position 0; later steps append after the past.
std::vector<CacheRows> cache_rows(const KernelContext& ctx, int64_t s, int64_t past_len,
                                  int64_t present_len) {
  std::vector<int64_t> seqlens = ctx.input(5).to_int64_vector();
  bool first_prompt = ctx.input(6).to_int64_vector()[0] == s;
  std::vector<CacheRows> rows;
  for (size_t bi = 0; bi < seqlens.size(); bi++) {
    int64_t total = seqlens[bi] + 1, past = first_prompt ? 0 : total - s;
    VLRT_CHECK(total >= 1 && past >= 0 && past <= past_len && past + s <= present_len && total <= present_len,
               "seqlens_k[", bi, "] = ", seqlens[bi], " does not fit: ", s, " new positions after ", past,
               " past ones in a past_key of ", past_len, " and a present of ", present_len, " positions");
    rows.push_back({past, total});
  }
  return rows;
}

// Rotates the first rotary_dim values of each head of x [B, N, S, H] at the tokens' positions:
// position_ids when given, else the token's place in its sequence.
void rotate_heads(const KernelContext& ctx, std::vector<double>& x, int64_t b, int64_t n, int64_t s,
                  int64_t h, const std::vector<CacheRows>& rows) {
  const Tensor& cos_cache = ctx.input(7);
  int64_t half = cos_cache.dim(1), positions = cos_cache.dim(0);
  std::vector<double> cos = cos_cache.to_double_vector(), sin = ctx.input(8).to_double_vector();
  std::vector<int64_t> ids = ctx.has_input(9) ? ctx.input(9).to_int64_vector() : std::vector<int64_t>();
  bool interleaved = ctx.node.attr_int("rotary_interleaved", 0) != 0;
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t si = 0; si < s; si++) {
      int64_t p = ids.empty() ? rows[size_t(bi)].past + si : ids[size_t(bi * s + si)];
      VLRT_CHECK(p >= 0 && p < positions, "position ", p, " is outside cos_cache's ", positions,
                 " positions");
      for (int64_t ni = 0; ni < n; ni++)
        rotate_pairs(x.data() + ((bi * n + ni) * s + si) * h, half, cos.data() + p * half,
                     sin.data() + p * half, interleaved);
    }
}

// present [B, Nkv, T, H]: each sequence's past positions from `past`, then its new ones.
std::vector<double> append_to_cache(const KernelContext& ctx, size_t past_input,
                                    const std::vector<double>& fresh, int64_t nkv, int64_t s, int64_t h,
                                    int64_t past_len, int64_t present_len,
                                    const std::vector<CacheRows>& rows) {
  std::vector<double> past = past_len ? ctx.input(past_input).to_double_vector() : std::vector<double>();
  std::vector<double> present(rows.size() * size_t(nkv * present_len * h));
  for (size_t bi = 0; bi < rows.size(); bi++)
    for (int64_t ni = 0; ni < nkv; ni++) {
      int64_t head = int64_t(bi) * nkv + ni;
      double* dst = present.data() + head * present_len * h;
      std::copy_n(past.begin() + head * past_len * h, rows[bi].past * h, dst);
      std::copy_n(fresh.begin() + head * s * h, s * h, dst + rows[bi].past * h);
    }
  return present;
}

// Each of the N query heads reads K/V head n / (N / Nkv): [B, Nkv, T, H] -> [B, N, T, H].
std::vector<double> repeat_kv(const std::vector<double>& kv, int64_t b, int64_t nkv, int64_t n, int64_t th) {
  std::vector<double> out(size_t(b * n * th));
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t ni = 0; ni < n; ni++)
      std::copy_n(kv.begin() + (bi * nkv + ni / (n / nkv)) * th, th, out.begin() + (bi * n + ni) * th);
  return out;
}

// Query s of a sequence sees keys up to its own position, only the last local_window_size
// of them when local_window_size > 0, and none past the sequence's total length.
void mask_causal_window(Heads& a, const std::vector<CacheRows>& rows, int64_t window) {
  a.mask.assign(size_t(a.batch * a.seq * a.total), -INFINITY);
  for (int64_t b = 0; b < a.batch; b++)
    for (int64_t s = 0; s < a.seq; s++) {
      int64_t last = std::min(rows[size_t(b)].past + s, rows[size_t(b)].total - 1);
      int64_t first = window > 0 ? std::max<int64_t>(0, last - window + 1) : 0;
      for (int64_t t = first; t <= last; t++) a.mask[size_t((b * a.seq + s) * a.total + t)] = 0;
    }
}

void group_query_attention_kernel(KernelContext& ctx) {
  const Tensor& query = ctx.input(0);
  bool packed = !ctx.has_input(1);
  int64_t b = query.dim(0), s = query.dim(1), hidden = query.dim(2);
  GroupQueryDims d = group_query_dims(ctx.node, hidden, packed);
  int64_t n = d.heads, nkv = d.kv_heads, h = d.head_size;
  int64_t past_len = ctx.has_input(3) ? ctx.input(3).dim(2) : 0;
  int64_t present_len = std::max(ctx.input(6).to_int64_vector()[0], past_len);
  std::vector<CacheRows> rows = cache_rows(ctx, s, past_len, present_len);
  std::vector<double> qkv = query.to_double_vector();
  std::vector<double> q(size_t(b * n * s * h)), k(size_t(b * nkv * s * h)), v(k.size());
  split_heads(qkv, hidden, 0, nullptr, b, s, n, h, q, 0, s);
  if (packed) {
    split_heads(qkv, hidden, n * h, nullptr, b, s, nkv, h, k, 0, s);
    split_heads(qkv, hidden, (n + nkv) * h, nullptr, b, s, nkv, h, v, 0, s);
  } else {
    split_heads(ctx.input(1).to_double_vector(), nkv * h, 0, nullptr, b, s, nkv, h, k, 0, s);
    split_heads(ctx.input(2).to_double_vector(), nkv * h, 0, nullptr, b, s, nkv, h, v, 0, s);
  }
  if (ctx.node.attr_int("do_rotary", 0)) {
    rotate_heads(ctx, q, b, n, s, h, rows);
    rotate_heads(ctx, k, b, nkv, s, h, rows);
  }
  std::vector<double> present_k = append_to_cache(ctx, 3, k, nkv, s, h, past_len, present_len, rows);
  std::vector<double> present_v = append_to_cache(ctx, 4, v, nkv, s, h, past_len, present_len, rows);
  Heads a{b,
          n,
          s,
          present_len,
          h,
          h,
          std::move(q),
          repeat_kv(present_k, b, nkv, n, present_len * h),
          repeat_kv(present_v, b, nkv, n, present_len * h),
          {}};
  mask_causal_window(a, rows, ctx.node.attr_int("local_window_size", -1));
  ctx.output(0).assign_doubles(attend(a, scale_of(ctx.node, h), ctx.has_input(10) ? &ctx.input(10) : nullptr,
                                      ctx.node.attr_float("softcap", 0.0f),
                                      ctx.node.attr_int("smooth_softmax", 0) != 0));
  if (ctx.has_output(1)) ctx.output(1).assign_doubles(present_k);
  if (ctx.has_output(2)) ctx.output(2).assign_doubles(present_v);
}

}  // namespace

void register_contrib_attention_kernels(CpuKernelTable& t) {
  t["com.microsoft.Attention"] = {attention_kernel};
  t["com.microsoft.MultiHeadAttention"] = {multi_head_attention_kernel};
  t["com.microsoft.GroupQueryAttention"] = {group_query_attention_kernel};
}

}  // namespace vlrt

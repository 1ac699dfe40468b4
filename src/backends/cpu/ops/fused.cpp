// CPU kernels of vlrt's fused ops (src/ops/fused.cpp defines them) and the epilogue FusedConv
// shares. FusedMatMul's product is the MatMul kernel's, called in one place (fused_matmul_kernel);
// Attention's per-head products are single-threaded BLAS calls inside its parallel loop over heads.
#include "backends/cpu/ops/fused.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "backends/cpu/kernel.h"
#include "backends/cpu/ops/blas.h"
#include "backends/cpu/ops/grid_sample.h"
#include "backends/cpu/prepare_util.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/vector_math.h"
#include "ops/fused_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

double fused_activate(const FusedActivation& a, double x) {
  switch (a.kind) {
    case FusedActivation::none:
      return x;
    case FusedActivation::relu:
      return x > 0 ? x : 0;
    case FusedActivation::tanh:
      return std::tanh(x);
    case FusedActivation::sigmoid:
      return 1 / (1 + std::exp(-x));
    case FusedActivation::leaky_relu:
      return x >= 0 ? x : a.alpha * x;
    case FusedActivation::clip:
      return std::min(std::max(x, double(a.alpha)), double(a.beta));
    case FusedActivation::hard_sigmoid:
      return std::min(std::max(a.alpha * x + a.beta, 0.0), 1.0);
    case FusedActivation::hard_swish:
      return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0);
    case FusedActivation::silu:
      return x / (1 + std::exp(-x));
    case FusedActivation::gelu:
      return 0.5 * x * (1 + std::erf(x * M_SQRT1_2));
    case FusedActivation::fast_gelu:
      return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case FusedActivation::quantize_dequantize:
      return quantize_dequantize(float(x), a.alpha, a.beta, a.gamma);
  }
  return x;
}

namespace {

// Calls body with the activation as a 4-lane lambda, so that each kind compiles into its own loop.
template <class Body>
void with_vector_activation(const FusedActivation& a, const Body& body) {
  float alpha = a.alpha, beta = a.beta;
  switch (a.kind) {
    case FusedActivation::none:
      return body([](f32x4 x) { return x; });
    case FusedActivation::relu:
      return body([](f32x4 x) { return select(x < splat(0.f), splat(0.f), x); });
    case FusedActivation::tanh:
      return body([](f32x4 x) { return tanh_f32x4(x); });
    case FusedActivation::sigmoid:
      return body([](f32x4 x) { return sigmoid_f32x4(x); });
    case FusedActivation::leaky_relu:
      return body([=](f32x4 x) { return select(x < splat(0.f), x * splat(alpha), x); });
    case FusedActivation::clip:
      return body([=](f32x4 x) { return clamp(x, alpha, beta); });
    case FusedActivation::hard_sigmoid:
      return body([=](f32x4 x) { return clamp(x * splat(alpha) + splat(beta), 0.f, 1.f); });
    case FusedActivation::hard_swish:
      return body([](f32x4 x) { return x * clamp(x * splat(1.f / 6) + splat(0.5f), 0.f, 1.f); });
    case FusedActivation::silu:
      return body([](f32x4 x) { return x * sigmoid_f32x4(x); });
    case FusedActivation::gelu:
      return body([](f32x4 x) { return splat(0.5f) * x * (splat(1.f) + erf_f32x4(x * splat(float(M_SQRT1_2)))); });
    case FusedActivation::fast_gelu:
      return body([](f32x4 x) {
        f32x4 inner = splat(0.7978845608028654f) * (x + splat(0.044715f) * x * x * x);
        return splat(0.5f) * x * (splat(1.f) + tanh_f32x4(inner));
      });
    case FusedActivation::quantize_dequantize:
      return body([a](f32x4 x) { return quantize_dequantize_f32x4(x, a.alpha, a.beta, a.gamma); });
  }
}

f32x4 load_f32x4(const float* p, int64_t n) {
  f32x4 v = splat(0.f);
  std::memcpy(&v, p, size_t(n) * sizeof(float));
  return v;
}

// y[i] = f(y[i] + bias[i] + z[i]) for i < n; bias and z may be null. Whole vectors load with a
// fixed-size copy (one instruction); only the tail goes through the padded form.
template <class F>
void epilogue_span(float* y, const float* bias, const float* z, int64_t n, const F& f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    f32x4 v, t;
    std::memcpy(&v, y + i, sizeof v);
    if (bias) {
      std::memcpy(&t, bias + i, sizeof t);
      v += t;
    }
    if (z) {
      std::memcpy(&t, z + i, sizeof t);
      v += t;
    }
    v = f(v);
    std::memcpy(y + i, &v, sizeof v);
  }
  if (i < n) {
    int64_t w = n - i;
    f32x4 v = load_f32x4(y + i, w);
    if (bias) v += load_f32x4(bias + i, w);
    if (z) v += load_f32x4(z + i, w);
    v = f(v);
    std::memcpy(y + i, &v, size_t(w) * sizeof(float));
  }
}

// The row kernels' form of an activation (full vector width), if they have one.
std::optional<std::pair<UnaryF32, UnaryParams>> row_form(const FusedActivation& a) {
  switch (a.kind) {
    case FusedActivation::relu:
      return std::pair{UnaryF32::relu, UnaryParams{}};
    case FusedActivation::leaky_relu:
      return std::pair{UnaryF32::leaky_relu, UnaryParams{a.alpha}};
    case FusedActivation::clip:
      return std::pair{UnaryF32::clip, UnaryParams{a.alpha, a.beta}};
    case FusedActivation::hard_sigmoid:
      return std::pair{UnaryF32::hard_sigmoid, UnaryParams{a.alpha, a.beta}};
    case FusedActivation::hard_swish:
      return std::pair{UnaryF32::hard_swish, UnaryParams{}};
    case FusedActivation::sigmoid:
      return std::pair{UnaryF32::sigmoid, UnaryParams{}};
    case FusedActivation::tanh:
      return std::pair{UnaryF32::tanh, UnaryParams{}};
    case FusedActivation::gelu:
      return std::pair{UnaryF32::gelu, UnaryParams{}};
    case FusedActivation::fast_gelu:
      return std::pair{UnaryF32::gelu_tanh, UnaryParams{}};
    default:
      return std::nullopt;
  }
}

void epilogue_f32(ThreadPool& pool, const FusedActivation& act, Tensor& y, const Tensor* bias, const Tensor* z) {
  float* py = y.data<float>();
  const float* pb = bias ? bias->data<float>() : nullptr;
  const float* pz = z ? z->data<float>() : nullptr;
  int64_t n = y.numel();
  const RowKernelsF32* rows = row_kernels_f32();
  if (!pb && !pz && rows) {  // the activation alone (a Gelu node): the row kernel, all lanes
    if (auto form = row_form(act)) {
      pool.parallel_for(
          n,
          [&](int64_t lo, int64_t hi) { rows->unary(form->first, form->second, py + lo, py + lo, hi - lo); },
          1 << 13);
      return;
    }
  }
  if (pb) {  // rows of the bias's length, a chunk of them per task
    int64_t cols = bias->numel(), count = cols ? n / cols : 0;
    pool.parallel_for(
        count, [&](int64_t lo, int64_t hi) { apply_fused_epilogue_block(act, py, pb, pz, cols, lo, hi, 0, cols); },
        std::max<int64_t>(1, (1 << 13) / std::max<int64_t>(cols, 1)));
    return;
  }
  with_vector_activation(act, [&](const auto& f) {
    pool.parallel_for(n, [&](int64_t lo, int64_t hi) { epilogue_span(py + lo, nullptr, pz ? pz + lo : nullptr, hi - lo, f); },
                      1 << 13);
  });
}

}  // namespace

void apply_fused_epilogue(ThreadPool& pool, const FusedActivation& act, Tensor& y, const Tensor* bias,
                          const Tensor* z) {
  if (act.kind == FusedActivation::none && !bias && !z) return;
  if (y.dtype() == DType::f32) return epilogue_f32(pool, act, y, bias, z);
  std::vector<double> v = y.to_double_vector(), b, zv;
  if (bias) b = bias->to_double_vector();
  if (z) zv = z->to_double_vector();
  for (size_t i = 0; i < v.size(); i++)
    v[i] = fused_activate(act, v[i] + (bias ? b[i % b.size()] : 0.0) + (z ? zv[i] : 0.0));
  y.assign_doubles(v);
}

void apply_fused_epilogue_block(const FusedActivation& act, float* y, const float* bias, const float* z,
                                int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  with_vector_activation(act, [&](const auto& f) {
    for (int64_t r = r0; r < r1; r++)
      epilogue_span(y + r * cols + c0, bias ? bias + c0 : nullptr, z ? z + r * cols + c0 : nullptr, c1 - c0,
                    f);
  });
}

namespace {

// ---- vlrt.FusedMatMul ------------------------------------------------------------------

Tensor swap_last_axes(const Tensor& t) {
  Shape s = t.shape(), out = s;
  std::swap(out[out.size() - 1], out[out.size() - 2]);
  int64_t r = s[s.size() - 2], c = s[s.size() - 1], batches = r * c != 0 ? t.numel() / (r * c) : 0;
  std::vector<double> src = t.to_double_vector(), dst(src.size());
  for (int64_t b = 0; b < batches; b++)
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) dst[size_t(b * r * c + j * r + i)] = src[size_t(b * r * c + i * c + j)];
  Tensor result(t.dtype(), out);
  result.assign_doubles(dst);
  return result;
}

// Y = act(A B + Bias + Z): the MatMul kernel, then one epilogue pass over Y. A float16 or
// bfloat16 B (a weight kept in half precision) is widened to A's type first, exactly.
void fused_matmul_kernel(KernelContext& ctx) {
  const Tensor* b = &ctx.input(1);
  Tensor widened, transposed;
  if (b->dtype() != ctx.input(0).dtype()) {
    widened = b->converted(ctx.input(0).dtype());
    b = &widened;
  }
  if (ctx.node.attr_int("transB", 0)) {
    transposed = swap_last_axes(*b);
    b = &transposed;
  }
  KernelContext product(ctx.node, ctx.opset, ctx.pool, {&ctx.input(0), b}, {&ctx.output(0)});
  find_cpu_kernel("", "MatMul")->fn(product);
  apply_fused_epilogue(ctx.pool, fused_conv_activation(ctx.node), ctx.output(0),
                       ctx.has_input(2) ? &ctx.input(2) : nullptr, ctx.has_input(3) ? &ctx.input(3) : nullptr);
}

// ---- vlrt.Attention ---------------------------------------------------------------------

// The offset of batch index `flat` (over the logical batch axes) in an operand with these strides.
int64_t batch_offset(int64_t flat, const Shape& batch, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t a = batch.size(); a-- > 0;) {
    off += (flat % batch[a]) * strides[a];
    flat /= batch[a];
  }
  return off;
}

// Copies a logical [rows, cols] block with the given strides into contiguous memory.
void gather_block(const float* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, float* dst) {
  for (int64_t r = 0; r < rows; r++) {
    const float* s = src + r * row_stride;
    float* d = dst + r * cols;
    if (col_stride == 1) {
      std::memcpy(d, s, size_t(cols) * sizeof(float));
    } else {
      for (int64_t c = 0; c < cols; c++) d[c] = s[c * col_stride];
    }
  }
}

// Softmax of each row of scores [rows, n] (plus the mask row, when given), in place.
void softmax_rows(float* scores, int64_t rows, int64_t n, const float* mask, const std::vector<int64_t>& mask_strides) {
  size_t r = mask_strides.size();
  for (int64_t i = 0; i < rows; i++) {
    float* row = scores + i * n;
    if (mask)
      for (int64_t j = 0; j < n; j++) row[j] += mask[i * mask_strides[r - 2] + j * mask_strides[r - 1]];
    float top = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; j++) top = std::max(top, row[j]);
    if (top == -std::numeric_limits<float>::infinity()) {
      std::fill(row, row + n, 0.f);  // every key masked out
      continue;
    }
    f32x4 acc = splat(0.f);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      f32x4 v;
      std::memcpy(&v, row + j, sizeof v);
      v = exp_f32x4(v - splat(top));
      acc += v;
      std::memcpy(row + j, &v, sizeof v);
    }
    float sum = acc[0] + acc[1] + acc[2] + acc[3];
    for (; j < n; j++) sum += row[j] = std::exp(row[j] - top);
    float inv = 1 / sum;
    for (j = 0; j < n; j++) row[j] *= inv;
  }
}

// One (batch) slice: q, k and v gathered contiguous, scores = scale q k^T and the output p v by
// single-threaded BLAS (the slices run in parallel), the output written through its strides.
void attend_slice(const AttentionDims& d, float scale, const float* q, const float* k, const float* v,
                  const float* mask, const std::vector<int64_t>& mask_strides, float* y,
                  const std::vector<int64_t>& y_strides, std::vector<float>& scratch) {
  size_t r = d.q_strides.size();
  scratch.resize(size_t(d.sq * d.d + d.sk * d.d + d.sk * d.dv + d.sq * d.sk + d.sq * d.dv));
  float* qc = scratch.data();
  float* kc = qc + d.sq * d.d;
  float* vc = kc + d.sk * d.d;
  float* p = vc + d.sk * d.dv;
  float* out = p + d.sq * d.sk;
  gather_block(q, d.sq, d.d, d.q_strides[r - 2], d.q_strides[r - 1], qc);
  gather_block(k, d.sk, d.d, d.k_strides[r - 2], d.k_strides[r - 1], kc);
  gather_block(v, d.sk, d.dv, d.v_strides[r - 2], d.v_strides[r - 1], vc);
  blas_sgemm(false, true, d.sq, d.sk, d.d, scale, qc, d.d, kc, d.d, 0.f, p, d.sk);
  softmax_rows(p, d.sq, d.sk, mask, mask_strides);
  blas_sgemm(false, false, d.sq, d.dv, d.sk, 1.f, p, d.sk, vc, d.dv, 0.f, out, d.dv);
  for (int64_t i = 0; i < d.sq; i++) {
    float* yr = y + i * y_strides[r - 2];
    if (y_strides[r - 1] == 1) {
      std::memcpy(yr, out + i * d.dv, size_t(d.dv) * sizeof(float));
    } else {
      for (int64_t c = 0; c < d.dv; c++) yr[c * y_strides[r - 1]] = out[i * d.dv + c];
    }
  }
}

void attention_kernel(KernelContext& ctx) {
  const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
  AttentionDims d = attention_dims(ctx.node, q.shape(), k.shape(), v.shape());
  float scale = ctx.node.attr_float("scale", 1.f);
  size_t r = q.shape().size();
  Shape scores = d.batch;
  scores.push_back(d.sq);
  scores.push_back(d.sk);
  const float* mask = ctx.has_input(3) ? ctx.input(3).data<float>() : nullptr;
  std::vector<int64_t> mask_strides = mask ? broadcast_strides(ctx.input(3).shape(), scores) : std::vector<int64_t>(r, 0);
  // The logical output [batch..., Sq, Dv] lives in Y permuted by out_perm: logical axis a is Y's
  // axis at which out_perm names it.
  std::vector<int64_t> y_contig = contiguous_strides(ctx.output(0).shape()), y_strides(r);
  for (size_t i = 0; i < r; i++) y_strides[size_t(d.out_perm[i])] = y_contig[i];
  int64_t slices = shape_numel(d.batch);
  const float *pq = q.data<float>(), *pk = k.data<float>(), *pv = v.data<float>();
  float* py = ctx.output(0).data<float>();
  ctx.pool.parallel_for(slices, [&](int64_t lo, int64_t hi) {
    std::vector<float> scratch;
    for (int64_t s = lo; s < hi; s++)
      attend_slice(d, scale, pq + batch_offset(s, d.batch, d.q_strides), pk + batch_offset(s, d.batch, d.k_strides),
                   pv + batch_offset(s, d.batch, d.v_strides),
                   mask ? mask + batch_offset(s, d.batch, mask_strides) : nullptr, mask_strides,
                   py + batch_offset(s, d.batch, y_strides), y_strides, scratch);
  });
}

// Each output value is one row of A against one row of W; the rows of the output's last axis are
// taken as runs, each operand advancing by its stride along that axis.
void weighted_sum_kernel(KernelContext& ctx) {
  const Tensor &a = ctx.input(0), &w = ctx.input(1);
  Tensor& y = ctx.output(0);
  const Shape a_rows(a.shape().begin(), a.shape().end() - 1), w_rows(w.shape().begin(), w.shape().end() - 1);
  const int64_t k = a.shape().back();
  const Shape rows = broadcast_shapes(a_rows, w_rows);
  if (shape_numel(rows) == 0) return;
  std::vector<int64_t> sa = broadcast_strides(a_rows, rows), sw = broadcast_strides(w_rows, rows);
  for (int64_t& s : sa) s *= k;
  for (int64_t& s : sw) s *= k;
  // The last axis of rows as runs; a scalar output is one run of one.
  const int64_t run = rows.empty() ? 1 : rows.back(), a_step = rows.empty() ? 0 : sa.back(),
                w_step = rows.empty() ? 0 : sw.back();
  const Shape outer(rows.begin(), rows.end() - (rows.empty() ? 0 : 1));
  sa.resize(outer.size());
  sw.resize(outer.size());
  const float *pa = a.data<float>(), *pw = w.data<float>();
  float* py = y.data<float>();
  const RowKernelsF32* vec = row_kernels_f32();
  ctx.pool.parallel_for(
      shape_numel(rows) / run,
      [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; r++) {
          const float *ar = pa + batch_offset(r, outer, sa), *wr = pw + batch_offset(r, outer, sw);
          float* yr = py + r * run;
          if (vec) {
            vec->dot_rows(ar, a_step, wr, w_step, k, yr, run);
            continue;
          }
          for (int64_t i = 0; i < run; i++) {
            float s = 0;
            for (int64_t j = 0; j < k; j++) s += ar[i * a_step + j] * wr[i * w_step + j];
            yr[i] = s;
          }
        }
      },
      grain_for(run * k));
}

// Each level's values are first laid out pixel by pixel, [B][H_l * W_l][C], so that every tap of a
// sampling point adds C contiguous values; the taps are found once per point for all channels and
// carry the point's weight. A task sums a block of queries of one batch into [query][C] and then
// writes them out as [C][query].
void deformable_sample_sum_kernel(KernelContext& ctx) {
  const Node& n = ctx.node;
  Tensor& y = ctx.output(0);
  const int64_t levels = int64_t(ctx.input_count() - 1) / 2;
  const Tensor &w = ctx.input(0), &x0 = ctx.input(1), &g0 = ctx.input(2);
  const int64_t batch = x0.dim(0), channels = x0.dim(1), queries = g0.dim(1), points = g0.dim(2);
  if (y.numel() == 0) return;
  std::string pm = n.attr_string("padding_mode", "zeros");
  GridPad pad = pm == "border" ? GridPad::border : pm == "reflection" ? GridPad::reflection : GridPad::zeros;
  bool align = n.attr_int("align_corners", 0) == 1;
  std::vector<int64_t> first(size_t(levels) + 1, 0);  // each level's first pixel in the pixel-major copy
  for (int64_t l = 0; l < levels; l++) {
    const Tensor& x = ctx.input(size_t(1 + 2 * l));
    if ((x.dim(2) == 0 || x.dim(3) == 0) && pad != GridPad::zeros)
      fail("cannot sample the empty level ", l, " with padding_mode '", pm, "'");
    first[size_t(l) + 1] = first[size_t(l)] + x.dim(2) * x.dim(3);
  }
  const int64_t pixels = first.back();
  // Kept by the calling thread for the next call (GroundingDINO's: 8 x 22223 x 32 floats, 23 MB).
  static thread_local AlignedFloats t_pixels;
  float* by_pixel = grown(t_pixels, size_t(batch * pixels * channels));
  ctx.pool.parallel_for(
      batch * levels,
      [&](int64_t lo, int64_t hi) {
        for (int64_t task = lo; task < hi; task++) {
          int64_t b = task / levels, l = task % levels, hw = first[size_t(l) + 1] - first[size_t(l)];
          const float* from = ctx.input(size_t(1 + 2 * l)).data<float>() + b * channels * hw;
          float* to = by_pixel + (b * pixels + first[size_t(l)]) * channels;
          for (int64_t p0 = 0; p0 < hw; p0 += 16)
            for (int64_t c = 0; c < channels; c++)
              for (int64_t p = p0; p < std::min(hw, p0 + 16); p++) to[p * channels + c] = from[c * hw + p];
        }
      },
      1);
  constexpr int64_t kQueries = 16;
  const int64_t blocks = ceil_div(queries, kQueries);
  const float* pw = w.data<float>();
  float* py = y.data<float>();
  ctx.pool.parallel_for(
      batch * blocks,
      [&](int64_t lo, int64_t hi) {
        static thread_local AlignedFloats t_sums;
        float* sums = grown(t_sums, size_t(kQueries * channels));
        GridTaps<float> taps;
        for (int64_t task = lo; task < hi; task++) {
          int64_t b = task / blocks, q0 = task % blocks * kQueries, q1 = std::min(queries, q0 + kQueries);
          std::fill_n(sums, (q1 - q0) * channels, 0.f);
          for (int64_t q = q0; q < q1; q++) {
            float* sum = sums + (q - q0) * channels;
            const float* weight = pw + (b * queries + q) * levels * points;
            for (int64_t l = 0; l < levels; l++) {
              const Tensor& x = ctx.input(size_t(1 + 2 * l));
              const float* grid = ctx.input(size_t(2 + 2 * l)).data<float>() + (b * queries + q) * points * 2;
              const float* values = by_pixel + (b * pixels + first[size_t(l)]) * channels;
              for (int64_t p = 0; p < points; p++) {
                if (pad == GridPad::zeros)
                  bilinear_zeros_taps(grid[2 * p], grid[2 * p + 1], x.dim(2), x.dim(3), align, taps);
                else
                  grid_taps<float>(grid[2 * p], grid[2 * p + 1], x.dim(2), x.dim(3), 1, pad, align, taps);
                for (int t = 0; t < taps.count; t++) {
                  const float tw = weight[l * points + p] * taps.w[t];
                  const float* v = values + taps.idx[t] * channels;
                  for (int64_t c = 0; c < channels; c++) sum[c] += tw * v[c];
                }
              }
            }
          }
          for (int64_t c = 0; c < channels; c++)
            for (int64_t q = q0; q < q1; q++)
              py[(b * channels + c) * queries + q] = sums[(q - q0) * channels + c];
        }
      },
      grain_for(kQueries * levels * points * channels * 4));
}

}  // namespace

void register_fused_kernels(CpuKernelTable& t) {
  t["vlrt.FusedMatMul"] = {fused_matmul_kernel};
  t["vlrt.Attention"] = {attention_kernel};
  t["vlrt.WeightedSum"] = {weighted_sum_kernel};
  t["vlrt.DeformableSampleSum"] = {deformable_sample_sum_kernel};
}

}  // namespace vlrt

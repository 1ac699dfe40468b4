// OpenCL kernels of the normalization family: Softmax, LogSoftmax and
// LayerNormalization, one work-group per row with local-memory reductions.
#include "backends/opencl/kernel.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

const ClProgram kProgram{"normalization", R"CL(
// Softmax of row `group` of n elements, `inner` apart.
__kernel void softmax_f32(__global const float* xp, long xo, __global float* yp, long yo, int n, int inner,
                          int log_mode, __local float* scratch) {
  int row = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
  int o = row / inner;
  long base = (long)o * n * inner + (row - o * inner);
  __global const float* x = xp + xo + base;
  __global float* y = yp + yo + base;
  float m = -INFINITY;
  for (int i = lid; i < n; i += L) m = fmax(m, x[i * inner]);
  m = group_max(m, scratch);
  float s = 0.0f;
  for (int i = lid; i < n; i += L) s += exp(x[i * inner] - m);
  s = group_sum(s, scratch);
  float ls = log(s), rs = 1.0f / s;
  for (int i = lid; i < n; i += L) {
    float v = x[i * inner] - m;
    y[i * inner] = log_mode ? v - ls : exp(v) * rs;
  }
}

// LayerNormalization of row `group` of `cols` elements. Scale and bias are indexed by
// the position in the row (general == 0) or through strides over all of X.
__kernel void layer_norm_f32(__global const float* xp, long xo, __global float* yp, long yo, int cols, float eps,
                             __global const float* sp, long so, __global const float* bp, long bo, int has_bias,
                             int general, int rank, int8 dims_v, int8 ss_v, int8 bs_v, __global float* mp,
                             long mo, int has_mean, __global float* ip, long io, int has_inv,
                             __local float* scratch) {
  int row = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
  UNPACK8(dims_v, dims);
  UNPACK8(ss_v, ss);
  UNPACK8(bs_v, bs);
  __global const float* x = xp + xo + (long)row * cols;
  __global float* y = yp + yo + (long)row * cols;
  float s = 0.0f;
  for (int j = lid; j < cols; j += L) s += x[j];
  float mean = cols ? group_sum(s, scratch) / cols : 0.0f;
  float v = 0.0f;
  for (int j = lid; j < cols; j += L) {
    float d = x[j] - mean;
    v += d * d;
  }
  float var = cols ? group_sum(v, scratch) / cols : 0.0f;
  float inv = 1.0f / sqrt(var + eps);
  for (int j = lid; j < cols; j += L) {
    int is = j, ib = j;
    if (general) offsets2(row * cols + j, rank, dims, ss, bs, &is, &ib);
    float b = has_bias ? bp[bo + ib] : 0.0f;
    y[j] = (x[j] - mean) * inv * sp[so + is] + b;
  }
  if (lid == 0 && has_mean) mp[mo + row] = mean;
  if (lid == 0 && has_inv) ip[io + row] = inv;
}
)CL"};

void run_softmax(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const Shape& s = x.shape();
  size_t axis = size_t(normalize_axis(ctx.node.attr_int("axis", -1), x.rank()));
  int64_t outer = 1, n = 1, inner = 1;
  for (size_t d = 0; d < s.size(); d++) (d < axis ? outer : d == axis ? n : inner) *= s[d];
  if (x.numel() == 0) return;
  size_t group = ctx.group_size(n);
  ctx.launch(ctx.kernel(kProgram, "softmax_f32"), cl_range(size_t(outer * inner) * group, group), x, y,
             cl_int(n), cl_int(inner), cl_int(ctx.node.op_type == "LogSoftmax"),
             ClLocal{group * sizeof(float)});
}

void run_layer_norm(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& xs = x.shape();
  size_t axis = size_t(normalize_axis(ctx.node.attr_int("axis", -1), x.rank()));
  int64_t rows = 1, cols = 1;
  for (size_t d = 0; d < xs.size(); d++) (d < axis ? rows : cols) *= xs[d];
  Shape suffix(xs.begin() + axis, xs.end());
  const Tensor& scale = ctx.input(1);
  bool has_bias = ctx.has_input(2);
  const Tensor& bias = has_bias ? ctx.input(2) : scale;
  // Scale and bias of the row's own shape (leading 1s aside) are read by position in the row.
  auto per_row = [&](const Tensor& t) {
    Shape s = t.shape();
    while (s.size() > suffix.size() && s.front() == 1) s.erase(s.begin());
    return s == suffix;
  };
  bool general = !per_row(scale) || (has_bias && !per_row(bias));
  ClIndexer ix = broadcast_indexer(xs, {scale.shape(), bias.shape()});
  if (!general) ix = collapse_dims({1}, {{0}, {0}});
  Tensor* mean = ctx.has_output(1) ? &ctx.output(1) : nullptr;
  Tensor* inv = ctx.has_output(2) ? &ctx.output(2) : nullptr;
  Tensor& y = ctx.output(0);
  size_t group = ctx.group_size(cols);
  ctx.launch(ctx.kernel(kProgram, "layer_norm_f32"), cl_range(size_t(rows) * group, group), x, y,
             cl_int(cols), ctx.node.attr_float("epsilon", 1e-5f), scale, bias, cl_int(has_bias),
             cl_int(general), cl_int(ix.rank), ix.dims, ix.strides[0], ix.strides[1], mean ? *mean : y,
             cl_int(mean != nullptr), inv ? *inv : y, cl_int(inv != nullptr), ClLocal{group * sizeof(float)});
}

bool supports_float(const Node& n, const std::vector<DType>& d, std::string* why) {
  return all_float32(n, d, why);
}

bool supports_layer_norm(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (n.attr_int("stash_type", 1) != 1) return reject(n, "a stash_type other than float32", why);
  return all_float32(n, d, why);
}

}  // namespace

void register_opencl_normalization(ClOpTable& t) {
  t["Softmax"] = {supports_float, run_softmax};
  t["LogSoftmax"] = {supports_float, run_softmax};
  t["LayerNormalization"] = {supports_layer_norm, run_layer_norm};
}

}  // namespace vlrt

// OpenCL kernels of the linear-algebra family: MatMul and Gemm share one tiled kernel
// (operands addressed by row and column strides, so transposes cost nothing, and
// batch axes broadcast by strides); Conv is the same tiling as an implicit GEMM over
// up to three spatial axes, its im2col matrix read from the input on the fly.
#include <algorithm>

#include "backends/opencl/kernel.h"
#include "backends/opencl/opencl_backend.h"
#include "ops/linalg_semantics.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

const ClProgram kProgram{"linalg", R"CL(
// y[b] = alpha * A[b] x B[b] (+ beta * C). A work-group of TILE x TILE items computes a
// TS x TS block of y, each item WPT x WPT outputs TILE apart, from TK-deep slices of A
// and B staged in local memory. A(i, p) is a[i * a_rs + p * a_cs], B(p, j) is
// b[p * b_rs + j * b_cs]; batch b's matrices start at offsets given by the batch strides.
#define WPT 4
#define TS (TILE * WPT)
#define TK 16
__kernel void matmul_f32(int M, int N, int K, __global const float* ap, long ao, int a_rs, int a_cs,
                         __global const float* bp, long bo, int b_rs, int b_cs, __global float* yp, long yo,
                         float alpha, float beta, __global const float* cp, long co, int c_rs, int c_cs,
                         int has_c, int batch_rank, int8 bdims_v, int8 bsa_v, int8 bsb_v) {
  __local float as[TK][TS];
  __local float bs[TK][TS];
  int tx = get_local_id(0), ty = get_local_id(1), lid = ty * TILE + tx;
  int row0 = get_group_id(1) * TS, col0 = get_group_id(0) * TS;
  int batch = get_global_id(2);
  UNPACK8(bdims_v, bdims);
  UNPACK8(bsa_v, bsa);
  UNPACK8(bsb_v, bsb);
  int oa, ob;
  offsets2(batch, batch_rank, bdims, bsa, bsb, &oa, &ob);
  __global const float* a = ap + ao + oa;
  __global const float* b = bp + bo + ob;
  float acc[WPT][WPT];
  for (int r = 0; r < WPT; r++)
    for (int c = 0; c < WPT; c++) acc[r][c] = 0.0f;
  for (int t = 0; t < K; t += TK) {
    for (int l = lid; l < TS * TK; l += TILE * TILE) {
      int r = l / TK, k = l - r * TK;
      as[k][r] = (row0 + r < M && t + k < K) ? a[(row0 + r) * a_rs + (t + k) * a_cs] : 0.0f;
      int kk = l / TS, c = l - kk * TS;
      bs[kk][c] = (t + kk < K && col0 + c < N) ? b[(t + kk) * b_rs + (col0 + c) * b_cs] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TK; k++) {
      float bv[WPT];
      for (int c = 0; c < WPT; c++) bv[c] = bs[k][tx + c * TILE];
      for (int r = 0; r < WPT; r++) {
        float av = as[k][ty + r * TILE];
        for (int c = 0; c < WPT; c++) acc[r][c] += av * bv[c];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = 0; r < WPT; r++) {
    int i = row0 + ty + r * TILE;
    if (i >= M) break;
    for (int c = 0; c < WPT; c++) {
      int j = col0 + tx + c * TILE;
      if (j >= N) break;
      float v = alpha * acc[r][c];
      if (has_c) v += beta * cp[co + i * c_rs + j * c_cs];
      yp[yo + (long)batch * M * N + i * N + j] = v;
    }
  }
}

// Convolution as an implicit GEMM per (image, group): y[m, pos] = sum over p of
// W[m, p] * X'[p, pos], with p = (channel, kd, kh, kw) and the im2col matrix X' read
// from x on the fly (zero in the padding). Spatial axes padded to three (x, y, z).
__kernel void conv_f32(__global const float* xp, long xo, __global const float* wp, long wo,
                       __global const float* bp, long bo, int has_bias, __global float* yp, long yo, int C,
                       int M, int G, int4 in, int4 out, int4 k, int4 st, int4 dil, int4 pad) {
  __local float as[TK][TS];
  __local float bs[TK][TS];
  int tx = get_local_id(0), ty = get_local_id(1), lid = ty * TILE + tx;
  int row0 = get_group_id(1) * TS, col0 = get_group_id(0) * TS;
  int job = get_global_id(2), n = job / G, g = job - n * G;
  int cg = C / G, mg = M / G, K = cg * k.x * k.y * k.z, P = out.x * out.y * out.z;
  __global const float* x = xp + xo + (long)(n * C + g * cg) * in.x * in.y * in.z;
  __global const float* w = wp + wo + (long)g * mg * K;
  float acc[WPT][WPT];
  for (int r = 0; r < WPT; r++)
    for (int c = 0; c < WPT; c++) acc[r][c] = 0.0f;
  for (int t = 0; t < K; t += TK) {
    for (int l = lid; l < TS * TK; l += TILE * TILE) {
      int r = l / TK, kk = l - r * TK;
      as[kk][r] = (row0 + r < mg && t + kk < K) ? w[(row0 + r) * K + t + kk] : 0.0f;
      int q = l / TS, c = l - q * TS, p = t + q, pos = col0 + c;
      float v = 0.0f;
      if (p < K && pos < P) {
        int kw = p % k.z, rest = p / k.z;
        int kh = rest % k.y;
        rest /= k.y;
        int kd = rest % k.x, ci = rest / k.x;
        int ow = pos % out.z, orest = pos / out.z;
        int oh = orest % out.y, od = orest / out.y;
        int id = od * st.x - pad.x + kd * dil.x, ih = oh * st.y - pad.y + kh * dil.y,
            iw = ow * st.z - pad.z + kw * dil.z;
        if (id >= 0 && id < in.x && ih >= 0 && ih < in.y && iw >= 0 && iw < in.z)
          v = x[((ci * in.x + id) * in.y + ih) * in.z + iw];
      }
      bs[q][c] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TK; kk++) {
      float bv[WPT];
      for (int c = 0; c < WPT; c++) bv[c] = bs[kk][tx + c * TILE];
      for (int r = 0; r < WPT; r++) {
        float av = as[kk][ty + r * TILE];
        for (int c = 0; c < WPT; c++) acc[r][c] += av * bv[c];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = 0; r < WPT; r++) {
    int m = row0 + ty + r * TILE;
    if (m >= mg) break;
    float bias = has_bias ? bp[bo + g * mg + m] : 0.0f;
    for (int c = 0; c < WPT; c++) {
      int pos = col0 + tx + c * TILE;
      if (pos >= P) break;
      yp[yo + ((long)n * M + g * mg + m) * P + pos] = acc[r][c] + bias;
    }
  }
}
)CL"};

constexpr size_t kOutputsPerItem = 4;  // WPT in the kernels

// Work-items of matmul_f32 and conv_f32 for `batch` products of M x N outputs: TILE items
// per TS = TILE * WPT outputs along each axis.
ClRange matmul_range(ClContext& ctx, int64_t m, int64_t n, int64_t batch) {
  size_t tile = ctx.backend.tile(), ts = tile * kOutputsPerItem;
  return ClRange{{(size_t(n) + ts - 1) / ts * tile, (size_t(m) + ts - 1) / ts * tile, size_t(batch)},
                 {tile, tile, 1},
                 3};
}

struct MatrixArgs {
  cl_int rows_stride, cols_stride;
};

// alpha * A x B (+ beta * C) for `batch` matrix pairs located by the batch indexer.
void launch_matmul(ClContext& ctx, int64_t m, int64_t n, int64_t k, const Tensor& a, MatrixArgs as,
                   const Tensor& b, MatrixArgs bs, Tensor& y, float alpha, float beta, const Tensor* c,
                   MatrixArgs cs, int64_t batch, int batch_rank, cl_int8 bdims, cl_int8 bsa, cl_int8 bsb) {
  ClRange r = matmul_range(ctx, m, n, batch);
  ctx.launch(ctx.kernel(kProgram, "matmul_f32"), r, cl_int(m), cl_int(n), cl_int(k), a, as.rows_stride,
             as.cols_stride, b, bs.rows_stride, bs.cols_stride, y, alpha, beta, c ? *c : y, cs.rows_stride,
             cs.cols_stride, cl_int(c != nullptr), cl_int(batch_rank), bdims, bsa, bsb);
}

void run_matmul(ClContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  MatMulDims d = matmul_dims(a.shape(), b.shape());
  int64_t m = d.m, n = d.n, k = d.k;
  ClIndexer ix = collapse_dims(d.batch, {d.a_strides, d.b_strides});
  launch_matmul(ctx, m, n, k, a, {cl_int(k), 1}, b, {cl_int(n), 1}, y, 1.f, 0.f, nullptr, {0, 0}, d.count,
                ix.rank, ix.dims, ix.strides[0], ix.strides[1]);
}

void run_gemm(ClContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor& y = ctx.output(0);
  bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  float alpha = ctx.node.attr_float("alpha", 1.f), beta = ctx.node.attr_float("beta", 1.f);
  int64_t m = y.dim(0), n = y.dim(1), k = ta ? a.dim(0) : a.dim(1);
  // A stored [M, K], or [K, M] when transposed; likewise B.
  MatrixArgs am = ta ? MatrixArgs{1, cl_int(m)} : MatrixArgs{cl_int(k), 1};
  MatrixArgs bm = tb ? MatrixArgs{1, cl_int(k)} : MatrixArgs{cl_int(n), 1};
  const Tensor* c = ctx.has_input(2) && beta != 0 ? &ctx.input(2) : nullptr;
  MatrixArgs cm{0, 0};
  if (c) {
    std::vector<int64_t> st = broadcast_strides(c->shape(), {m, n});
    cm = {cl_int(st[0]), cl_int(st[1])};
  }
  launch_matmul(ctx, m, n, k, a, am, b, bm, y, alpha, beta, c, cm, 1, 0, cl_int8{}, cl_int8{}, cl_int8{});
}

void run_conv(ClContext& ctx) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  Tensor& y = ctx.output(0);
  size_t nsp = size_t(x.rank()) - 2;
  if (nsp < 1 || nsp > 3) unsupported("OpenCL Conv over ", nsp, " spatial axes (1 to 3 are supported)");
  ConvGeometry g = conv_geometry(ctx.node, x.shape(), w.shape(), y.shape(), false);
  auto int4 = [](const int64_t* v) { return cl_int4{{cl_int(v[0]), cl_int(v[1]), cl_int(v[2]), 0}}; };
  bool has_bias = ctx.has_input(2);
  ctx.launch(ctx.kernel(kProgram, "conv_f32"),
             matmul_range(ctx, g.m / g.group, g.out_size(), g.batch * g.group), x, w,
             has_bias ? ctx.input(2) : w, cl_int(has_bias), y, cl_int(g.c), cl_int(g.m), cl_int(g.group),
             int4(g.in), int4(g.out), int4(g.k), int4(g.stride), int4(g.dil), int4(g.pad));
}

bool supports_float(const Node& n, const std::vector<DType>& d, std::string* why) {
  return all_float32(n, d, why);
}

}  // namespace

void register_opencl_linalg(ClOpTable& t) {
  t["MatMul"] = {supports_float, run_matmul};
  t["Gemm"] = {supports_float, run_gemm};
  t["Conv"] = {supports_float, run_conv};
}

}  // namespace vlrt

// OpenCL kernels of the spatial family: MaxPool and AveragePool over up to three
// spatial axes, and Pad in every mode, one output element per work-item.
#include <algorithm>
#include <cstring>

#include "backends/opencl/kernel.h"
#include "backends/opencl/opencl_backend.h"
#include "ops/shape_util.h"
#include "ops/spatial_semantics.h"

namespace vlrt {

namespace {

const ClProgram kProgram{"spatial", R"CL(
inline int ceil_div(int a, int b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Spatial axes padded to three (x, y, z); pb/pe are the pads at the start and the end.
__kernel void pool_f32(__global const float* xp, long xo, __global float* yp, long yo, int is_max,
                       int include_pad, int4 in, int4 out, int4 k, int4 st, int4 dil, int4 pb, int4 pe, int total) {
  int idx = get_global_id(0);
  if (idx >= total) return;
  int o2 = idx % out.z, t = idx / out.z;
  int o1 = t % out.y;
  t /= out.y;
  int o0 = t % out.x, plane = t / out.x;
  int s0 = o0 * st.x - pb.x, s1 = o1 * st.y - pb.y, s2 = o2 * st.z - pb.z;
  __global const float* x = xp + xo + (long)plane * in.x * in.y * in.z;
  float best = -INFINITY, sum = 0.0f;
  int taps = 0;
  for (int j0 = 0; j0 < k.x; j0++) {
    int i0 = s0 + j0 * dil.x;
    if (i0 < 0 || i0 >= in.x) continue;
    for (int j1 = 0; j1 < k.y; j1++) {
      int i1 = s1 + j1 * dil.y;
      if (i1 < 0 || i1 >= in.y) continue;
      for (int j2 = 0; j2 < k.z; j2++) {
        int i2 = s2 + j2 * dil.z;
        if (i2 < 0 || i2 >= in.z) continue;
        float v = x[(i0 * in.y + i1) * in.z + i2];
        best = v > best ? v : best;
        sum += v;
        taps++;
      }
    }
  }
  if (is_max) {
    yp[yo + idx] = best;
    return;
  }
  // count_include_pad counts the taps inside the padded input.
  int count = include_pad ? clamp(ceil_div(in.x + pe.x - s0, dil.x), 0, k.x) *
                                clamp(ceil_div(in.y + pe.y - s1, dil.y), 0, k.y) *
                                clamp(ceil_div(in.z + pe.z - s2, dil.z), 0, k.z)
                          : taps;
  yp[yo + idx] = sum / count;
}

// Source index along one axis of output position i - pad_begin, or -1 for the constant.
// [lo, hi) is what is left of the input after negative pads crop it; mode 0 constant,
// 1 edge, 2 wrap, 3 reflect.
inline int pad_source(int i, int lo, int hi, int mode) {
  if (i >= lo && i < hi) return i;
  int len = hi - lo;
  if (mode == 1) return clamp(i, lo, hi - 1);
  if (mode == 2) return lo + ((i - lo) % len + len) % len;
  if (mode == 3) {
    int period = 2 * (len - 1), m = period ? ((i - lo) % period + period) % period : 0;
    return lo + (m >= len ? period - m : m);
  }
  return -1;
}

#define PAD(S, T)                                                                                       \
  __kernel void pad_##S(__global const T* xp, long xo, __global T* yp, long yo, int rank, int8 out_v,   \
                        int8 st_v, int8 pb_v, int8 lo_v, int8 hi_v, int mode, ulong value, int n) {     \
    int i = get_global_id(0);                                                                           \
    if (i >= n) return;                                                                                 \
    UNPACK8(out_v, out);                                                                                \
    UNPACK8(st_v, st);                                                                                  \
    UNPACK8(pb_v, pb);                                                                                  \
    UNPACK8(lo_v, lo);                                                                                  \
    UNPACK8(hi_v, hi);                                                                                  \
    int rest = i, off = 0, outside = 0;                                                                 \
    for (int d = rank - 1; d >= 0; d--) {                                                               \
      int q = rest / out[d], s = pad_source(rest - q * out[d] - pb[d], lo[d], hi[d], mode);             \
      rest = q;                                                                                         \
      outside = outside || s < 0;                                                                       \
      off += s * st[d];                                                                                 \
    }                                                                                                   \
    yp[yo + i] = outside ? (T)value : xp[xo + off];                                                      \
  }
PAD(u8, uchar)
PAD(u16, ushort)
PAD(u32, uint)
PAD(u64, ulong)
)CL"};

void run_pool(ClContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  size_t nsp = size_t(x.rank()) - 2;
  if (nsp < 1 || nsp > 3)
    unsupported("OpenCL ", n.op_type, " over ", nsp, " spatial axes (1 to 3 are supported)");
  std::vector<int64_t> k = n.attr_ints("kernel_shape"), s = n.attr_ints("strides"),
                       d = n.attr_ints("dilations"), pads = n.attr_ints("pads");
  if (s.empty()) s.assign(nsp, 1);
  if (d.empty()) d.assign(nsp, 1);
  if (pads.empty()) pads.assign(2 * nsp, 0);
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  cl_int4 in{{1, 1, 1, 0}}, out{{1, 1, 1, 0}}, kern{{1, 1, 1, 0}}, st{{1, 1, 1, 0}}, dil{{1, 1, 1, 0}},
      pb{{0, 0, 0, 0}}, pe{{0, 0, 0, 0}};
  size_t o = 3 - nsp;
  for (size_t i = 0; i < nsp; i++) {
    int64_t in_i = x.shape()[i + 2], out_i = y.shape()[i + 2], b = 0, e = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>(0, (out_i - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_i);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad != "VALID") {
      b = pads[i];
      e = pads[i + nsp];
    }
    in.s[o + i] = cl_int(in_i);
    out.s[o + i] = cl_int(out_i);
    kern.s[o + i] = cl_int(k[i]);
    st.s[o + i] = cl_int(s[i]);
    dil.s[o + i] = cl_int(d[i]);
    pb.s[o + i] = cl_int(b);
    pe.s[o + i] = cl_int(e);
  }
  ctx.launch(ctx.kernel(kProgram, "pool_f32"), cl_range(size_t(y.numel())), x, y,
             cl_int(n.op_type == "MaxPool"), cl_int(n.attr_int("count_include_pad", 0) == 1), in, out, kern,
             st, dil, pb, pe, cl_int(y.numel()));
}

// The pad value's bits: the constant_value input, of the data's type.
uint64_t pad_value(ClContext& ctx, DType dt) {
  uint64_t bits = 0;
  if (!ctx.has_input(2)) return 0;
  const Tensor& c = ctx.input(2);
  Tensor host(c.dtype(), c.shape());
  ctx.backend.copy_to_host(c, host);
  std::memcpy(&bits, host.raw(), dtype_size(dt));
  return bits;
}

void run_pad(ClContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int rank = x.rank();
  if (rank > kClMaxDims) unsupported("OpenCL Pad of rank ", rank, " (at most ", kClMaxDims, ")");
  std::string mode = n.attr_string("mode", "constant");
  std::vector<int64_t> pads = ctx.input_ints(1);
  std::vector<int64_t> begins =
      pad_begins(pads, ctx.has_input(3) ? ctx.input_ints(3) : std::vector<int64_t>(), rank);
  std::vector<int64_t> st = contiguous_strides(x.shape());
  cl_int8 out{}, stride{}, pb{}, lo{}, hi{};
  for (int a = 0; a < rank; a++) pb.s[a] = cl_int(begins[size_t(a)]);
  for (int a = 0; a < rank; a++) {
    // Negative pads crop the input first; the modes work on what is left.
    int64_t in = x.shape()[a], o = y.shape()[a];
    out.s[a] = cl_int(o);
    stride.s[a] = cl_int(st[a]);
    lo.s[a] = cl_int(std::max<int64_t>(0, -pb.s[a]));
    hi.s[a] = cl_int(std::min(in, o - pb.s[a]));
  }
  int code = mode == "edge" ? 1 : mode == "wrap" ? 2 : mode == "reflect" ? 3 : 0;
  ctx.launch(ctx.kernel(kProgram, cat("pad_", bits_suffix(x.dtype())).c_str()), cl_range(size_t(y.numel())),
             x, y, cl_int(rank), out, stride, pb, lo, hi, cl_int(code), cl_ulong(pad_value(ctx, x.dtype())),
             cl_int(y.numel()));
}

bool supports_pad(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (!bits_suffix(dtype_at(d, 0)))
    return reject_dtype(n, 0, dtype_at(d, 0), "1, 2, 4 and 8-byte types", why);
  return true;
}

bool supports_pool(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return reject(n, "the Indices output", why);
  return all_float32(n, d, why);
}

}  // namespace

void register_opencl_spatial(ClOpTable& t) {
  t["MaxPool"] = {supports_pool, run_pool};
  t["AveragePool"] = {supports_pool, run_pool};
  t["Pad"] = {supports_pad, run_pad};
}

}  // namespace vlrt

// OpenCL kernels of the spatial family: MaxPool and AveragePool over up to three
// spatial axes, one output element per work-item.
#include <algorithm>

#include "backends/opencl/kernel.h"

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

bool supports_pool(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return reject(n, "the Indices output", why);
  return all_float32(n, d, why);
}

}  // namespace

void register_opencl_spatial(ClOpTable& t) {
  t["MaxPool"] = {supports_pool, run_pool};
  t["AveragePool"] = {supports_pool, run_pool};
}

}  // namespace vlrt

// OpenCL kernels of the reduction family: ReduceSum, ReduceMean, ReduceMax ... and the
// global pools, which are reductions over the spatial axes. One work-group per output
// walks the reduced axes (collapsed, with their strides) and combines in local memory.
#include "backends/opencl/kernel.h"
#include "ops/shape_util.h"

namespace vlrt {

namespace {

const ClProgram kProgram{"reduction", R"CL(
#define REDUCE(NAME, INIT, ADD, COMBINE, FIN)                                                         \
  __kernel void NAME(__global const float* xp, long xo, __global float* yp, long yo, int kept_rank,   \
                     int8 kdims_v, int8 kst_v, int red_rank, int8 rdims_v, int8 rst_v, int count,     \
                     __local float* s) {                                                              \
    int o = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);                            \
    UNPACK8(kdims_v, kdims);                                                                          \
    UNPACK8(kst_v, kst);                                                                              \
    UNPACK8(rdims_v, rdims);                                                                          \
    UNPACK8(rst_v, rst);                                                                              \
    __global const float* x = xp + xo + offset_of(o, kept_rank, kdims, kst);                          \
    float a = (INIT);                                                                                 \
    for (int r = lid; r < count; r += L) {                                                            \
      float v = x[offset_of(r, red_rank, rdims, rst)];                                                \
      a = (ADD);                                                                                      \
    }                                                                                                 \
    s[lid] = a;                                                                                       \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                     \
    for (int h = L / 2; h > 0; h >>= 1) {                                                             \
      if (lid < h) {                                                                                  \
        float p = s[lid], q = s[lid + h];                                                             \
        s[lid] = (COMBINE);                                                                           \
      }                                                                                               \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                   \
    }                                                                                                 \
    if (lid == 0) {                                                                                   \
      a = s[0];                                                                                       \
      yp[yo + o] = (FIN);                                                                             \
    }                                                                                                 \
  }

// NaN wins in Max and Min, like the CPU kernels.
REDUCE(ReduceSum_f32, 0.0f, a + v, p + q, a)
REDUCE(ReduceMean_f32, 0.0f, a + v, p + q, a / count)
REDUCE(ReduceMax_f32, -INFINITY, (v > a || isnan(v)) ? v : a, (q > p || isnan(q)) ? q : p, a)
REDUCE(ReduceMin_f32, INFINITY, (v < a || isnan(v)) ? v : a, (q < p || isnan(q)) ? q : p, a)
REDUCE(ReduceProd_f32, 1.0f, a * v, p * q, a)
REDUCE(ReduceL1_f32, 0.0f, a + fabs(v), p + q, a)
REDUCE(ReduceL2_f32, 0.0f, a + v * v, p + q, sqrt(a))
REDUCE(ReduceSumSquare_f32, 0.0f, a + v * v, p + q, a)
REDUCE(ReduceLogSum_f32, 0.0f, a + v, p + q, log(a))
)CL"};

// The axes a Reduce* node reduces, as the CPU kernel reads them: input 1; none means all,
// unless noop_with_empty_axes.
std::vector<bool> reduced_axes(ClContext& ctx, size_t rank) {
  const Node& node = ctx.node;
  if (node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool") {
    std::vector<bool> mask(rank, true);
    mask[0] = mask[1] = false;
    return mask;
  }
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) axes = ctx.input_ints(1);
  bool noop = node.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> mask(rank, axes.empty() && !noop);
  for (int64_t a : axes) mask[size_t(normalize_axis(a, int64_t(rank)))] = true;
  return mask;
}

void run_reduce(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<bool> mask = reduced_axes(ctx, size_t(x.rank()));
  std::vector<int64_t> st = contiguous_strides(x.shape());
  Shape kept, red;
  std::vector<int64_t> kept_st, red_st;
  for (size_t d = 0; d < mask.size(); d++) {
    (mask[d] ? red : kept).push_back(x.shape()[d]);
    (mask[d] ? red_st : kept_st).push_back(st[d]);
  }
  ClIndexer k = collapse_dims(kept, {kept_st}), r = collapse_dims(red, {red_st});
  int64_t count = shape_numel(red);
  std::string name = ctx.node.op_type == "GlobalAveragePool" ? "ReduceMean"
                     : ctx.node.op_type == "GlobalMaxPool"   ? "ReduceMax"
                                                             : ctx.node.op_type;
  size_t group = ctx.group_size(count);
  ctx.launch(ctx.kernel(kProgram, (name + "_f32").c_str()), cl_range(size_t(y.numel()) * group, group), x, y,
             cl_int(k.rank), k.dims, k.strides[0], cl_int(r.rank), r.dims, r.strides[0], cl_int(count),
             ClLocal{group * sizeof(float)});
}

// float32 data; the axes input (any integer type) is read on the host.
bool supports_reduce(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (dtype_at(d, 0) != DType::f32) return reject_dtype(n, 0, dtype_at(d, 0), "float32", why);
  return true;
}

}  // namespace

void register_opencl_reduction(ClOpTable& t) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "GlobalAveragePool", "GlobalMaxPool"})
    t[op] = {supports_reduce, run_reduce};
}

}  // namespace vlrt

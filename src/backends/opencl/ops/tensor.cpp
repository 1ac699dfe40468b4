// OpenCL kernels of the data-movement family. Transpose, Slice, Expand, Tile, Concat and
// Split are one strided copy (source and destination strides over a collapsed shape);
// Gather has its own kernel. Elements move as bytes, so every dtype of 1, 2, 4 or 8
// bytes takes the same path.
#include <algorithm>
#include <numeric>

#include "backends/opencl/kernel.h"
#include "ops/shape_util.h"
#include "ops/tensor_semantics.h"

namespace vlrt {

namespace {

const ClProgram kProgram{"tensor", R"CL(
#define COPY(S, T)                                                                                    \
  __kernel void copy_##S(int rank, int8 dims_v, int8 ss_v, int8 ds_v, __global const T* sp, long so,  \
                         __global T* dp, long dst_o, int n) {                                         \
    int i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                               \
    UNPACK8(dims_v, dims);                                                                            \
    UNPACK8(ss_v, ss);                                                                                \
    UNPACK8(ds_v, ds);                                                                                \
    int is, id;                                                                                       \
    offsets2(i, rank, dims, ss, ds, &is, &id);                                                        \
    dp[dst_o + id] = sp[so + is];                                                                     \
  }

// Data viewed as [outer, n_axis, inner]; negative indices count from the end (checked on the host).
#define GATHER(S, T, IS, I)                                                                           \
  __kernel void gather_##S##_##IS(__global const T* sp, long so, __global const I* ip, long io,       \
                                  __global T* dp, long dst_o, int ni, int n_axis, int inner, int n) { \
    int i = get_global_id(0);                                                                         \
    if (i >= n) return;                                                                               \
    int in = i % inner, t = i / inner;                                                                \
    int j = t % ni, o = t / ni;                                                                       \
    long id = ip[io + j];                                                                             \
    if (id < 0) id += n_axis;                                                                         \
    dp[dst_o + i] = sp[so + ((long)o * n_axis + id) * inner + in];                                    \
  }

#define FILL(S, T)                                                          \
  __kernel void fill_##S(__global T* dp, long dst_o, T v, int n) {          \
    int i = get_global_id(0);                                               \
    if (i < n) dp[dst_o + i] = v;                                           \
  }
FILL(u8, uchar)

#define FOR_SIZE(S, T) \
  COPY(S, T)           \
  GATHER(S, T, i32, int) \
  GATHER(S, T, i64, long)
FOR_SIZE(u8, uchar)
FOR_SIZE(u16, ushort)
FOR_SIZE(u32, uint)
FOR_SIZE(u64, ulong)
)CL"};

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; i++) p *= s[i];
  return p;
}

// dst[dst_strides . idx] = src[src_strides . idx] for every index of `dims`.
void strided_copy(ClContext& ctx, const ClAt& src, const std::vector<int64_t>& src_strides, const ClAt& dst,
                  const std::vector<int64_t>& dst_strides, const Shape& dims) {
  int64_t n = shape_numel(dims);
  if (n == 0) return;
  ClIndexer ix = collapse_dims(dims, {src_strides, dst_strides});
  std::string name = cat("copy_", bits_suffix(src.tensor.dtype()));
  ctx.launch(ctx.kernel(kProgram, name.c_str()), cl_range(size_t(n)), cl_int(ix.rank), ix.dims, ix.strides[0],
             ix.strides[1], src, dst, cl_int(n));
}

// A copy into the contiguous output `y`.
void copy_to_output(ClContext& ctx, const ClAt& src, const std::vector<int64_t>& src_strides, Tensor& y,
                    const Shape& dims) {
  strided_copy(ctx, src, src_strides, ClAt{y, 0}, contiguous_strides(dims), dims);
}

void run_transpose(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int r = x.rank();
  std::vector<int64_t> perm(r);
  for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  perm = ctx.node.attr_ints("perm", perm);
  std::vector<int64_t> in_st = contiguous_strides(x.shape()), st(perm.size());
  for (size_t i = 0; i < perm.size(); i++) st[i] = in_st[size_t(perm[i])];
  copy_to_output(ctx, ClAt{x, 0}, st, y, y.shape());
}

void run_slice(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  int64_t r = x.rank();
  std::vector<int64_t> starts = ctx.input_ints(1), axes, steps;
  if (ctx.has_input(3)) axes = ctx.input_ints(3);
  if (ctx.has_input(4)) steps = ctx.input_ints(4);
  auto [first, step] = slice_view(x.shape(), starts, axes, steps);
  std::vector<int64_t> in_st = contiguous_strides(x.shape()), st(static_cast<size_t>(r));
  int64_t base = 0;
  for (size_t d = 0; d < size_t(r); d++) {
    base += first[d] * in_st[d];
    st[d] = y.shape()[d] > 1 ? in_st[d] * step[d] : 0;  // a huge step only ever takes one element
  }
  copy_to_output(ctx, ClAt{x, base}, st, y, y.shape());
}

void run_expand(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  copy_to_output(ctx, ClAt{x, 0}, broadcast_strides(x.shape(), y.shape()), y, y.shape());
}

void run_tile(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  TileView v = tile_view(x.shape(), y.shape());
  copy_to_output(ctx, ClAt{x, 0}, v.strides, y, v.shape);
}

void run_concat(ClContext& ctx) {
  Tensor& y = ctx.output(0);
  size_t axis = size_t(normalize_axis(ctx.node.attr_int("axis", 0), y.rank()));
  int64_t outer = prod(y.shape(), 0, axis), row = prod(y.shape(), axis, y.shape().size());
  int64_t off = 0;
  for (size_t i = 0; i < ctx.input_count(); i++) {
    const Tensor& x = ctx.input(i);
    int64_t len = prod(x.shape(), axis, x.shape().size());
    strided_copy(ctx, ClAt{x, 0}, {len, 1}, ClAt{y, off}, {row, 1}, {outer, len});
    off += len;
  }
}

void run_split(ClContext& ctx) {
  const Tensor& x = ctx.input(0);
  size_t axis = size_t(normalize_axis(ctx.node.attr_int("axis", 0), x.rank()));
  int64_t outer = prod(x.shape(), 0, axis), row = prod(x.shape(), axis, x.shape().size());
  int64_t inner = prod(x.shape(), axis + 1, x.shape().size());
  int64_t off = 0;
  // Output shapes were inferred with the split sizes; the offsets follow from them.
  for (size_t i = 0; i < ctx.node.outputs.size(); i++) {
    Tensor& y = ctx.output(i);
    int64_t len = y.shape()[axis] * inner;
    strided_copy(ctx, ClAt{x, off}, {row, 1}, ClAt{y, 0}, {len, 1}, {outer, len});
    off += len;
  }
}

void run_gather(ClContext& ctx) {
  const Tensor &x = ctx.input(0), &idx = ctx.input(1);
  Tensor& y = ctx.output(0);
  size_t axis = size_t(normalize_axis(ctx.node.attr_int("axis", 0), x.rank()));
  int64_t n = x.shape()[axis];
  // Indices are read back so that one out of range is an error, as on the CPU, not a wild read.
  for (int64_t i : ctx.input_ints(1))
    if (i < -n || i >= n)
      fail("index ", i, " is out of range for axis ", axis, " of size ", n, " (valid: ", -n, " to ", n - 1,
           ")");
  int64_t inner = prod(x.shape(), axis + 1, x.shape().size());
  std::string name = cat("gather_", bits_suffix(x.dtype()), idx.dtype() == DType::i32 ? "_i32" : "_i64");
  ctx.launch(ctx.kernel(kProgram, name.c_str()), cl_range(size_t(y.numel())), x, idx, y, cl_int(idx.numel()),
             cl_int(n), cl_int(inner), cl_int(y.numel()));
}

// Output 0 is a view of the input (made by the executor); the mask (bool) keeps everything.
void run_dropout(ClContext& ctx) {
  Tensor& mask = ctx.output(1);
  ctx.launch(ctx.kernel(kProgram, "fill_u8"), cl_range(size_t(mask.numel())), mask, cl_uchar(1),
             cl_int(mask.numel()));
}

// Any element of 1, 2, 4 or 8 bytes in input 0; other inputs are shapes or indices.
bool supports_bytes(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (!bits_suffix(dtype_at(d, 0)))
    return reject_dtype(n, 0, dtype_at(d, 0), "1, 2, 4 and 8-byte types", why);
  return true;
}

bool supports_gather(const Node& n, const std::vector<DType>& d, std::string* why) {
  DType i = dtype_at(d, 1);
  if (i != DType::i32 && i != DType::i64) return reject_dtype(n, 1, i, "int32 and int64 indices", why);
  return supports_bytes(n, d, why);
}

bool supports_dropout(const Node& n, const std::vector<DType>& d, std::string* why) {
  if (dtype_at(d, 0) != DType::f32) return reject_dtype(n, 0, dtype_at(d, 0), "float32", why);
  return true;
}

bool supports_split(const Node& n, const std::vector<DType>& d, std::string* why) {
  for (auto& o : n.outputs)
    if (o.empty()) return reject(n, "an unused output", why);
  return supports_bytes(n, d, why);
}

}  // namespace

void register_opencl_tensor(ClOpTable& t) {
  t["Transpose"] = {supports_bytes, run_transpose};
  t["Slice"] = {supports_bytes, run_slice};
  t["Expand"] = {supports_bytes, run_expand};
  t["Tile"] = {supports_bytes, run_tile};
  t["Concat"] = {supports_bytes, run_concat};
  t["Split"] = {supports_split, run_split};
  t["Gather"] = {supports_gather, run_gather};
  t["Dropout"] = {supports_dropout, run_dropout};
}

}  // namespace vlrt

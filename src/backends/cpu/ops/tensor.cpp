// CPU kernels for data movement and tensor creation. Most move elements by their byte size, so every
// dtype (bool, float16 ...) takes the same path; only ops that compare or compute values dispatch on type.
// Shapes and arguments were validated by the schema's infer; kernels validate indices read from data.
#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/row_kernels.h"
#include "core/dispatch.h"
#include "ops/shape_util.h"
#include "ops/tensor_semantics.h"

namespace vlrt {
namespace {

// Work per parallel chunk for memory-bound loops.
constexpr int64_t kChunkBytes = 64 * 1024;
// Tile edge for transposing copies: a tile of source rows stays in L1 while it is read across.
constexpr int64_t kTile = 16;

const char* bytes_of(const Tensor& t) { return static_cast<const char*>(t.raw()); }
char* bytes_of(Tensor& t) { return static_cast<char*>(t.raw()); }

// Runs fn(begin, end) on chunks of [0, n) in parallel, each moving about kChunkBytes.
template <class F>
void parallel_items_in_chunks(ThreadPool& pool, int64_t n, int64_t bytes_per_item, F&& fn) {
  pool.parallel_for(n, fn, std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(1, bytes_per_item)));
}

// Runs fn(i) for every i in [0, n) in parallel chunks that each move about kChunkBytes.
template <class F>
void parallel_items(ThreadPool& pool, int64_t n, int64_t bytes_per_item, F&& fn) {
  parallel_items_in_chunks(pool, n, bytes_per_item, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) fn(i);
  });
}

// Rows [begin, end) of a Concat whose parts are each `Bytes` wide a row: every output row is
// written whole, its parts in order, with fixed-size moves.
template <int64_t Bytes>
void interleave_rows(char* dst, const std::vector<const char*>& parts, int64_t begin, int64_t end) {
  const int64_t np = int64_t(parts.size()), row = np * Bytes;
  for (int64_t r = begin; r < end; r++)
    for (int64_t p = 0; p < np; p++)
      std::memcpy(dst + r * row + p * Bytes, parts[size_t(p)] + r * Bytes, Bytes);
}

// Calls fn(row, offset) for every index of `dims` in row-major order, where offset is the index's
// dot product with `strides`; rows run in parallel chunks of `grain` (grain >= rows: serial, in order).
template <class F>
void for_each_row(ThreadPool& pool, const Shape& dims, const std::vector<int64_t>& strides, int64_t grain,
                  F&& fn) {
  int nd = int(dims.size());
  pool.parallel_for(
      shape_numel(dims),
      [&](int64_t b, int64_t e) {
        std::vector<int64_t> idx(nd);
        int64_t off = 0, rem = b;
        for (int d = nd - 1; d >= 0; d--) {
          idx[d] = rem % dims[d];
          rem /= dims[d];
          off += idx[d] * strides[d];
        }
        for (int64_t row = b; row < e; row++) {
          fn(row, off);
          for (int d = nd - 1; d >= 0; d--) {
            off += strides[d];
            if (++idx[d] < dims[d]) break;
            off -= strides[d] * dims[d];
            idx[d] = 0;
          }
        }
      },
      grain);
}

// Copies the strided view of `src` (element strides: 0 broadcasts, negative walks backwards) into the
// contiguous `dst` of the given shape. Transpose, Slice, Expand and Tile are all such views.
void strided_copy(const char* src, char* dst, const Shape& shape, const std::vector<int64_t>& strides,
                  size_t esize, ThreadPool& pool) {
  if (shape_numel(shape) == 0) return;
  // Drop size-1 axes and merge neighbours that are contiguous in the source as well.
  Shape dims;
  std::vector<int64_t> st;
  for (size_t i = 0; i < shape.size(); i++) {
    if (shape[i] == 1) continue;
    if (!dims.empty() && st.back() == strides[i] * shape[i]) {
      dims.back() *= shape[i];
      st.back() = strides[i];
    } else {
      dims.push_back(shape[i]);
      st.push_back(strides[i]);
    }
  }
  if (dims.empty()) {
    std::memcpy(dst, src, esize);
    return;
  }
  int r = int(dims.size());
  int64_t inner = dims[r - 1], inner_stride = st[r - 1];
  Shape outer_dims(dims.begin(), dims.end() - 1);
  std::vector<int64_t> outer_st(st.begin(), st.end() - 1);
  int64_t row_bytes = inner * int64_t(esize);
  int64_t grain = std::max<int64_t>(1, kChunkBytes / row_bytes);
  if (inner_stride == 1) {
    for_each_row(pool, outer_dims, outer_st, grain, [&](int64_t row, int64_t off) {
      std::memcpy(dst + row * row_bytes, src + off * int64_t(esize), row_bytes);
    });
    return;
  }
  // The source's contiguous axis, if any: then this is a transposition, copied in tiles.
  int q = -1;
  for (int d = 0; d < r - 1; d++)
    if (st[d] == 1) q = d;
  if (q < 0 || inner_stride == 0) {
    dispatch_bytes(esize, [&]<class U>() {
      for_each_row(pool, outer_dims, outer_st, grain, [&](int64_t row, int64_t off) {
        U* d = reinterpret_cast<U*>(dst) + row * inner;
        const U* s = reinterpret_cast<const U*>(src) + off;
        if (inner_stride == 0) {
          std::fill_n(d, inner, *s);
        } else {
          for (int64_t j = 0; j < inner; j++) d[j] = s[j * inner_stride];
        }
      });
    });
    return;
  }
  std::vector<int64_t> dst_st = contiguous_strides(dims);
  int64_t nq = dims[q], q_tiles = (nq + kTile - 1) / kTile;
  const RowKernelsF32* vec = row_kernels_f32();  // 32-bit tiles eight by eight
  int64_t outer = shape_numel(dims) / (nq * inner);
  dispatch_bytes(esize, [&]<class U>() {
    parallel_items(pool, outer * q_tiles, kTile * row_bytes, [&](int64_t item) {
      int64_t rem = item / q_tiles, so = 0, dof = 0;
      for (int d = r - 2; d >= 0; d--) {
        if (d == q) continue;
        int64_t i = rem % dims[d];
        rem /= dims[d];
        so += i * st[d];
        dof += i * dst_st[d];
      }
      const U* s = reinterpret_cast<const U*>(src) + so;
      U* o = reinterpret_cast<U*>(dst) + dof;
      int64_t i0 = (item % q_tiles) * kTile, i1 = std::min(nq, i0 + kTile);
      if constexpr (sizeof(U) == 4) {
        if (vec)
          return vec->transpose_32bit(s + i0, inner_stride, o + i0 * dst_st[q], dst_st[q], i1 - i0, inner);
      }
      for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
        int64_t j1 = std::min(inner, j0 + kTile);
        for (int64_t i = i0; i < i1; i++) {
          U* orow = o + i * dst_st[q];
          for (int64_t j = j0; j < j1; j++) orow[j] = s[i + j * inner_stride];
        }
      }
    });
  });
}

// Index values read from data, checked against the axis size and made non-negative.
std::vector<int64_t> checked_indices(const Tensor& t, int64_t dim, int64_t axis) {
  std::vector<int64_t> v = t.to_int64_vector();
  for (int64_t& i : v) {
    if (i < -dim || i >= dim)
      fail("index ", i, " is out of range for axis ", axis, " of size ", dim, " (valid: ", -dim, " to ",
           dim - 1, ")");
    if (i < 0) i += dim;
  }
  return v;
}

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; i++) n *= s[i];
  return n;
}

// The bit pattern of the value 1 in dtype t.
uint64_t one_bits(DType t) {
  uint64_t bits = 0;
  if (t == DType::f16) return float_to_half(1.f);
  if (t == DType::bf16) return float_to_bf16(1.f);
  dispatch_all(t, [&]<class T>() {
    T one = T(1);
    std::memcpy(&bits, &one, sizeof(T));
  });
  return bits;
}

// Fills n elements of `esize` bytes with the element whose bytes start at `elem`.
void fill_elements(void* dst, int64_t n, size_t esize, const void* elem) {
  dispatch_bytes(esize, [&]<class U>() {
    U v;
    std::memcpy(&v, elem, sizeof(U));
    std::fill_n(static_cast<U*>(dst), n, v);
  });
}

void dropout_kernel(KernelContext& ctx) {
  // Inference: output 0 aliases the input; the mask keeps everything.
  if (!ctx.has_output(1)) return;
  Tensor& mask = ctx.output(1);
  uint64_t one = one_bits(mask.dtype());
  fill_elements(mask.raw(), mask.numel(), dtype_size(mask.dtype()), &one);
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<int64_t> perm = transpose_perm(ctx.node, size_t(x.rank()));
  std::vector<int64_t> in_st = contiguous_strides(x.shape()), st(perm.size());
  for (size_t i = 0; i < perm.size(); i++) st[i] = in_st[perm[i]];
  strided_copy(bytes_of(x), bytes_of(y), y.shape(), st, dtype_size(x.dtype()), ctx.pool);
}

void concat_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), y.rank());
  int64_t esize = int64_t(dtype_size(y.dtype()));
  int64_t outer = prod(y.shape(), 0, axis), row_bytes = prod(y.shape(), axis, y.rank()) * esize;
  struct Part {
    const char* src;
    int64_t bytes, dst_off;
  };
  std::vector<Part> parts;
  int64_t off = 0;
  for (size_t i = 0; i < ctx.input_count(); i++) {
    const Tensor& x = ctx.input(i);
    int64_t bytes = prod(x.shape(), axis, x.rank()) * esize;
    if (bytes > 0) parts.push_back({bytes_of(x), bytes, off});
    off += bytes;
  }
  if (parts.empty() || outer == 0) return;
  int64_t np = int64_t(parts.size());
  char* dst = bytes_of(y);
  // Parts of equal small width (GroundingDINO stacks its four levels' samples, 16 bytes a row,
  // 5.7 million rows): whole output rows with fixed-size moves, not a memcpy call per part and row.
  const int64_t width = parts[0].bytes;
  bool equal = true;
  std::vector<const char*> srcs;
  for (const Part& p : parts) {
    equal = equal && p.bytes == width;
    srcs.push_back(p.src);
  }
  auto interleave = [&](auto fixed) {
    parallel_items_in_chunks(ctx.pool, outer, row_bytes, [&](int64_t begin, int64_t end) {
      interleave_rows<decltype(fixed)::value>(dst, srcs, begin, end);
    });
  };
  if (equal && width == 4) return interleave(std::integral_constant<int64_t, 4>{});
  if (equal && width == 8) return interleave(std::integral_constant<int64_t, 8>{});
  if (equal && width == 16) return interleave(std::integral_constant<int64_t, 16>{});
  if (equal && width == 32) return interleave(std::integral_constant<int64_t, 32>{});
  parallel_items(ctx.pool, outer * np, row_bytes / np, [&](int64_t i) {
    const Part& p = parts[i % np];
    int64_t o = i / np;
    std::memcpy(dst + o * row_bytes + p.dst_off, p.src + o * p.bytes, p.bytes);
  });
}

// Split's part lengths, as the schema computed them.
std::vector<int64_t> split_sizes(const KernelContext& ctx, int64_t dim) {
  if (ctx.has_input(1) && ctx.input(1).numel() > 0) return ctx.input(1).to_int64_vector();
  return split_equal_sizes(dim, int64_t(ctx.output_count()));
}

void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), x.rank());
  int64_t esize = int64_t(dtype_size(x.dtype()));
  int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, x.rank()) * esize;
  int64_t row_bytes = x.shape()[axis] * inner;
  std::vector<int64_t> sizes = split_sizes(ctx, x.shape()[axis]);
  struct Part {
    char* dst;
    int64_t bytes, src_off;
  };
  std::vector<Part> parts;
  int64_t off = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    int64_t bytes = sizes[i] * inner;
    if (ctx.has_output(i) && bytes > 0) parts.push_back({bytes_of(ctx.output(i)), bytes, off});
    off += bytes;
  }
  if (parts.empty() || outer == 0) return;
  int64_t np = int64_t(parts.size());
  const char* src = bytes_of(x);
  parallel_items(ctx.pool, outer * np, row_bytes / np, [&](int64_t i) {
    const Part& p = parts[i % np];
    int64_t o = i / np;
    std::memcpy(p.dst + o * p.bytes, src + o * row_bytes + p.src_off, p.bytes);
  });
}

void slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  int64_t r = x.rank();
  std::vector<int64_t> starts = ctx.input(1).to_int64_vector(), axes, steps;
  if (ctx.has_input(3)) axes = ctx.input(3).to_int64_vector();
  if (ctx.has_input(4)) steps = ctx.input(4).to_int64_vector();
  auto [first, step] = slice_view(x.shape(), starts, axes, steps);
  std::vector<int64_t> in_st = contiguous_strides(x.shape()), st(r);
  int64_t base = 0;
  for (int64_t d = 0; d < r; d++) {
    base += first[d] * in_st[d];
    st[d] = y.shape()[d] > 1 ? in_st[d] * step[d] : 0;  // a huge step only ever takes one element
  }
  size_t esize = dtype_size(x.dtype());
  strided_copy(bytes_of(x) + base * int64_t(esize), bytes_of(y), y.shape(), st, esize, ctx.pool);
}

void expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  strided_copy(bytes_of(x), bytes_of(y), y.shape(), broadcast_strides(x.shape(), y.shape()),
               dtype_size(x.dtype()), ctx.pool);
}

void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  TileView v = tile_view(x.shape(), y.shape());
  strided_copy(bytes_of(x), bytes_of(y), v.shape, v.strides, dtype_size(x.dtype()), ctx.pool);
}

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), x.rank());
  int64_t n = x.shape()[axis];
  std::vector<int64_t> idx = checked_indices(ctx.input(1), n, axis);
  int64_t ni = int64_t(idx.size()), outer = prod(x.shape(), 0, axis);
  int64_t inner = prod(x.shape(), axis + 1, x.rank());
  size_t esize = dtype_size(x.dtype());
  if (inner == 1) {
    dispatch_bytes(esize, [&]<class U>() {
      const U* s = static_cast<const U*>(x.raw());
      U* d = static_cast<U*>(y.raw());
      parallel_items(ctx.pool, outer, ni * int64_t(esize), [&](int64_t o) {
        for (int64_t j = 0; j < ni; j++) d[o * ni + j] = s[o * n + idx[j]];
      });
    });
    return;
  }
  int64_t slice = inner * int64_t(esize);
  const char* src = bytes_of(x);
  char* dst = bytes_of(y);
  parallel_items(ctx.pool, outer * ni, slice, [&](int64_t i) {
    int64_t o = i / ni, j = i % ni;
    std::memcpy(dst + i * slice, src + (o * n + idx[j]) * slice, slice);
  });
}

// GatherElements and ScatterElements visit every element of `indices`: fn(k, data_offset) with k the
// element's flat position in indices and data_offset where it points in data.
template <class F>
void for_each_element_index(KernelContext& ctx, const Shape& data_shape, const std::vector<int64_t>& idx,
                            const Shape& idx_shape, int64_t axis, bool serial, F&& fn) {
  int r = int(data_shape.size());
  int64_t last = idx_shape[r - 1];
  if (shape_numel(idx_shape) == 0) return;
  std::vector<int64_t> ds = contiguous_strides(data_shape);
  Shape rows(idx_shape.begin(), idx_shape.end() - 1);
  std::vector<int64_t> row_st(ds.begin(), ds.end() - 1);
  if (axis < r - 1) row_st[axis] = 0;  // the index replaces the coordinate on the axis
  int64_t axis_st = ds[axis], col_st = axis == r - 1 ? 0 : 1;
  int64_t nrows = shape_numel(rows);
  int64_t grain = serial ? nrows : std::max<int64_t>(1, kChunkBytes / (last * 8));
  for_each_row(ctx.pool, rows, row_st, grain, [&](int64_t row, int64_t off) {
    for (int64_t j = 0; j < last; j++) {
      int64_t k = row * last + j;
      fn(k, off + j * col_st + idx[k] * axis_st);
    }
  });
}

// Indices of GatherElements/ScatterElements, each checked against the data's axis size.
std::vector<int64_t> element_indices(KernelContext& ctx, int64_t* axis) {
  const Tensor& data = ctx.input(0);
  *axis = normalize_axis(ctx.node.attr_int("axis", 0), data.rank());
  return checked_indices(ctx.input(1), data.shape()[*axis], *axis);
}

void gather_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t axis;
  std::vector<int64_t> idx = element_indices(ctx, &axis);
  dispatch_bytes(dtype_size(x.dtype()), [&]<class U>() {
    const U* s = static_cast<const U*>(x.raw());
    U* d = static_cast<U*>(y.raw());
    for_each_element_index(ctx, x.shape(), idx, ctx.input(1).shape(), axis, false,
                           [&](int64_t k, int64_t off) { d[k] = s[off]; });
  });
}

void gather_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  Tensor& y = ctx.output(0);
  const Shape& ds = x.shape();
  int64_t b = ctx.node.attr_int("batch_dims", 0), k = it.shape().back();
  int64_t items = it.numel() / std::max<int64_t>(k, 1);
  int64_t per_batch = items / std::max<int64_t>(prod(it.shape(), 0, b), 1);
  int64_t batch_stride = prod(ds, b, ds.size());
  std::vector<int64_t> st = contiguous_strides(ds);
  std::vector<int64_t> idx = it.to_int64_vector();
  // Element offsets of every gathered slice, checked before the parallel copy.
  std::vector<int64_t> offsets(items);
  for (int64_t i = 0; i < items; i++) {
    int64_t off = (i / std::max<int64_t>(per_batch, 1)) * batch_stride;
    for (int64_t j = 0; j < k; j++) {
      int64_t v = idx[i * k + j], dim = ds[b + j];
      if (v < -dim || v >= dim)
        fail("index ", v, " is out of range for data axis ", b + j, " of size ", dim, " (valid: ", -dim,
             " to ", dim - 1, ")");
      off += (v < 0 ? v + dim : v) * st[b + j];
    }
    offsets[i] = off;
  }
  int64_t slice = prod(ds, b + k, ds.size()) * int64_t(dtype_size(x.dtype()));
  int64_t esize = int64_t(dtype_size(x.dtype()));
  const char* src = bytes_of(x);
  char* dst = bytes_of(y);
  parallel_items(ctx.pool, items, slice,
                 [&](int64_t i) { std::memcpy(dst + i * slice, src + offsets[i] * esize, slice); });
}

enum class Reduction { none, add, mul, max, min };

Reduction reduction_of(const Node& node) {
  std::string r = node.attr_string("reduction", "none");
  if (r == "add") return Reduction::add;
  if (r == "mul") return Reduction::mul;
  if (r == "max") return Reduction::max;
  if (r == "min") return Reduction::min;
  return Reduction::none;
}

// a combined with b; bool adds as "or" and multiplies as "and".
template <class T>
T combine(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::add:
      return T(a + b);
    case Reduction::mul:
      return T(a * b);
    case Reduction::max:
      return std::max(a, b);
    case Reduction::min:
      return std::min(a, b);
    case Reduction::none:
      break;
  }
  return b;
}
template <>
half_t combine(half_t a, half_t b, Reduction r) {
  return {float_to_half(combine(half_to_float(a.bits), half_to_float(b.bits), r))};
}
template <>
bf16_t combine(bf16_t a, bf16_t b, Reduction r) {
  return {float_to_bf16(combine(bf16_to_float(a.bits), bf16_to_float(b.bits), r))};
}

// dispatch_all plus the two 16-bit float types, for scatters that combine values.
template <class F>
void dispatch_combinable(DType t, F&& f) {
  if (t == DType::f16) return f.template operator()<half_t>();
  if (t == DType::bf16) return f.template operator()<bf16_t>();
  dispatch_all(t, std::forward<F>(f));
}

void scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  Tensor& y = ctx.output(0);
  const Shape& ds = x.shape();
  int64_t k = it.shape().back(), items = it.numel() / k;
  std::vector<int64_t> st = contiguous_strides(ds), idx = it.to_int64_vector();
  int64_t slice = prod(ds, k, ds.size());
  std::vector<int64_t> offsets(items);
  for (int64_t i = 0; i < items; i++) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; j++) {
      int64_t v = idx[i * k + j], dim = ds[j];
      if (v < -dim || v >= dim)
        fail("index ", v, " is out of range for data axis ", j, " of size ", dim, " (valid: ", -dim, " to ",
             dim - 1, ")");
      off += (v < 0 ? v + dim : v) * st[j];
    }
    offsets[i] = off;
  }
  std::memcpy(y.raw(), x.raw(), x.nbytes());
  Reduction red = reduction_of(ctx.node);
  if (red == Reduction::none) {
    int64_t bytes = slice * int64_t(dtype_size(x.dtype()));
    for (int64_t i = 0; i < items; i++)
      std::memcpy(bytes_of(y) + offsets[i] * int64_t(dtype_size(x.dtype())), bytes_of(upd) + i * bytes,
                  bytes);
    return;
  }
  dispatch_combinable(x.dtype(), [&]<class T>() {
    T* d = static_cast<T*>(y.raw());
    const T* u = static_cast<const T*>(upd.raw());
    for (int64_t i = 0; i < items; i++)
      for (int64_t e = 0; e < slice; e++)
        d[offsets[i] + e] = combine(d[offsets[i] + e], u[i * slice + e], red);
  });
}

void scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& upd = ctx.input(2);
  Tensor& y = ctx.output(0);
  int64_t axis;
  std::vector<int64_t> idx = element_indices(ctx, &axis);
  std::memcpy(y.raw(), x.raw(), x.nbytes());
  Reduction red = reduction_of(ctx.node);
  // Serial, so that repeated indices apply in order.
  dispatch_combinable(x.dtype(), [&]<class T>() {
    T* d = static_cast<T*>(y.raw());
    const T* u = static_cast<const T*>(upd.raw());
    for_each_element_index(ctx, x.shape(), idx, upd.shape(), axis, true,
                           [&](int64_t k, int64_t off) { d[off] = combine(d[off], u[k], red); });
  });
}

void shape_kernel(KernelContext& ctx) {
  const Shape& in = ctx.input(0).shape();
  int64_t start = shape_axes_range(ctx.node, int64_t(in.size())).first;
  Tensor& y = ctx.output(0);
  std::copy_n(in.begin() + start, y.numel(), y.data<int64_t>());
}

void size_kernel(KernelContext& ctx) { ctx.output(0).data<int64_t>()[0] = ctx.input(0).numel(); }

void constant_of_shape_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  const Tensor* v = ctx.node.attr_tensor("value");
  float zero = 0;
  fill_elements(y.raw(), y.numel(), dtype_size(y.dtype()), v ? v->raw() : &zero);
}

void constant_kernel(KernelContext& ctx) {
  Tensor v = constant_value(ctx.node);
  std::memcpy(ctx.output(0).raw(), v.raw(), v.nbytes());
}

void range_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  dispatch_numeric(y.dtype(), [&]<class T>() {
    T start = ctx.input(0).data<T>()[0], delta = ctx.input(2).data<T>()[0];
    T* d = y.data<T>();
    for (int64_t i = 0; i < y.numel(); i++) {
      if constexpr (std::is_floating_point_v<T>)
        d[i] = start + T(i) * delta;
      else
        d[i] = T(int64_t(start) + i * int64_t(delta));
    }
  });
}

void non_zero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t nnz = y.shape()[1], r = x.rank();
  int64_t* out = y.data<int64_t>();
  dispatch_all(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    std::vector<int64_t> idx(r, 0);
    int64_t c = 0;
    for (int64_t i = 0; i < x.numel(); i++) {
      if (p[i] != T(0)) {
        if (r == 0) out[c] = 0;
        for (int64_t d = 0; d < r; d++) out[d * nnz + c] = idx[d];
        c++;
      }
      for (int64_t d = r - 1; d >= 0; d--) {
        if (++idx[d] < x.shape()[d]) break;
        idx[d] = 0;
      }
    }
  });
}

void trilu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
  int64_t k = ctx.has_input(1) ? ctx.input(1).to_int64_vector()[0] : 0;
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);  // same result, and i + k cannot overflow
  bool upper = ctx.node.attr_int("upper", 1) != 0;
  int64_t esize = int64_t(dtype_size(x.dtype())), row_bytes = cols * esize;
  const char* src = bytes_of(x);
  char* dst = bytes_of(y);
  parallel_items(ctx.pool, x.numel() / std::max<int64_t>(cols, 1), row_bytes, [&](int64_t row) {
    int64_t i = row % rows;
    // Upper keeps columns j >= i + k, lower keeps j <= i + k.
    int64_t split = std::clamp<int64_t>(upper ? i + k : i + k + 1, 0, cols) * esize;
    const char* s = src + row * row_bytes;
    char* d = dst + row * row_bytes;
    if (upper) {
      std::memset(d, 0, split);
      std::memcpy(d + split, s + split, row_bytes - split);
    } else {
      std::memcpy(d, s, split);
      std::memset(d + split, 0, row_bytes - split);
    }
  });
}

void eye_like_kernel(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  int64_t rows = y.shape()[0], cols = y.shape()[1], k = ctx.node.attr_int("k", 0);
  size_t esize = dtype_size(y.dtype());
  std::memset(y.raw(), 0, y.nbytes());
  uint64_t one = one_bits(y.dtype());
  for (int64_t i = 0; i < rows; i++) {
    if (k >= cols - i || k < -i) continue;  // column i + k is outside [0, cols)
    std::memcpy(bytes_of(y) + (i * cols + i + k) * int64_t(esize), &one, esize);
  }
}

void one_hot_kernel(KernelContext& ctx) {
  const Tensor& it = ctx.input(0);
  const Tensor& values = ctx.input(2);
  Tensor& y = ctx.output(0);
  int64_t r = it.rank(), axis = ctx.node.attr_int("axis", -1);
  if (axis < 0) axis += r + 1;
  int64_t depth = y.shape()[axis], inner = prod(it.shape(), axis, r);
  size_t esize = dtype_size(y.dtype());
  fill_elements(y.raw(), y.numel(), esize, values.raw());
  const char* on = bytes_of(values) + esize;
  char* dst = bytes_of(y);
  dispatch_numeric(it.dtype(), [&]<class T>() {
    const T* p = it.data<T>();
    for (int64_t i = 0; i < it.numel(); i++) {
      // Indices outside [-depth, depth) select nothing: their row stays all off_value.
      double v = double(p[i]);
      if (!(v >= -double(depth) && v < double(depth))) continue;
      int64_t c = int64_t(v);
      if (c < 0) c += depth;
      std::memcpy(dst + ((i / inner * depth + c) * inner + i % inner) * int64_t(esize), on, esize);
    }
  });
}

void compress_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  Tensor& y = ctx.output(0);
  int64_t esize = int64_t(dtype_size(x.dtype()));
  int64_t outer = 1, n = x.numel(), inner = esize;
  if (ctx.node.has_attr("axis")) {
    int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), x.rank());
    outer = prod(x.shape(), 0, axis);
    n = x.shape()[axis];
    inner = prod(x.shape(), axis + 1, x.rank()) * esize;
  }
  std::vector<int64_t> kept;
  const bool* c = cond.data<bool>();
  for (int64_t j = 0; j < std::min(n, cond.numel()); j++)
    if (c[j]) kept.push_back(j);
  int64_t nk = int64_t(kept.size());
  const char* src = bytes_of(x);
  char* dst = bytes_of(y);
  parallel_items(ctx.pool, outer * nk, inner, [&](int64_t i) {
    int64_t o = i / nk;
    std::memcpy(dst + i * inner, src + (o * n + kept[i % nk]) * inner, inner);
  });
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  bool time_first = ctx.node.attr_int("time_axis", 0) == 0;
  int64_t steps = x.shape()[time_first ? 0 : 1], batch = x.shape()[time_first ? 1 : 0];
  std::vector<int64_t> lens = ctx.input(1).to_int64_vector();
  for (int64_t b = 0; b < batch; b++)
    if (lens[b] < 0 || lens[b] > steps)
      fail("sequence_lens[", b, "] is ", lens[b], ", outside [0, ", steps, "] (the time dimension)");
  int64_t inner = prod(x.shape(), 2, x.rank()) * int64_t(dtype_size(x.dtype()));
  auto offset = [&](int64_t t, int64_t b) { return (time_first ? t * batch + b : b * steps + t) * inner; };
  const char* src = bytes_of(x);
  char* dst = bytes_of(y);
  parallel_items(ctx.pool, steps * batch, inner, [&](int64_t i) {
    int64_t t = i / batch, b = i % batch;
    int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
    std::memcpy(dst + offset(t, b), src + offset(from, b), inner);
  });
}

// Unique over the slices along the middle axis of x viewed as [outer, n, inner].
template <class T>
void unique_typed(KernelContext& ctx, int64_t outer, int64_t n, int64_t inner) {
  const T* p = ctx.input(0).data<T>();
  UniqueGroups g = unique_groups(p, outer, n, inner, ctx.node.attr_int("sorted", 1) != 0);
  int64_t u = int64_t(g.first.size());
  T* y = ctx.output(0).data<T>();
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < u; k++)
      std::copy_n(p + (o * n + g.first[k]) * inner, inner, y + (o * u + k) * inner);
  if (ctx.has_output(1)) std::copy(g.first.begin(), g.first.end(), ctx.output(1).data<int64_t>());
  if (ctx.has_output(2)) std::copy(g.group.begin(), g.group.end(), ctx.output(2).data<int64_t>());
  if (ctx.has_output(3)) std::copy(g.counts.begin(), g.counts.end(), ctx.output(3).data<int64_t>());
}

void unique_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (ctx.node.has_attr("axis")) {
    int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), x.rank());
    outer = prod(x.shape(), 0, axis);
    n = x.shape()[axis];
    inner = prod(x.shape(), axis + 1, x.rank());
  }
  dispatch_all(x.dtype(), [&]<class T>() { unique_typed<T>(ctx, outer, n, inner); });
}

}  // namespace

void register_tensor_kernels(CpuKernelTable& t) {
  // Reshape, Flatten, Squeeze, Unsqueeze and Identity are views: the executor aliases their input.
  t["Dropout"] = {dropout_kernel, true};
  t["Transpose"] = {transpose_kernel, true};
  t["Concat"] = {concat_kernel, true};
  t["Split"] = {split_kernel, true};
  t["Slice"] = {slice_kernel, true};
  t["Gather"] = {gather_kernel, true};
  t["GatherElements"] = {gather_elements_kernel, true};
  t["GatherND"] = {gather_nd_kernel, true};
  t["ScatterND"] = {scatter_nd_kernel, true};
  t["ScatterElements"] = {scatter_elements_kernel, true};
  t["Scatter"] = {scatter_elements_kernel, true};
  t["Expand"] = {expand_kernel, true};
  t["Tile"] = {tile_kernel, true};
  t["Shape"] = {shape_kernel, true};
  t["Size"] = {size_kernel, true};
  t["ConstantOfShape"] = {constant_of_shape_kernel, true};
  t["Constant"] = {constant_kernel, true};
  t["Trilu"] = {trilu_kernel, true};
  t["EyeLike"] = {eye_like_kernel, true};
  t["Compress"] = {compress_kernel, true};
  t["ReverseSequence"] = {reverse_sequence_kernel, true};
  // These compare or compute values: float16/bfloat16 go through float32 (exactly, for these ops).
  t["Range"] = {range_kernel};
  t["NonZero"] = {non_zero_kernel};
  t["OneHot"] = {one_hot_kernel};
  t["Unique"] = {unique_kernel};
}

}  // namespace vlrt

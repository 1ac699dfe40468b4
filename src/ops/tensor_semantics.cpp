#include "ops/tensor_semantics.h"

#include <algorithm>

#include "core/error.h"
#include "ops/shape_util.h"

namespace vlrt {

Tensor constant_value(const Node& node) {
  int given = 0;
  for (const char* a : {"value", "value_float", "value_floats", "value_int", "value_ints", "sparse_value",
                        "value_string", "value_strings"})
    given += node.has_attr(a);
  VLRT_CHECK(given == 1, "exactly one value attribute must be set, got ", given);
  if (const Tensor* t = node.attr_tensor("value")) return *t;
  if (node.has_attr("value_float")) return Tensor::scalar<float>(node.attr_float("value_float", 0));
  if (node.has_attr("value_int")) return Tensor::scalar<int64_t>(node.attr_int("value_int", 0));
  if (node.has_attr("value_floats")) {
    auto v = node.attr_floats("value_floats");
    return Tensor::from_vector<float>(v, {int64_t(v.size())});
  }
  if (node.has_attr("value_ints")) {
    auto v = node.attr_ints("value_ints");
    return Tensor::from_vector<int64_t>(v, {int64_t(v.size())});
  }
  unsupported("Constant with a sparse or string value");
}

std::vector<int64_t> transpose_perm(const Node& node, size_t rank) {
  std::vector<int64_t> perm(rank);
  for (size_t i = 0; i < rank; i++) perm[i] = int64_t(rank - 1 - i);
  return node.attr_ints("perm", perm);
}

std::vector<int64_t> split_equal_sizes(int64_t dim, int64_t parts) {
  int64_t chunk = dim % parts == 0 ? dim / parts : dim / parts + 1;
  std::vector<int64_t> sizes(size_t(parts), chunk);
  sizes.back() = dim - chunk * (parts - 1);
  return sizes;
}

std::pair<int64_t, int64_t> shape_axes_range(const Node& node, int64_t rank) {
  int64_t start = node.attr_int("start", 0), end = node.attr_int("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  return {start, end};
}

TileView tile_view(const Shape& x, const Shape& y) {
  std::vector<int64_t> in_st = contiguous_strides(x);
  TileView v;
  for (size_t i = 0; i < x.size(); i++) {
    v.shape.insert(v.shape.end(), {y[i] / std::max<int64_t>(x[i], 1), x[i]});
    v.strides.insert(v.strides.end(), {0, in_st[i]});
  }
  return v;
}

SliceView slice_view(const Shape& in, const std::vector<int64_t>& starts, std::vector<int64_t> axes,
                     std::vector<int64_t> steps) {
  int64_t r = int64_t(in.size());
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  SliceView v{std::vector<int64_t>(size_t(r), 0), std::vector<int64_t>(size_t(r), 1)};
  for (size_t i = 0; i < starts.size(); i++) {
    size_t a = size_t(axes[i] < 0 ? axes[i] + r : axes[i]);
    int64_t dim = in[a];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    v.first[a] = std::clamp<int64_t>(s, 0, steps[i] > 0 ? dim : dim - 1);
    v.step[a] = steps[i];
  }
  return v;
}

}  // namespace vlrt

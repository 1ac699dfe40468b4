// Semantics of the tensor family that shape inference and every backend share: the tensor a
// Constant holds, Transpose's default permutation, Split's equal parts, Shape's slice of axes
// and how Unique groups slices.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace vlrt {

// The tensor a Constant node holds; fails unless exactly one value attribute is set.
Tensor constant_value(const Node& node);

// Transpose's `perm`, by default the axes reversed.
std::vector<int64_t> transpose_perm(const Node& node, size_t rank);

// Split without `split`: equal parts, the last one smaller when the axis does not divide
// evenly (negative when `dim` is too small for `parts`; the schema rejects that).
std::vector<int64_t> split_equal_sizes(int64_t dim, int64_t parts);

// The input axes Shape returns, as [start, end) clamped to [0, rank]; end < start means none.
std::pair<int64_t, int64_t> shape_axes_range(const Node& node, int64_t rank);

// A non-empty Slice output as a strided view of its input: the first element and the step
// along every axis. `axes` empty means 0..n-1, `steps` empty means all 1 (the schema has
// validated them).
struct SliceView {
  std::vector<int64_t> first, step;
};
SliceView slice_view(const Shape& in, const std::vector<int64_t>& starts, std::vector<int64_t> axes,
                     std::vector<int64_t> steps);

// Tile's output y viewed as [r0, d0, r1, d1, ...] (r: repeats, d: x's dims) reading its
// input x with stride 0 on every repeat axis: that view's shape and element strides.
struct TileView {
  Shape shape;
  std::vector<int64_t> strides;
};
TileView tile_view(const Shape& x, const Shape& y);

// Unique over data viewed as [outer, n, inner], where slice j is data[:, j, :]. Slices
// compare element by element, NaN after every number and equal to NaN.
struct UniqueGroups {
  std::vector<int64_t> first;   // per group: its first slice
  std::vector<int64_t> counts;  // per group: its number of slices
  std::vector<int64_t> group;   // per slice: its group
};

// The groups of equal slices, in sorted order or, when not `sorted`, in order of first occurrence.
template <class T>
UniqueGroups unique_groups(const T* p, int64_t outer, int64_t n, int64_t inner, bool sorted) {
  auto less = [](T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return false;  // NaN sorts last and equals NaN
      if (std::isnan(b)) return true;
    }
    return a < b;
  };
  auto compare = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        T x = p[(o * n + a) * inner + i], y = p[(o * n + b) * inner + i];
        if (less(x, y)) return -1;
        if (less(y, x)) return 1;
      }
    return 0;
  };
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Stable: the first slice of each group of equals is its first occurrence.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
  UniqueGroups g;
  g.group.resize(n);
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || compare(order[i - 1], order[i]) != 0) {
      g.first.push_back(order[i]);
      g.counts.push_back(0);
    }
    g.group[order[i]] = int64_t(g.first.size()) - 1;
    g.counts.back()++;
  }
  if (sorted) return g;
  int64_t u = int64_t(g.first.size());
  std::vector<int64_t> by_first(u), rank(u);
  std::iota(by_first.begin(), by_first.end(), 0);
  std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return g.first[a] < g.first[b]; });
  std::vector<int64_t> f2(u), c2(u);
  for (int64_t k = 0; k < u; k++) {
    rank[by_first[k]] = k;
    f2[k] = g.first[by_first[k]];
    c2[k] = g.counts[by_first[k]];
  }
  g.first = f2;
  g.counts = c2;
  for (int64_t& k : g.group) k = rank[k];
  return g;
}

}  // namespace vlrt

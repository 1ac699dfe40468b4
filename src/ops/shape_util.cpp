#include "ops/shape_util.h"

#include <algorithm>

namespace vlrt {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; i++) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      fail("shapes ", shape_str(a), " and ", shape_str(b), " cannot be broadcast (axis ", i, ": ", da,
           " vs ", db, ")");
    }
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  VLRT_CHECK(axis >= -rank && axis < std::max<int64_t>(rank, 1), "axis ", axis,
             " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> cs = contiguous_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); i++) st[off + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

}  // namespace vlrt

#include "ops/sequence_semantics.h"

namespace vlrt {

size_t sequence_position(const Tensor& position, size_t length, bool insertion) {
  if (position.numel() != 1) fail("the position has ", position.numel(), " values, expected one");
  int64_t p = position.to_int64_vector()[0];
  int64_t n = int64_t(length);
  int64_t last = insertion ? n : n - 1;
  if (p < -n || p > last)
    fail("position ", p, " is out of range for a sequence of ", length, " tensors (valid: ", -n, " to ", last, ")");
  return size_t(p < 0 ? p + n : p);
}

Shape concat_from_sequence_shape(const Tensor& sequence, int64_t axis, bool new_axis) {
  const std::vector<Tensor>& items = sequence.elements();
  if (items.empty()) fail("the sequence is empty; there is nothing to concatenate");
  const Shape& first = items[0].shape();
  int64_t rank = int64_t(first.size()) + (new_axis ? 1 : 0);
  if (axis < -rank || axis >= rank) fail("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  Shape out = first;
  if (new_axis) out.insert(out.begin() + axis, 0);
  for (size_t i = 0; i < items.size(); i++) {
    const Shape& s = items[i].shape();
    bool same = s.size() == first.size();
    for (size_t d = 0; same && d < s.size(); d++) same = s[d] == first[d] || (!new_axis && int64_t(d) == axis);
    if (!same)
      fail("tensor ", i, " of the sequence is ", items[i].describe(), " but tensor 0 is ", items[0].describe(),
           new_axis ? "; stacking needs equal shapes" : cat("; they may differ only along axis ", axis));
    out[size_t(axis)] += new_axis ? 1 : (i == 0 ? 0 : s[size_t(axis)]);
  }
  return out;
}

}  // namespace vlrt

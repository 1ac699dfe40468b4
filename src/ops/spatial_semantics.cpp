#include "ops/spatial_semantics.h"

#include "ops/shape_util.h"

namespace vlrt {

std::vector<int64_t> pad_begins(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes,
                                int64_t rank) {
  std::vector<int64_t> begins(size_t(rank), 0);
  if (axes.empty() && pads.size() == 2 * size_t(rank)) {
    for (int64_t a = 0; a < rank; a++) begins[size_t(a)] = pads[size_t(a)];
  } else if (!axes.empty()) {
    for (size_t i = 0; i < axes.size(); i++) begins[size_t(normalize_axis(axes[i], rank))] = pads[i];
  }
  return begins;
}

}  // namespace vlrt

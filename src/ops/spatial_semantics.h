// Semantics of the spatial family that every backend shares.
#pragma once

#include <cstdint>
#include <vector>

namespace vlrt {

// Pad's padding before every axis of a rank-`rank` input, from its pads (begins, then ends,
// of the padded axes) and its axes input (negative axes count from the end; none given:
// every axis in order). The schema has validated both.
std::vector<int64_t> pad_begins(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes,
                                int64_t rank);

}  // namespace vlrt

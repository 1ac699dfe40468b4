// Facts of the sequence ops that shape inference and the kernels share.
#pragma once

#include "core/tensor.h"

namespace vlrt {

// The index a position tensor (one int32/int64 value; negative counts from the end) names
// in a sequence of `length`: -length..length-1, or -length..length where `insertion`.
// Fails naming the position and the length.
size_t sequence_position(const Tensor& position, size_t length, bool insertion);

// The shape ConcatFromSequence makes of a sequence: its tensors joined along `axis`, or
// stacked along a new axis `axis` when `new_axis`. Fails when the sequence is empty or its
// tensors differ in rank or in a dimension other than `axis`.
Shape concat_from_sequence_shape(const Tensor& sequence, int64_t axis, bool new_axis);

}  // namespace vlrt

// The precision a run's values are held in. fp32 is every kernel as written; fp16 and bf16 round
// every float32 weight and every float32 value a node makes to that type (round to nearest even)
// while the arithmetic inside each kernel stays float32: the numbers half-precision storage with
// float32 accumulation gives, on any CPU (`vlrt check --precision fp32,bf16`).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace vlrt {

enum class Precision { fp32, fp16, bf16 };

const char* precision_name(Precision p);
std::optional<Precision> parse_precision(const std::string& name);

// Rounds n floats in place to the precision (fp32: nothing). Values beyond float16's range
// become infinities, as a float16 tensor would hold them.
void round_to_precision(float* values, size_t n, Precision p);

}  // namespace vlrt

#include "core/precision.h"

#include "core/dtype.h"

namespace vlrt {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
    default:
      return "fp32";
  }
}

std::optional<Precision> parse_precision(const std::string& name) {
  for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16})
    if (name == precision_name(p)) return p;
  return std::nullopt;
}

void round_to_precision(float* values, size_t n, Precision p) {
  if (p == Precision::fp16) {
    for (size_t i = 0; i < n; i++) values[i] = half_to_float(float_to_half(values[i]));
  } else if (p == Precision::bf16) {
    for (size_t i = 0; i < n; i++) values[i] = bf16_to_float(float_to_bf16(values[i]));
  }
}

}  // namespace vlrt

// NumPy .npy files (format versions 1-3, little-endian, C order).
#pragma once

#include <string>
#include <string_view>

#include "core/tensor.h"

namespace vlrt {

Tensor read_npy(const std::string& path);
// The bytes of a .npy file; `what` (its path) names it in errors.
Tensor parse_npy(std::string_view bytes, const std::string& what);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace vlrt

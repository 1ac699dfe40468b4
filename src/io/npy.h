// NumPy .npy files (format versions 1-3, little-endian, C order).
#pragma once

#include <string>

#include "core/tensor.h"

namespace vlrt {

Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace vlrt

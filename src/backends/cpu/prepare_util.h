// What the CPU backend's prepared kernels (oneDNN's, the Winograd convolution, the packed
// product) ask of a node's inputs when they decide whether to take it.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace vlrt {

inline const ValueInfo* input_info(const std::vector<const ValueInfo*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}
inline bool is_f32(const ValueInfo* v) { return v && v->dtype == DType::f32 && v->shape_known; }
inline bool is_f32_constant(const ValueInfo* v) { return is_f32(v) && v->value && v->value->defined(); }

// A per-thread buffer (a thread_local vector) grown to at least `floats`; its data.
inline float* grown(std::vector<float>& buffer, size_t floats) {
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// False when the environment variable `name` is "0": a kernel family turned off for measurements.
inline bool enabled_by_env(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string(v) == "0");
}

}  // namespace vlrt

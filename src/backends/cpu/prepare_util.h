// What the CPU backend's prepared kernels (oneDNN's, the Winograd, direct and depthwise
// convolutions, the packed product) ask of a node's inputs when they decide whether to take
// it, and the helpers they share.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ops/contrib_semantics.h"

namespace vlrt {

inline const ValueInfo* input_info(const std::vector<const ValueInfo*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}
inline bool is_f32(const ValueInfo* v) { return v && v->dtype == DType::f32 && v->shape_known; }
inline bool is_f32_constant(const ValueInfo* v) { return is_f32(v) && v->value && v->value->defined(); }
// A float16 or bfloat16 constant: a weight stored in half precision (passes/half_weights.h).
inline bool is_half_constant(const ValueInfo* v) {
  return v && dtype_is_half(v->dtype) && v->shape_known && v->value && v->value->defined();
}

// Floats on 64-byte boundaries, as the tensors lie: the kernels' packed weights and scratch,
// whose 32-byte vector loads would otherwise straddle cache lines.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = ::operator new(n * sizeof(T), std::align_val_t(64));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  bool operator==(const CacheLineAllocator&) const { return true; }
};
using AlignedFloats = std::vector<float, CacheLineAllocator<float>>;

// A per-thread buffer (a thread_local vector) grown to at least `floats`; its data.
inline float* grown(AlignedFloats& buffer, size_t floats) {
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// The bias's `channels` values followed by zeros up to `width` (all zeros without a bias): what
// the own kernels' epilogues load, 8 channels at a time, padding channels included.
inline std::vector<float> padded_bias(const Tensor* bias, int64_t channels, int64_t width) {
  std::vector<float> padded(size_t(width), 0.f);
  if (bias) std::copy_n(bias->data<float>(), channels, padded.begin());
  return padded;
}

// False when the environment variable `name` is "0": a kernel family turned off for measurements.
inline bool enabled_by_env(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string(v) == "0");
}

// The activations the own convolution kernels' AVX2 epilogue computes (epilogue_avx2.h); a
// node with another one is left to oneDNN.
inline bool avx2_epilogue_takes(const FusedActivation& a) {
  using A = FusedActivation;
  switch (a.kind) {
    case A::none: case A::relu: case A::clip: case A::leaky_relu: case A::sigmoid: case A::silu:
    case A::hard_sigmoid:
    case A::hard_swish:
    case A::quantize_dequantize:
      return true;
    default:
      return false;
  }
}

}  // namespace vlrt

// Vector types and helpers for the CPU kernels' float32 row loops (GCC vector extensions:
// the compiler picks the instructions for VLRT_ARCH; unaligned loads go through memcpy).
#pragma once

#include <cstdint>
#include <cstring>

#define ALWAYS_INLINE inline __attribute__((always_inline))
// The helpers are always inlined, so the ABI note GCC gives for 32-byte vectors when
// VLRT_ARCH lacks AVX does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace vlrt::simd {

typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));

template <class V>
ALWAYS_INLINE V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
ALWAYS_INLINE void store(void* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
ALWAYS_INLINE v4d widen(v4f v) { return __builtin_convertvector(v, v4d); }
ALWAYS_INLINE double hsum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }
ALWAYS_INLINE v8f splat(float f) { return v8f{} + f; }

}  // namespace vlrt::simd

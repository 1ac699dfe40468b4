// float32 math on 4-lane vectors (GCC/Clang vector extensions, plain SSE2 on x86), for
// the transcendental ops transformers run on large tensors and the fused kernels' epilogues.
// libm is 3-10x slower there. Errors against libm: exp, sigmoid, tanh about 1e-7 relative; erf 5e-7.
#pragma once

#include <cstdint>

namespace vlrt {

typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef uint32_t u32x4 __attribute__((vector_size(16)));

constexpr f32x4 splat(float v) { return f32x4{v, v, v, v}; }
// Lanes of mask are all ones or all zeros, as vector comparisons produce them.
inline f32x4 select(i32x4 mask, f32x4 a, f32x4 b) { return (f32x4)((mask & (i32x4)a) | (~mask & (i32x4)b)); }
// Comparisons are false for NaN, so NaN passes through.
inline f32x4 clamp(f32x4 x, float lo, float hi) {
  x = select(x < splat(lo), splat(lo), x);
  return select(x > splat(hi), splat(hi), x);
}

// contrib_semantics.h's quantize_dequantize: clamp(RoundHalfToEven(x / scale), low, high) * scale
// with NaN to low. low and high are integers of at most 16 bits, so clamping first rounds the same;
// adding and taking away 1.5 * 2^23 rounds half to even (and -0 to 0) in the default rounding mode.
inline f32x4 quantize_dequantize_f32x4(f32x4 x, float scale, float low, float high) {
  f32x4 v = x / splat(scale);
  v = select(v >= splat(low), v, splat(low));  // NaN fails the comparison: low
  v = select(v > splat(high), splat(high), v);
  const f32x4 magic = splat(12582912.f);
  return ((v + magic) - magic) * splat(scale);
}

// Cephes' expf polynomial; 2^n is applied in two halves so that results near the
// overflow and denormal limits still come out right.
inline f32x4 exp_f32x4(f32x4 x) {
  x = clamp(x, -104.f, 89.f);
  const f32x4 magic = splat(12582912.f);  // 1.5 * 2^23: adding it rounds to an integer
  f32x4 n = (x * splat(1.44269504f) + magic) - magic;
  f32x4 r = x - n * splat(0.693359375f);
  r = r - n * splat(-2.12194440e-4f);
  f32x4 p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  f32x4 y = p * (r * r) + r + splat(1.f);
  i32x4 e = __builtin_convertvector(n, i32x4);
  i32x4 e1 = e >> 1, e2 = e - e1;
  f32x4 s1 = (f32x4)((u32x4)(e1 + 127) << 23), s2 = (f32x4)((u32x4)(e2 + 127) << 23);
  return y * s1 * s2;
}

inline f32x4 sigmoid_f32x4(f32x4 x) { return splat(1.f) / (splat(1.f) + exp_f32x4(-x)); }

// Cephes' tanhf: an odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above.
inline f32x4 tanh_f32x4(f32x4 x) {
  const i32x4 sign = (i32x4)x & int32_t(0x80000000);
  f32x4 ax = (f32x4)((i32x4)x & 0x7fffffff);
  f32x4 big = splat(1.f) - splat(2.f) / (exp_f32x4(ax + ax) + splat(1.f));
  big = (f32x4)((i32x4)big | sign);
  f32x4 z = x * x;
  f32x4 p = splat(-5.70498872745e-3f);
  p = p * z + splat(2.06390887954e-2f);
  p = p * z + splat(-5.37397155531e-2f);
  p = p * z + splat(1.33314422036e-1f);
  p = p * z + splat(-3.33332819422e-1f);
  f32x4 small = x + x * z * p;
  return select(ax < splat(0.625f), small, big);
}

// Eigen's rational approximation; erf is +-1 in float32 beyond |x| = 4.
inline f32x4 erf_f32x4(f32x4 x) {
  x = clamp(x, -4.f, 4.f);
  f32x4 x2 = x * x;
  f32x4 p = splat(-2.72614225801306e-10f);
  p = p * x2 + splat(2.77068142495902e-08f);
  p = p * x2 + splat(-2.10102402082508e-06f);
  p = p * x2 + splat(-5.69250639462346e-05f);
  p = p * x2 + splat(-7.34990630326855e-04f);
  p = p * x2 + splat(-2.95459980854025e-03f);
  p = p * x2 + splat(-1.60960333262415e-02f);
  f32x4 q = splat(-1.45660718464996e-05f);
  q = q * x2 + splat(-2.13374055278905e-04f);
  q = q * x2 + splat(-1.68282697438203e-03f);
  q = q * x2 + splat(-7.37332916720468e-03f);
  q = q * x2 + splat(-1.42647390514189e-02f);
  return x * p / q;
}

}  // namespace vlrt

#include "core/dtype.h"

#include <cstring>

namespace vlrt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
    case DType::u8: case DType::i8: case DType::boolean: return 1;
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i8: return "int8";
    case DType::i16: return "int16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::u32: return "uint32";
    case DType::u64: return "uint64";
    case DType::boolean: return "bool";
    case DType::string: return "string";
    default: return "undefined";
  }
}

bool dtype_supported(DType t) { return dtype_size(t) != 0; }

bool dtype_is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

DType dtype_from_onnx(int32_t v) {
  DType t = static_cast<DType>(v);
  return (dtype_supported(t) || t == DType::string) ? t : DType::undefined;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        exp--;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) {  // inf or nan
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  }
  if (absx >= 0x477ff000) return uint16_t(sign | 0x7c00);  // overflow after rounding
  if (absx < 0x38800000) {                                   // subnormal half or zero
    if (absx < 0x33000000) return uint16_t(sign);
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 14 + (112 - e)
    uint32_t half_m = m >> (shift);
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1))) half_m++;
    return uint16_t(sign | half_m);
  }
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t m = absx & 0x7fffff;
  uint32_t h = (e << 10) | (m >> 13);
  uint32_t rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return uint16_t(sign | h);
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return uint16_t((x + rounding) >> 16);
}

}  // namespace vlrt

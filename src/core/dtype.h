// Element types, numbered as ONNX TensorProto.DataType numbers them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vlrt {

enum class DType : int32_t {
  undefined = 0,
  f32 = 1,
  u8 = 2,
  i8 = 3,
  u16 = 4,
  i16 = 5,
  i32 = 6,
  i64 = 7,
  string = 8,
  boolean = 9,
  f16 = 10,
  f64 = 11,
  u32 = 12,
  u64 = 13,
  bf16 = 16,
};

// Bytes per element; 0 for types vlrt cannot store (string, undefined).
size_t dtype_size(DType t);
// "float32", "int64", ... as NumPy names them.
const char* dtype_name(DType t);
// True for the types a Tensor can hold.
bool dtype_supported(DType t);
bool dtype_is_float(DType t);
// float16 or bfloat16.
inline bool dtype_is_half(DType t) { return t == DType::f16 || t == DType::bf16; }
DType dtype_from_onnx(int32_t v);

// IEEE half and bfloat16 conversions (storage types; compute happens in float).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_bf16(float f);

// Storage types that need their own C++ type so templates can tell them apart.
struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::u32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::u64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<half_t> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bf16_t> { static constexpr DType value = DType::bf16; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace vlrt

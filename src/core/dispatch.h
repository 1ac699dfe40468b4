// Calls a template lambda with the C++ type of a runtime dtype:
//   dispatch_float(t.dtype(), [&]<class T>() { ... T ... });
// A dtype outside the family throws Unsupported.
#pragma once

#include "core/dtype.h"
#include "core/error.h"

namespace vlrt {

#define VLRT_DISPATCH_CASE(DT, TYPE) \
  case DType::DT:                    \
    return f.template operator()<TYPE>();

template <class F> decltype(auto) dispatch_float(DType t, F&& f) {
  switch (t) {
    VLRT_DISPATCH_CASE(f32, float)
    VLRT_DISPATCH_CASE(f64, double)
    default: unsupported("type ", dtype_name(t), " (expected float32 or float64)");
  }
}

template <class F> decltype(auto) dispatch_int(DType t, F&& f) {
  switch (t) {
    VLRT_DISPATCH_CASE(i8, int8_t)
    VLRT_DISPATCH_CASE(i16, int16_t)
    VLRT_DISPATCH_CASE(i32, int32_t)
    VLRT_DISPATCH_CASE(i64, int64_t)
    VLRT_DISPATCH_CASE(u8, uint8_t)
    VLRT_DISPATCH_CASE(u16, uint16_t)
    VLRT_DISPATCH_CASE(u32, uint32_t)
    VLRT_DISPATCH_CASE(u64, uint64_t)
    default: unsupported("type ", dtype_name(t), " (expected an integer type)");
  }
}

// float32, float64 and every integer type.
template <class F> decltype(auto) dispatch_numeric(DType t, F&& f) {
  switch (t) {
    VLRT_DISPATCH_CASE(f32, float)
    VLRT_DISPATCH_CASE(f64, double)
    VLRT_DISPATCH_CASE(i8, int8_t)
    VLRT_DISPATCH_CASE(i16, int16_t)
    VLRT_DISPATCH_CASE(i32, int32_t)
    VLRT_DISPATCH_CASE(i64, int64_t)
    VLRT_DISPATCH_CASE(u8, uint8_t)
    VLRT_DISPATCH_CASE(u16, uint16_t)
    VLRT_DISPATCH_CASE(u32, uint32_t)
    VLRT_DISPATCH_CASE(u64, uint64_t)
    default: unsupported("type ", dtype_name(t), " (expected a numeric type)");
  }
}

// Numeric types and bool.
template <class F> decltype(auto) dispatch_all(DType t, F&& f) {
  if (t == DType::boolean) return f.template operator()<bool>();
  return dispatch_numeric(t, std::forward<F>(f));
}

// An unsigned type as wide as one element, for ops that only move bytes.
template <class F> decltype(auto) dispatch_bytes(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
    default: unsupported("elements of ", element_size, " bytes");
  }
}

#undef VLRT_DISPATCH_CASE

}  // namespace vlrt

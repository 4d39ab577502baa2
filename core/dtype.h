// Element types. f32 is the training type; f64 exists for finite-difference gradient checks;
// f16 is a storage type (converted, never computed in on the CPU); i32 holds token ids.
#pragma once
#include <cstddef>
#include <cstdint>

namespace alpha {

enum class DType : uint8_t { f32 = 0, f64 = 1, f16 = 2, i32 = 3 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::i32: return 4;
  }
  return 0;
}

const char* dtype_name(DType t);
inline bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16; }

// Maps C++ element types to DType tags (used by Tensor::data<T>() checks).
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::f16; };  // raw half bits

// IEEE binary16 <-> binary32, round-to-nearest-even; NaN/Inf preserved.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace alpha

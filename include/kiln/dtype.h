#pragma once
// Element types, their host representations and the type-promotion rules.
//
// Promotion follows PyTorch (see docs/semantics.md):
//   categories: boolean < integer < floating.
//   * Among tensors, the result is the smallest type that holds both: i32+i64 -> i64,
//     f16+f32 -> f32, f16+bf16 -> f32, int+float -> the float type.
//   * A scalar (a C++ number) never widens a tensor of the same or a higher category:
//     f16 tensor * 2.0 -> f16, i32 tensor + 1 -> i32. A scalar of a higher category gives that
//     category's default type: i32 tensor * 0.5 -> f32, bool tensor + 1 -> i64.
//   * 0-d tensors sit between the two: they widen only tensors of a lower category.
#include <cstdint>
#include <cstring>
#include <ostream>

namespace kiln {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, boolean };
inline constexpr int kNumDTypes = 7;

/// Bytes per element. Inline: recording an op asks it several times.
constexpr int itemsize(DType t) {
  switch (t) {
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f64:
  case DType::i64:
    return 8;
  case DType::f16:
  case DType::bf16:
    return 2;
  case DType::boolean:
    return 1;
  }
  return 0;
}
/// Short name: "f32", "bf16", "bool", ...
const char* dtype_name(DType t);
bool is_floating(DType t);
bool is_integral(DType t); // i32, i64 (not boolean)
/// Result type of a binary op between two tensors of these types.
DType promote_types(DType a, DType b);
std::ostream& operator<<(std::ostream& os, DType t);

/// IEEE half precision, storage only; arithmetic happens in float.
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f); // round to nearest even
  operator float() const;
};

/// bfloat16, storage only; arithmetic happens in float.
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f); // round to nearest even, NaN stays NaN
  operator float() const;
};

/// dtype_of<T>: the DType a host type maps to (float -> f32, bool -> boolean, ...).
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::boolean; }; // 0/1
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

} // namespace kiln

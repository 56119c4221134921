#include "ir/errors.h"

#include <kiln/dtype.h>

#include <bit>
#include <cmath>

namespace kiln {

const char* dtype_name(DType t) {
  switch (t) {
  case DType::f32:
    return "f32";
  case DType::f64:
    return "f64";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  case DType::boolean:
    return "bool";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
bool is_integral(DType t) {
  return t == DType::i32 || t == DType::i64;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b; // int op float -> the float type
  if (!fa) return DType::i64;      // i32 op i64
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32; // f16/bf16/f32 mixes
}

std::ostream& operator<<(std::ostream& os, DType t) {
  return os << dtype_name(t);
}

// IEEE binary16 conversions, round to nearest even (the usual bit-manipulation approach).
half::half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) { // inf or NaN
    bits = static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (absx >= 0x477ff000u) { // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (absx < 0x38800000u) { // subnormal half (or zero): let the FPU round via a magic add
    float a = std::bit_cast<float>(absx) + 0.5f; // 0.5 = 2^-1: ulp of result is 2^-24
    bits = static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(a) - 0x3f000000u));
    return;
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mant_odd; // rebias exponent (-112 << 23) and round
  bits = static_cast<uint16_t>(sign | (absx >> 13));
}

half::operator float() const {
  uint32_t sign = (uint32_t(bits) & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    float m = static_cast<float>(mant) * 5.9604644775390625e-8f; // 2^-24
    return sign ? -m : m;
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

bfloat16::bfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    bits = static_cast<uint16_t>((x >> 16) | 0x40u); // quiet NaN
    return;
  }
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  bits = static_cast<uint16_t>((x + rounding) >> 16);
}

bfloat16::operator float() const {
  return std::bit_cast<float>(uint32_t(bits) << 16);
}

} // namespace kiln

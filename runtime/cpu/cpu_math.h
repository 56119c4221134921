#pragma once
// Branch-free float math the compiler can vectorize inside the interpreter's loops (glibc's
// expf/tanhf are scalar calls). Accuracy: exp within 2 ulp, tanh and sigmoid within 3 ulp
// (checked against double references in tests/). Doubles use <cmath>.
#include <bit>
#include <cmath>
#include <cstdint>

namespace kiln::detail::cpu {

inline float pow2i(int k) {
  return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
}

inline float exp_f32(float x) {
  bool nan = x != x;
  float xc = nan ? 0.0f : (x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x));
  // n = round(x / ln2) via the 1.5 * 2^23 trick; r = x - n ln2 in two parts.
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  // exp(r) on |r| <= ln2/2, Taylor to degree 7 (error < 6e-9 relative).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int k = static_cast<int>(n);
  int k1 = k / 2; // split the scale so subnormal results and 2^128 intermediates work
  float y = p * pow2i(k1) * pow2i(k - k1);
  y = x > 88.72283935546875f ? INFINITY : y;
  y = x < -103.97208f ? 0.0f : y;
  return nan ? x : y;
}

inline float tanh_f32(float x) {
  float ax = std::fabs(x);
  // Small |x|: odd Taylor series to x^17 (alternating; error below 5e-8 relative at 0.55).
  float z = x * x;
  float p = 6404582.0f / 10854718875.0f;
  p = p * z - 929569.0f / 638512875.0f;
  p = p * z + 21844.0f / 6081075.0f;
  p = p * z - 1382.0f / 155925.0f;
  p = p * z + 62.0f / 2835.0f;
  p = p * z - 17.0f / 315.0f;
  p = p * z + 2.0f / 15.0f;
  p = p * z - 1.0f / 3.0f;
  float small = x + x * z * p;
  // Larger |x|: 1 - 2 / (exp(2|x|) + 1), which is >= 0.5 here so there is no cancellation.
  float e = exp_f32(2.0f * ax); // inf for large ax: big becomes exactly 1
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0.0f ? -big : big;
  return ax < 0.55f ? small : big;
}

inline float sigmoid_f32(float x) {
  return 1.0f / (1.0f + exp_f32(-x));
}

} // namespace kiln::detail::cpu

#pragma once
// f32 exp, tanh, sigmoid, log and log1p that give the same bits on every device: plain IEEE adds,
// multiplies, divisions and compares in one fixed order, no library call and no fused
// multiply-add (the host build has -ffp-contract=off, NVRTC gets --fmad=false). The CPU
// interpreter always uses them (branch-free, so its loops vectorize; glibc's expf/tanhf are
// scalar calls); generated CUDA kernels use them in reproducible mode (kiln::set_reproducible),
// where CUDA's own expf/tanhf would round differently. Accuracy: exp within 2 ulp, tanh and
// sigmoid within 3 ulp (sigmoid is 0 below -88.7, where the exact value is subnormal), log
// within 1 ulp, log1p within 1.5 (tests/ops/float_math_test.cpp checks them against double).
// Pasted verbatim into NVRTC sources (CMake embeds this file as kFloatMathSource). The
// constants are hex literals so that no compiler's constant folding can differ.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define KILN_MATH_FN __host__ __device__ __forceinline__
#define KILN_FLOAT_BITS(u) __uint_as_float(u)
#define KILN_BITS_OF(x) __float_as_uint(x)
#define KILN_FABSF(x) fabsf(x)
#else
#include <bit>
#include <cmath>
#include <cstdint>
#define KILN_MATH_FN inline
#define KILN_FLOAT_BITS(u) std::bit_cast<float>(static_cast<uint32_t>(u))
#define KILN_BITS_OF(x) std::bit_cast<uint32_t>(x)
#define KILN_FABSF(x) std::fabs(x)
#endif

namespace kiln::detail {

KILN_MATH_FN float pow2i(int k) {
  return KILN_FLOAT_BITS(static_cast<unsigned>(k + 127) << 23);
}

KILN_MATH_FN float exp_f32(float x) {
  const bool nan = x != x;
  const float xc = nan ? 0.0f : (x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x));
  // n = round(x / ln2) via the 1.5 * 2^23 trick; r = x - n ln2 in two parts.
  const float n = (xc * 0x1.715476p+0f + 0x1.8p+23f) - 0x1.8p+23f;
  float r = xc - n * 0x1.62e4p-1f;
  r = r - n * 0x1.7f7d1cp-20f;
  // exp(r) on |r| <= ln2/2, Taylor to degree 7 (error < 6e-9 relative).
  float p = 0x1.a01a02p-13f;   // 1/5040
  p = p * r + 0x1.6c16c2p-10f; // 1/720
  p = p * r + 0x1.111112p-7f;  // 1/120
  p = p * r + 0x1.555556p-5f;  // 1/24
  p = p * r + 0x1.555556p-3f;  // 1/6
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int k = static_cast<int>(n);
  const int k1 = k / 2; // split the scale so subnormal results and 2^128 intermediates work
  float y = p * pow2i(k1) * pow2i(k - k1);
  y = x > 0x1.62e43p+6f ? KILN_FLOAT_BITS(0x7f800000u) : y; // overflow past ln(FLT_MAX)
  y = x < -0x1.9fe368p+6f ? 0.0f : y;                       // underflow past the subnormals
  return nan ? x : y;
}

KILN_MATH_FN float tanh_f32(float x) {
  const float ax = KILN_FABSF(x);
  // Small |x|: odd Taylor series to x^17 (alternating; error below 5e-8 relative at 0.55).
  const float z = x * x;
  float p = 0x1.355826p-11f;   // 6404582/10854718875
  p = p * z - 0x1.7da364p-10f; // 929569/638512875
  p = p * z + 0x1.d6d3dp-9f;   // 21844/6081075
  p = p * z - 0x1.226e36p-7f;  // 1382/155925
  p = p * z + 0x1.664f48p-6f;  // 62/2835
  p = p * z - 0x1.ba1ba2p-5f;  // 17/315
  p = p * z + 0x1.111112p-3f;  // 2/15
  p = p * z - 0x1.555556p-2f;  // 1/3
  const float small = x + x * z * p;
  // Larger |x|: 1 - 2 / (exp(2|x|) + 1), which is >= 0.5 here so there is no cancellation.
  const float e = exp_f32(2.0f * ax); // inf for large ax: big becomes exactly 1
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0.0f ? -big : big;
  return x == 0.0f ? x : (ax < 0.55f ? small : big); // tanh(-0) = -0
}

KILN_MATH_FN float sigmoid_f32(float x) {
  return 1.0f / (1.0f + exp_f32(-x));
}

KILN_MATH_FN float log_f32(float x) {
  // x = 2^k m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^25 first), f = m - 1
  // (exact). With s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R), where
  // R = 2 (s^2/3 + s^4/5 + ...): f carries the bulk exactly and the rounding errors fall on
  // the small terms. |s| <= 0.1716, so the series to s^10 is within 1e-10 relative.
  const bool sub = x < 0x1p-126f;
  const unsigned bits = KILN_BITS_OF(sub ? x * 0x1p25f : x) + (0x3f800000u - 0x3f3504f3u);
  const int k = static_cast<int>(bits >> 23) - 127 - (sub ? 25 : 0);
  const float f = KILN_FLOAT_BITS((bits & 0x7fffffu) + 0x3f3504f3u) - 1.0f;
  const float s = f / (2.0f + f), z = s * s;
  float r = 0x1.745d18p-3f;   // 2/11
  r = r * z + 0x1.c71c72p-3f; // 2/9
  r = r * z + 0x1.24924ap-2f; // 2/7
  r = r * z + 0x1.99999ap-2f; // 2/5
  r = r * z + 0x1.555556p-1f; // 2/3
  r = r * z;
  const float hfsq = 0.5f * f * f, dk = static_cast<float>(k);
  // k ln2 in two parts: the high one has 9 low zero bits, so k * hi is exact (|k| <= 152).
  float y = s * (hfsq + r) + dk * 0x1.7f7d1cp-20f - hfsq + f + dk * 0x1.62e4p-1f;
  y = x == KILN_FLOAT_BITS(0x7f800000u) ? x : y;     // log(inf) = inf
  y = x == 0.0f ? -KILN_FLOAT_BITS(0x7f800000u) : y; // log(+-0) = -inf
  y = x < 0.0f ? KILN_FLOAT_BITS(0x7fc00000u) : y;   // log(negative) = NaN
  return x != x ? x : y;
}

KILN_MATH_FN float log1p_f32(float x) {
  // u = 1 + x rounded loses c = x - (u - 1) (both subtractions exact while u < 2^24), and
  // log(1 + x) = log(u) + log(1 + c / u) = log(u) + c / u to float precision.
  const float u = 1.0f + x, c = x - (u - 1.0f);
  float y = log_f32(u) + c / u;
  y = u == KILN_FLOAT_BITS(0x7f800000u) || u == 0.0f ? log_f32(u) : y; // x = inf, x = -1
  return x == 0.0f ? x : y;                                            // log1p(-0) = -0
}

} // namespace kiln::detail

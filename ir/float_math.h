#pragma once
// f32 exp, tanh and sigmoid that give the same bits on every device: plain IEEE adds,
// multiplies, divisions and compares in one fixed order, no library call and no fused
// multiply-add (the host build has -ffp-contract=off, NVRTC gets --fmad=false). The CPU
// interpreter always uses them (branch-free, so its loops vectorize; glibc's expf/tanhf are
// scalar calls); generated CUDA kernels use them in reproducible mode (kiln::set_reproducible),
// where CUDA's own expf/tanhf would round differently. Accuracy: exp within 2 ulp, tanh and
// sigmoid within 3 ulp (tests/runtime/cpu_math_test.cpp checks them against double).
// Pasted verbatim into NVRTC sources (CMake embeds this file as kFloatMathSource). The
// constants are hex literals so that no compiler's constant folding can differ.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define KILN_MATH_FN __host__ __device__ __forceinline__
#define KILN_FLOAT_BITS(u) __uint_as_float(u)
#define KILN_FABSF(x) fabsf(x)
#else
#include <bit>
#include <cmath>
#include <cstdint>
#define KILN_MATH_FN inline
#define KILN_FLOAT_BITS(u) std::bit_cast<float>(static_cast<uint32_t>(u))
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
  return ax < 0.55f ? small : big;
}

KILN_MATH_FN float sigmoid_f32(float x) {
  return 1.0f / (1.0f + exp_f32(-x));
}

} // namespace kiln::detail

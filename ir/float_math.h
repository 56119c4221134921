#pragma once
// f32 math that gives the same bits on every device: plain IEEE adds, multiplies, divisions and
// compares in one fixed order, no library call and no fused multiply-add (the host build has
// -ffp-contract=off, NVRTC gets --fmad=false). The CPU interpreter always uses exp, tanh,
// sigmoid, log and log1p (branch-free, so its loops vectorize; glibc's are scalar calls), and the
// others in reproducible kernels (kiln::set_reproducible), as generated CUDA kernels use them
// all there, where CUDA's own functions would round differently. Accuracy against double
// (tests/ops/float_math_test.cpp): exp within 2 ulp, tanh and sigmoid within 3 (sigmoid is 0 below
// -88.7, where the exact value is subnormal), log within 1, log1p within 1.5; pow, gelu, sin and
// cos, computed in double, within 1 (sin and cos reduced to within 2^-66: Payne-Hanek past 2^20).
// The double helpers (exp_d, log_d, erf_d, erfc_d, the sin/cos polynomials) serve those and
// Box-Muller normals (ir/philox.h); they are not yet f64's own functions. Pasted verbatim into
// NVRTC sources (CMake embeds this file as kFloatMathSource). The constants are hex literals so
// that no compiler's constant folding can differ.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define KILN_MATH_FN __host__ __device__ __forceinline__
#define KILN_FLOAT_BITS(u) __uint_as_float(u)
#define KILN_BITS_OF(x) __float_as_uint(x)
#define KILN_DOUBLE_BITS(u) __longlong_as_double(static_cast<long long>(u))
#define KILN_BITS_OF_DOUBLE(x) static_cast<unsigned long long>(__double_as_longlong(x))
#define KILN_FABSF(x) fabsf(x)
#else
#include <bit>
#include <cmath>
#include <cstdint>
#define KILN_MATH_FN inline
#define KILN_FLOAT_BITS(u) std::bit_cast<float>(static_cast<uint32_t>(u))
#define KILN_BITS_OF(x) std::bit_cast<uint32_t>(x)
#define KILN_DOUBLE_BITS(u) std::bit_cast<double>(static_cast<unsigned long long>(u))
#define KILN_BITS_OF_DOUBLE(x) std::bit_cast<unsigned long long>(x)
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

// exp, log and cos in double for pow_f32 and Box-Muller normals (not yet f64's own exp, log
// and cos: their error, a few ulps of a double, is far inside what a float result needs but
// above what f64 users expect).
KILN_MATH_FN double exp_d(double x) {
  // n = round(x / ln2); r = x - n ln2 in two parts (fdlibm's split: n * hi is exact); exp(r)
  // on |r| <= ln2/2 by its Taylor series to r^13 (truncation about 4e-18 relative).
  const double xc = x < -1100.0 ? -1100.0 : (x > 1100.0 ? 1100.0 : x);
  const double n = (xc * 0x1.71547652b82fep+0 + 0x1.8p52) - 0x1.8p52;
  const double r = (xc - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
  double p = 0x1.6124613a86d09p-33; // 1/13!
  p = p * r + 0x1.1eed8eff8d898p-29;
  p = p * r + 0x1.ae64567f544e4p-26;
  p = p * r + 0x1.27e4fb7789f5cp-22;
  p = p * r + 0x1.71de3a556c734p-19;
  p = p * r + 0x1.a01a01a01a01ap-16;
  p = p * r + 0x1.a01a01a01a01ap-13;
  p = p * r + 0x1.6c16c16c16c17p-10;
  p = p * r + 0x1.1111111111111p-7;
  p = p * r + 0x1.5555555555555p-5;
  p = p * r + 0x1.5555555555555p-3;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const int k = static_cast<int>(n), k1 = k / 2; // two scales: subnormals and 2^1024 work
  const double s1 = KILN_DOUBLE_BITS(static_cast<unsigned long long>(k1 + 1023) << 52);
  const double s2 = KILN_DOUBLE_BITS(static_cast<unsigned long long>(k - k1 + 1023) << 52);
  return p * s1 * s2;
}

// log of a finite x > 0 in double, as log_f32 (the atanh series of s to s^22).
KILN_MATH_FN double log_d(double x) {
  const bool sub = x < 0x1p-1022;
  const unsigned long long bits =
      KILN_BITS_OF_DOUBLE(sub ? x * 0x1p54 : x) + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
  const int k = static_cast<int>(bits >> 52) - 1023 - (sub ? 54 : 0);
  const double f = KILN_DOUBLE_BITS((bits & 0xfffffffffffffull) + 0x3fe6a09e667f3bcdull) - 1.0;
  const double s = f / (2.0 + f), z = s * s;
  double r = 0x1.642c8590b2164p-4;  // 2/23
  r = r * z + 0x1.8618618618618p-4; // 2/21
  r = r * z + 0x1.af286bca1af28p-4; // 2/19
  r = r * z + 0x1.e1e1e1e1e1e1ep-4; // 2/17
  r = r * z + 0x1.1111111111111p-3; // 2/15
  r = r * z + 0x1.3b13b13b13b14p-3; // 2/13
  r = r * z + 0x1.745d1745d1746p-3; // 2/11
  r = r * z + 0x1.c71c71c71c71cp-3; // 2/9
  r = r * z + 0x1.2492492492492p-2; // 2/7
  r = r * z + 0x1.999999999999ap-2; // 2/5
  r = r * z + 0x1.5555555555555p-1; // 2/3
  r = r * z;
  const double hfsq = 0.5 * f * f, dk = static_cast<double>(k);
  return s * (hfsq + r) + dk * 0x1.a39ef35793c76p-33 - hfsq + f + dk * 0x1.62e42fee00000p-1;
}

// sin and cos of |r| <= pi/4 in double: Taylor series to r^17 and r^16 (truncation about 2e-18).
KILN_MATH_FN double sin_poly(double r) {
  const double z = r * r;
  double s = 0x1.952c77030ad4ap-49; // 1/17!
  s = s * z - 0x1.ae7f3e733b81fp-41;
  s = s * z + 0x1.6124613a86d09p-33;
  s = s * z - 0x1.ae64567f544e4p-26;
  s = s * z + 0x1.71de3a556c734p-19;
  s = s * z - 0x1.a01a01a01a01ap-13;
  s = s * z + 0x1.1111111111111p-7;
  s = s * z - 0x1.5555555555555p-3;
  return r + r * z * s;
}

KILN_MATH_FN double cos_poly(double r) {
  const double z = r * r;
  double c = 0x1.ae7f3e733b81fp-45; // 1/16!
  c = c * z - 0x1.93974a8c07c9dp-37;
  c = c * z + 0x1.1eed8eff8d898p-29;
  c = c * z - 0x1.27e4fb7789f5cp-22;
  c = c * z + 0x1.a01a01a01a01ap-16;
  c = c * z - 0x1.6c16c16c16c17p-10;
  c = c * z + 0x1.5555555555555p-5;
  c = c * z - 0.5;
  return 1.0 + z * c;
}

// sin (q odd: cos) of r + q pi/2.
KILN_MATH_FN double sin_quadrant(double r, int q) {
  const double v = (q & 1) ? cos_poly(r) : sin_poly(r);
  return (q & 2) ? -v : v;
}

// x - k pi/2 for |x| < 2^20 (k < 2^20, so k times the 33-bit head of pi/2 is exact; the tail is
// fdlibm's split): r in [-pi/4, pi/4] to about 2^-66, and k.
KILN_MATH_FN double reduce_medium(double x, int& k) {
  const double kd = (x * 0x1.45f306dc9c883p-1 + 0x1.8p52) - 0x1.8p52;
  k = static_cast<int>(kd);
  return (x - kd * 0x1.921fb54400000p+0) - kd * 0x1.0b4611a626331p-34;
}

// 64 bits of 2/pi from bit `pos` on (bit 1 is the first after the point; zeros before it).
KILN_MATH_FN unsigned long long two_over_pi_bits(int pos) {
  const unsigned w[8] = {0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
                         0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u};
  const int p = pos - 1; // 0-based
  if (p < 0) return p <= -64 ? 0 : (static_cast<unsigned long long>(w[0]) << 32 | w[1]) >> -p;
  const int i = p / 32, s = p % 32;
  auto word = [&](int k) -> unsigned long long { return k < 8 ? w[k] : 0u; };
  const unsigned long long head = word(i) << 32 | word(i + 1);
  return s == 0 ? head : head << s | word(i + 2) >> (32 - s);
}

// A positive float x >= 2^20 less k pi/2 (Payne and Hanek): with x = M 2^E, x 2/pi mod 4 is
// M times the 98 bits of 2/pi that end 96 places below 2^E's, mod 2^98 (the bits above would
// add multiples of 4, those below less than 2^-72). Its top two bits are k; the 96 below, the
// fraction, rounded to the nearest quadrant, times pi/2 are r.
KILN_MATH_FN double reduce_large(float x, int& k) {
  const unsigned bits = KILN_BITS_OF(x);
  const unsigned long long M = (bits & 0x7fffffu) | 0x800000u;
  const int E = static_cast<int>(bits >> 23) - 150;
  const unsigned long long hi = two_over_pi_bits(E - 1), lo = two_over_pi_bits(E + 63) >> 30;
  // P = M (hi 2^34 + lo) mod 2^98, as ph 2^64 + pl.
  const unsigned long long a = M * lo, t1 = M * (hi & 0xffffffffu), t2 = M * (hi >> 32);
  const unsigned long long pl = a + (t1 << 34);
  const unsigned long long ph = ((t1 >> 30) + (t2 << 2) + (pl < a ? 1u : 0u)) & 0x3ffffffffull;
  k = static_cast<int>(ph >> 32);
  unsigned long long fh = (ph & 0xffffffffu) << 32 | pl >> 32, fl = pl & 0xffffffffu;
  double sign = 1.0;
  if (fh >> 63) { // past half a quadrant: the next one, less the rest
    k += 1;
    sign = -1.0;
    fh = ~fh;
    fl = (~fl & 0xffffffffu) + 1u;
    if (fl >> 32) fl = 0, fh += 1;
  }
  const double f = static_cast<double>(fh) * 0x1p-64 + static_cast<double>(fl) * 0x1p-96;
  return sign * f * 0x1.921fb54442d18p+0;
}

// sin (cosine: quarter = 1) of a float, reduced and evaluated in double, rounded once.
KILN_MATH_FN float sin_cos_f32(float x, int quarter) {
  if (x != x || x - x != x - x) return KILN_FLOAT_BITS(0x7fc00000u); // NaN, +-inf
  const float ax = KILN_FABSF(x);
  int k = 0;
  const double r = ax < 0x1p20f ? reduce_medium(ax, k) : reduce_large(ax, k);
  const double v = sin_quadrant(r, (k + quarter) & 3);
  // sin is odd, cos even
  return static_cast<float>(quarter == 0 && x < 0.0f ? -v : v);
}

KILN_MATH_FN float sin_f32(float x) {
  return x == 0.0f ? x : sin_cos_f32(x, 0); // sin(-0) = -0
}

KILN_MATH_FN float cos_f32(float x) {
  return sin_cos_f32(x, 1);
}

// cos of x in [0, 2 pi] (Box-Muller's angle).
KILN_MATH_FN double cos_2pi_d(double x) {
  int k = 0;
  const double r = reduce_medium(x, k);
  return sin_quadrant(r, (k + 1) & 3);
}

// erf and erfc in double. Below 2.5: erf's Taylor series, 2/sqrt(pi) sum (-1)^n x^(2n+1) /
// (n! (2n+1)) (its terms reach about 200, so the sum keeps about 1e-13 of absolute accuracy).
// From 2.5: erfc's continued fraction (Laplace's), erfc(x) = exp(-x^2) / sqrt(pi) / (x + (1/2) / (x
// + 1 / (x + (3/2) / (x + ...)))), evaluated from a fixed depth of 60, with no cancellation.
KILN_MATH_FN double erf_series(double x) {
  // The series' coefficients with 2/sqrt(pi) folded in, (-1)^n 2 / (sqrt(pi) n! (2n+1)), to
  // n = 40 (below 2.5 the next term is under 3e-19), summed by Horner's rule in x^2.
  const double c[41] = {0x1.20dd750429b6dp+0,    -0x1.812746b0379e7p-2,   0x1.ce2f21a042be2p-4,
                        -0x1.b82ce31288b51p-6,   0x1.565bcd0e6a53fp-8,    -0x1.c02db40040b86p-11,
                        0x1.f9a326f9b89b7p-14,   -0x1.f4d25c3e0c2ebp-17,  0x1.b9e6c9dc651a3p-20,
                        -0x1.5f742ec43e71ap-23,  0x1.fcc5720624c1cp-27,   -0x1.51d7181c5d36dp-30,
                        0x1.9e6ad5e55a730p-34,   -0x1.d8453cb0c46eap-38,  0x1.f683ae4a97007p-42,
                        -0x1.f56f071a885cfp-46,  0x1.d70b3537f4765p-50,   -0x1.a2007af3447f6p-54,
                        0x1.5f7919bc67b8cp-58,   -0x1.18cc8a061c479p-62,  0x1.ab5cc31489f29p-67,
                        -0x1.3676fc48c133cp-71,  0x1.af83c2fb19fa6p-76,   -0x1.1f690c2b2753ap-80,
                        0x1.6f928977a0028p-85,   -0x1.c40abff27ce65p-90,  0x1.0baeaddb047b0p-94,
                        -0x1.31b7776e54127p-99,  0x1.512193be51298p-104,  -0x1.67657a57148a3p-109,
                        0x1.72c97f9dd3b8dp-114,  -0x1.7298e545013acp-119, 0x1.6731bac4d9ceap-124,
                        -0x1.51e98b3b1916bp-129, 0x1.34d111e701528p-134,  -0x1.1264ac150f151p-139,
                        0x1.da7210371d95dp-145,  -0x1.8f639dd720316p-150, 0x1.479786e3e5e92p-155,
                        -0x1.05fd0bbdfc959p-160, 0x1.98d4d5028c0d7p-166};
  const double z = x * x;
  double p = c[40];
  for (int n = 39; n >= 0; --n) p = p * z + c[n];
  return x * p;
}

KILN_MATH_FN double erfc_fraction(double x) { // x >= 2.5
  double f = x;
  for (int k = 60; k >= 1; --k) f = x + 0.5 * k / f;
  return exp_d(-x * x) * 0x1.20dd750429b6dp-1 / f; // 1 / sqrt(pi)
}

KILN_MATH_FN double erfc_d(double x) {
  if (x != x) return x;
  if (x >= 2.5) return x > 27.0 ? 0.0 : erfc_fraction(x);
  if (x <= -2.5) return x < -27.0 ? 2.0 : 2.0 - erfc_fraction(-x);
  return 1.0 - erf_series(x);
}

KILN_MATH_FN double erf_d(double x) {
  if (x != x) return x;
  if (x >= 2.5) return 1.0 - (x > 27.0 ? 0.0 : erfc_fraction(x));
  if (x <= -2.5) return (x < -27.0 ? 0.0 : erfc_fraction(-x)) - 1.0;
  return erf_series(x);
}

// GELU's exact form, x/2 (1 + erf(x / sqrt 2)) = x/2 erfc(-x / sqrt 2), in double (no
// cancellation for negative x), rounded to float once.
KILN_MATH_FN float gelu_f32(float x) {
  const double d = static_cast<double>(x);
  return static_cast<float>(0.5 * d * erfc_d(-d * 0x1.6a09e667f3bcdp-1));
}

// a^b with C's pow rules for the special cases (pow(x, 0) = 1 and pow(1, y) = 1 even for NaN;
// a negative base needs an integer exponent, whose parity gives the sign; zeros and infinities
// as IEEE 754 says). The rest is exp(b log|a|) in double, rounded once to float.
KILN_MATH_FN float pow_f32(float a, float b) {
  const float inf = KILN_FLOAT_BITS(0x7f800000u), nan = KILN_FLOAT_BITS(0x7fc00000u);
  if (b == 0.0f || a == 1.0f) return 1.0f;
  if (a != a || b != b) return nan;
  const float ab = KILN_FABSF(a), bb = KILN_FABSF(b);
  const bool integer = bb >= 0x1p23f || static_cast<float>(static_cast<int>(b)) == b;
  const bool odd = integer && bb < 0x1p24f && (static_cast<long long>(b) & 1) != 0;
  const bool negative = (KILN_BITS_OF(a) >> 31) != 0 && odd; // -0 counts: pow(-0, 3) = -0
  if (a < 0.0f && !integer && ab != inf) return nan;
  float y;
  if (bb == inf)
    y = ab == 1.0f ? 1.0f : ((ab > 1.0f) == (b > 0.0f) ? inf : 0.0f);
  else if (ab == 0.0f)
    y = b < 0.0f ? inf : 0.0f;
  else if (ab == inf)
    y = b < 0.0f ? 0.0f : inf;
  else if (bb == 2.0f || bb == 1.0f) // exact in double, so rounded once: x^2 == x * x, also at
    y = static_cast<float>(          // ties, which exp(2 log x) may round the other way
        b > 0.0f ? (bb == 1.0f ? ab : static_cast<double>(ab) * ab)
                 : 1.0 / (bb == 1.0f ? static_cast<double>(ab) : static_cast<double>(ab) * ab));
  else
    y = static_cast<float>(exp_d(static_cast<double>(b) * log_d(ab)));
  return negative ? -y : y;
}

} // namespace kiln::detail

// kiln's own f32 exp, tanh, sigmoid and log (ir/float_math.h), which the CPU uses always and the
// GPU in reproducible mode: their error against double over a sweep of every float range, and
// their special values. tests/cuda/reproducible_gpu_test.cpp checks the GPU gives the same bits.
#include "ir/float_math.h"
#include "ir/philox.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

using kiln::detail::exp_f32;
using kiln::detail::log1p_f32;
using kiln::detail::log_f32;
using kiln::detail::pow_f32;
using kiln::detail::sigmoid_f32;
using kiln::detail::tanh_f32;

// The error of y in units in the last place of the float nearest to the exact value `ref`.
double ulps(float y, double ref) {
  const float rounded = static_cast<float>(ref); // inf past FLT_MAX: overflow is right
  if (std::isinf(rounded) || std::isinf(y)) return y == rounded ? 0 : 1e9;
  const double r = std::fabs(ref);
  const float nearest = static_cast<float>(r);
  double ulp = std::nextafter(nearest, std::numeric_limits<float>::infinity()) - nearest;
  if (r < std::numeric_limits<float>::min()) ulp = std::ldexp(1.0, -149); // subnormal spacing
  return std::fabs(double(y) - ref) / ulp;
}

template <class F, class R> double worst_ulps(F f, R ref, float lo, float hi, float* at) {
  double worst = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 257) {
    float x;
    const uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&x, &u, sizeof x);
    if (!(x >= lo && x <= hi)) continue;
    const double e = ulps(f(x), ref(double(x)));
    if (e > worst) worst = e, *at = x;
  }
  return worst;
}

TEST(FloatMath, ErrorsAgainstDoubleAcrossTheRange) {
  float at = 0;
  EXPECT_LE(worst_ulps(
                exp_f32, [](double x) { return std::exp(x); }, -104.0f, 89.0f, &at),
            2.0)
      << "exp at " << at;
  EXPECT_LE(worst_ulps(
                tanh_f32, [](double x) { return std::tanh(x); }, -1e30f, 1e30f, &at),
            3.0)
      << "tanh at " << at;
  EXPECT_LE(worst_ulps(
                sigmoid_f32, [](double x) { return 1 / (1 + std::exp(-x)); }, -88.0f, 100.0f, &at),
            3.0)
      << "sigmoid at " << at;
  EXPECT_LE(worst_ulps(
                log_f32, [](double x) { return std::log(x); }, 0.0f, 3e38f, &at),
            1.0)
      << "log at " << at;
  EXPECT_LE(worst_ulps(
                log1p_f32, [](double x) { return std::log1p(x); }, -1.0f, 3e38f, &at),
            1.5)
      << "log1p at " << at;
}

TEST(FloatMath, PowAgainstDoubleAndCsSpecialCases) {
  // Bases over every 9973rd float of (0, inf), exponents from a fixed set, results that stay
  // finite and normal: within 1 ulp of pow in long double.
  double worst = 0;
  for (float e : {2.0f, 0.5f, -1.0f, 3.0f, -2.5f, 1.0f / 3, 7.25f, 0.01f, -0.75f}) {
    for (uint32_t u = 0x00800000u; u < 0x7f800000u; u += 9973) {
      float x;
      std::memcpy(&x, &u, sizeof x);
      const long double ref = std::pow(static_cast<long double>(x), static_cast<long double>(e));
      if (!(ref > 1.2e-38L && ref < 3.4e38L)) continue;
      worst = std::max(worst, ulps(pow_f32(x, e), static_cast<double>(ref)));
    }
  }
  EXPECT_LE(worst, 1.0);
  // x^2 at a tie (x * x exactly halfway between two floats): the float product's rounding.
  const float tie = 1.379150390625f;
  EXPECT_EQ(pow_f32(tie, 2.0f), tie * tie);
  EXPECT_EQ(pow_f32(-tie, 2.0f), tie * tie);
  EXPECT_EQ(pow_f32(tie, 1.0f), tie);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // Every case against the C library's powf (C99 Annex F).
  const float vals[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f,   -0.5f,  3.0f,       -3.0f,
                        2.5f, -2.5f, inf,  -inf,  nan,  1e30f, -1e30f, 1e-30f, 16777217.0f};
  for (float a : vals)
    for (float b : vals) {
      const float want = std::pow(a, b), got = pow_f32(a, b);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << a << "^" << b;
        continue;
      }
      EXPECT_EQ(got, want) << a << "^" << b;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << a << "^" << b;
    }
}

// Box-Muller with kiln's double log and cos (reproducible mode) against the C library's: the
// same normals to 1e-14, relative (the helpers are within a few ulps of a double).
TEST(FloatMath, PortableNormalsAgreeWithTheLibrarys) {
  double worst = 0;
  for (uint64_t c = 0; c < (1u << 20); ++c) {
    const double lib = kiln::detail::philox_normal(7, c),
                 own = kiln::detail::philox_normal(7, c, true);
    worst = std::max(worst, std::fabs(own - lib) / std::max(1e-300, std::fabs(lib)));
  }
  EXPECT_LE(worst, 1e-14);
  EXPECT_EQ(kiln::detail::cos_2pi_d(0.0), 1.0);
  EXPECT_NEAR(kiln::detail::cos_2pi_d(3.141592653589793), -1.0, 1e-16);
  EXPECT_NEAR(kiln::detail::log_d(1e-300), std::log(1e-300), 1e-13);
}

TEST(FloatMath, ErfAndGelu) {
  double worst_erf = 0, worst_gelu = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const double x = i * 1e-5;
    worst_erf = std::max(worst_erf, std::fabs(kiln::detail::erf_d(x) - std::erf(x)));
    worst_erf = std::max(worst_erf, std::fabs(kiln::detail::erfc_d(x) - std::erfc(x)) /
                                        std::max(1e-300, std::erfc(x)) * 1e-3);
    const float xf = static_cast<float>(x);
    const double ref = 0.5 * double(xf) * std::erfc(-double(xf) / std::sqrt(2.0));
    worst_gelu = std::max(worst_gelu, ulps(kiln::detail::gelu_f32(xf), ref));
  }
  EXPECT_LE(worst_erf, 1e-12); // erf absolute; erfc relative, scaled by 1e-3 (so 1e-9)
  EXPECT_LE(worst_gelu, 0.51);
  EXPECT_EQ(kiln::detail::erf_d(0.0), 0.0);
  EXPECT_EQ(kiln::detail::erf_d(10.0), 1.0);
  EXPECT_EQ(kiln::detail::erf_d(-10.0), -1.0);
  EXPECT_EQ(kiln::detail::gelu_f32(0.0f), 0.0f);
}

// sin and cos, reduced exactly (Payne-Hanek past 2^20) and evaluated in double: rounded
// correctly against long double over the range where the x87's reduction is exact (below 2^63),
// and at a few huge arguments against values computed to 200 digits.
TEST(FloatMath, SinAndCos) {
  double worst = 0;
  float at = 0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) {
    float x;
    const uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&x, &u, sizeof x);
    if (!std::isfinite(x) || std::fabs(x) > 0x1p62f) continue;
    const long double lx = x;
    for (double e : {ulps(kiln::detail::sin_f32(x), double(sinl(lx))),
                     ulps(kiln::detail::cos_f32(x), double(cosl(lx)))})
      if (e > worst) worst = e, at = x;
  }
  EXPECT_LE(worst, 0.5001) << "at " << at;
  struct Case {
    float x, sin, cos;
  };
  for (Case c : {Case{0x1.93e594p+99f, -0x1.95136p-1f, -0x1.392444p-1f},
                 Case{0x1.fffffep+127f, -0x1.0b3366p-1f, 0x1.b4bf2cp-1f},
                 Case{0x1.5af1d8p+66f, 0x1.502ad2p-1f, 0x1.822e46p-1f},
                 Case{0x1.fffffep+22f, 0x1.9f919ap-1f, -0x1.2b1386p-1f}}) {
    EXPECT_EQ(kiln::detail::sin_f32(c.x), c.sin) << c.x;
    EXPECT_EQ(kiln::detail::cos_f32(c.x), c.cos) << c.x;
    EXPECT_EQ(kiln::detail::sin_f32(-c.x), -c.sin) << -c.x;
  }
  EXPECT_TRUE(std::signbit(kiln::detail::sin_f32(-0.0f)));
  EXPECT_EQ(kiln::detail::cos_f32(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(kiln::detail::sin_f32(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(kiln::detail::cos_f32(std::nanf(""))));
}

TEST(FloatMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(exp_f32(100.0f), inf);
  EXPECT_TRUE(std::isnan(exp_f32(nan)));
  EXPECT_EQ(tanh_f32(inf), 1.0f);
  EXPECT_EQ(tanh_f32(-inf), -1.0f);
  EXPECT_TRUE(std::signbit(tanh_f32(-0.0f)));
  EXPECT_EQ(sigmoid_f32(-inf), 0.0f);
  EXPECT_EQ(sigmoid_f32(-89.0f), 0.0f); // the exact value is subnormal: documented as 0
  EXPECT_EQ(sigmoid_f32(inf), 1.0f);
  EXPECT_EQ(log_f32(1.0f), 0.0f);
  EXPECT_FALSE(std::signbit(log_f32(1.0f)));
  EXPECT_EQ(log_f32(0.0f), -inf);
  EXPECT_EQ(log_f32(-0.0f), -inf);
  EXPECT_EQ(log_f32(inf), inf);
  EXPECT_TRUE(std::isnan(log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(log_f32(-inf)));
  EXPECT_TRUE(std::isnan(log_f32(nan)));
  EXPECT_EQ(log_f32(std::numeric_limits<float>::denorm_min()), float(std::log(0x1p-149)));
  EXPECT_EQ(log_f32(std::numeric_limits<float>::max()), float(std::log(double(3.4028235e38f))));
  EXPECT_EQ(log1p_f32(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(log1p_f32(-0.0f)));
  EXPECT_EQ(log1p_f32(1e-30f), 1e-30f);
  EXPECT_EQ(log1p_f32(-1.0f), -inf);
  EXPECT_TRUE(std::isnan(log1p_f32(-2.0f)));
  EXPECT_EQ(log1p_f32(inf), inf);
  EXPECT_TRUE(std::isnan(log1p_f32(nan)));
}

} // namespace

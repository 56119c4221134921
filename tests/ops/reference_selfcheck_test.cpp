// Checks of the test harness itself (reference.h): the encoders, the comparison and the error
// checker must be able to fail, or every op test built on them would pass vacuously.
#include "reference.h"

namespace {

using namespace kt;

TEST(ReferenceSelfCheck, HalfEncoding) {
  EXPECT_EQ(half_bits(1.0), 0x3c00);
  EXPECT_EQ(half_bits(-2.0), 0xc000);
  EXPECT_EQ(half_bits(65504.0), 0x7bff);
  EXPECT_EQ(half_bits(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(half_bits(std::ldexp(1.0, -14)), 0x0400);
  EXPECT_EQ(half_bits(0.5), 0x3800);
  EXPECT_EQ(half_bits(kInf), 0x7c00);
  EXPECT_EQ(half_bits(-0.0), 0x8000);
  EXPECT_EQ(quantize(DType::f16, 1 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(quantize(DType::f16, 1 + 3 * std::ldexp(1.0, -11)), 1 + std::ldexp(1.0, -9));
  EXPECT_EQ(quantize(DType::f16, 65519.0), 65504.0);
  EXPECT_EQ(quantize(DType::f16, 65520.0), kInf);
  EXPECT_EQ(quantize(DType::f16, std::ldexp(1.0, -25)), 0.0);
  EXPECT_EQ(quantize(DType::f16, 3 * std::ldexp(1.0, -25)), std::ldexp(1.0, -23));
  EXPECT_EQ(quantize(DType::f16, 2049.0), 2048.0);
  EXPECT_EQ(quantize(DType::f16, 2051.0), 2052.0);
}

TEST(ReferenceSelfCheck, Bfloat16AndIntEncoding) {
  EXPECT_EQ(bf16_bits(1.0), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0), 0xc000);
  EXPECT_EQ(quantize(DType::bf16, 1 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(quantize(DType::bf16, 1 + 3 * std::ldexp(1.0, -8)), 1 + std::ldexp(1.0, -6));
  EXPECT_EQ(quantize(DType::bf16, 10000.0), 9984.0);
  EXPECT_EQ(quantize(DType::bf16, 1e39), kInf);
  EXPECT_EQ(quantize(DType::f32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(quantize(DType::i32, -2.7), -2.0);
  EXPECT_EQ(quantize(DType::i64, 2.7), 2.0);
  EXPECT_EQ(quantize(DType::boolean, -0.5), 1.0);
  EXPECT_EQ(quantize(DType::boolean, 0.0), 0.0);
  EXPECT_TRUE(std::isnan(quantize(DType::bf16, kNaN)));
}

TEST(ReferenceSelfCheck, ComparisonCanFail) {
  Tol t{1e-5, 1e-5};
  EXPECT_TRUE(all_close({1, 2, kNaN, kInf}, {1, 2, kNaN, kInf}, t));
  EXPECT_FALSE(all_close({1, 2}, {1, 2.001}, t));
  EXPECT_FALSE(all_close({1, 2}, {1, 2, 3}, t));
  EXPECT_FALSE(all_close({0}, {kNaN}, t));
  EXPECT_FALSE(all_close({kNaN}, {0}, t));
  EXPECT_FALSE(all_close({kInf}, {-kInf}, t));
  EXPECT_FALSE(all_close({1e30}, {kInf}, t));
  EXPECT_FALSE(all_close({kInf}, {1e30}, t));
  EXPECT_TRUE(all_close({100.0005}, {100}, t)); // relative part
  EXPECT_FALSE(all_close({1}, {2}, Tol{0, 0}));
}

TEST(ReferenceSelfCheck, ReferenceHelpers) {
  // Broadcast (2, 1) op (3) -> (2, 3).
  Vals r = ref_binary({1, 2}, Shape{2, 1}, {10, 20, 30}, Shape{3},
                      [](double a, double b) { return a + b; });
  EXPECT_EQ(r, (Vals{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(bshape({2, 1, 3}, {4, 1}), (std::vector<int64_t>{2, 4, 3}));
  // Reduce (2, 3) over axis 1 and over axis -2.
  Reduced s = ref_reduce({1, 2, 3, 4, 5, 6}, {2, 3}, {1}, fold_sum);
  EXPECT_EQ(s.vals, (Vals{6, 15}));
  EXPECT_EQ(s.shape_keep, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s.shape_drop, (std::vector<int64_t>{2}));
  Reduced c = ref_reduce({1, 2, 3, 4, 5, 6}, {2, 3}, {-2}, fold_max);
  EXPECT_EQ(c.vals, (Vals{4, 5, 6}));
  EXPECT_EQ(ref_reduce({3, 9, 9, 1}, {4}, {}, fold_argmax).vals, (Vals{1}));
  EXPECT_TRUE(std::isnan(fold_max({1, kNaN, 3})));
  EXPECT_EQ(unravel(5, {2, 3}), (std::vector<int64_t>{1, 2}));
}

TEST(ReferenceSelfCheck, RandomInputsAreNeverAllZeroAndVaryPerTest) {
  Rng rng;
  for (DType t : all_dtypes()) {
    Vals v = rng.uniform(8, t, -0.4, 0.4); // ints in [0, 0] would be all zero...
    bool any = std::any_of(v.begin(), v.end(), [](double x) { return x != 0; });
    if (is_float(t) || t == DType::boolean) EXPECT_TRUE(any) << name(t);
  }
  Vals nz = rng.nonzero(100, DType::i32, 1, 3);
  for (double x : nz) EXPECT_NE(x, 0);
  Rng again;
  Rng other(12345);
  Vals a = again.uniform(16, DType::f64), b = other.uniform(16, DType::f64);
  EXPECT_NE(a, b);
}

TEST(ReferenceSelfCheck, ErrorCheckerCanFail) {
  EXPECT_FALSE(throws_kiln_error([] {}, "[x]"));
  EXPECT_FALSE(throws_kiln_error([] { throw std::runtime_error("[x] other"); }, "[x]"));
  EXPECT_FALSE(throws_kiln_error([] { throw kiln::Error("[y] msg"); }, "[x]"));
  EXPECT_TRUE(throws_kiln_error([] { throw kiln::Error("[x] msg"); }, "[x]"));
}

} // namespace

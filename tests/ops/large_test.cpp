// Larger and odd-sized inputs (~1e5 elements, prime extents) where a backend splits work into
// blocks or threads; accumulation precision of 16-bit and 64-bit integer types.
#include "reference.h"

namespace {

using namespace kt;

class Large : public OpsTest {};

TEST_F(Large, ReductionsOverPrimeExtents) {
  Rng rng;
  std::vector<int64_t> d{317, 331}; // 104927 elements
  Vals a = rng.uniform(numel(d), DType::f64, -1, 1);
  Tensor x = make(a, to_shape(d), DType::f64);
  for (int ax : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(ax));
    Reduced s = ref_reduce(a, d, {ax}, fold_sum);
    EXPECT_TRUE(
        matches(kiln::sum(x, {ax}), to_shape(s.shape_drop), DType::f64, s.vals, Tol{1e-12, 1e-11}));
    Reduced m = ref_reduce(a, d, {ax}, fold_max);
    EXPECT_TRUE(matches(kiln::max(x, {ax}), to_shape(m.shape_drop), DType::f64, m.vals));
    Reduced am = ref_reduce(a, d, {ax}, fold_argmax);
    EXPECT_TRUE(matches(kiln::argmax(x, ax), to_shape(am.shape_drop), DType::i64, am.vals));
  }
  EXPECT_NEAR(kiln::sum(x).item<double>(), fold_sum(a), 1e-9);
  EXPECT_EQ(kiln::argmax(x).item<int64_t>(), static_cast<int64_t>(fold_argmax(a)));
  EXPECT_EQ(kiln::min(x).item<double>(), fold_min(a));
}

TEST_F(Large, ReductionOfTransposedLargeTensor) {
  Rng rng;
  Vals a = rng.uniform(257 * 401, DType::f32, -1, 1);
  Tensor x = make(a, Shape{257, 401}, DType::f32);
  Tensor t = kiln::transpose(x, 0, 1); // (401, 257)
  // Row sums of the transpose are column sums of x.
  Reduced s = ref_reduce(a, {257, 401}, {0}, fold_sum);
  EXPECT_TRUE(matches(kiln::sum(t, {1}), Shape{401}, DType::f32, s.vals, Tol{1e-5, 1e-4}));
  Reduced m = ref_reduce(a, {257, 401}, {1}, fold_max);
  EXPECT_TRUE(matches(kiln::max(t, {0}), Shape{257}, DType::f32, m.vals));
}

TEST_F(Large, ElementwiseOnLargeNonContiguousViews) {
  Rng rng;
  Vals a = rng.uniform(300 * 350, DType::f32, -2, 2);
  Vals c = rng.uniform(350, DType::f32, -2, 2);
  Tensor x = make(a, Shape{300, 350}, DType::f32);
  Tensor col = make(c, Shape{350, 1}, DType::f32);
  Tensor t = kiln::transpose(x, 0, 1);     // (350, 300)
  Tensor s = kiln::slice(t, 1, 1, 300, 3); // (350, 100): x[3j+1][i]
  Tensor r = kiln::sigmoid(s) * kiln::expand(col, {350, 100}) + kiln::abs(s);
  Vals e(350 * 100);
  for (int i = 0; i < 350; ++i)
    for (int j = 0; j < 100; ++j) {
      double v = a[(3 * j + 1) * 350 + i];
      e[i * 100 + j] = 1 / (1 + std::exp(-v)) * c[i] + std::fabs(v);
    }
  EXPECT_TRUE(matches(r, Shape{350, 100}, DType::f32, e));
}

TEST_F(Large, SoftmaxLongRows) {
  Rng rng;
  for (DType t : {DType::f32, DType::f16}) {
    std::vector<int64_t> d{7, 3001};
    Vals a = rng.uniform(numel(d), t, -5, 5);
    Tensor x = make(a, to_shape(d), t);
    Tensor sm = kiln::softmax(x, -1);
    Vals rows = values(kiln::sum(sm.astype(DType::f64), {1}));
    EXPECT_TRUE(all_close(rows, Vals(7, 1.0), t == DType::f32 ? Tol{1e-5, 1e-5} : Tol{2e-2, 2e-2}))
        << name(t);
    // Spot-check against the reference.
    Vals ref(a.size());
    for (int i = 0; i < 7; ++i) {
      double m = -kInf, s = 0;
      for (int j = 0; j < 3001; ++j) m = std::max(m, a[i * 3001 + j]);
      for (int j = 0; j < 3001; ++j) s += std::exp(a[i * 3001 + j] - m);
      for (int j = 0; j < 3001; ++j) ref[i * 3001 + j] = std::exp(a[i * 3001 + j] - m) / s;
    }
    EXPECT_TRUE(all_close(values(sm), ref, t == DType::f32 ? Tol{1e-4, 1e-7} : Tol{2e-2, 1e-4}))
        << name(t);
  }
}

TEST_F(Large, BatchedMatmulOddSizes) {
  Rng rng;
  Vals a = rng.uniform(8 * 33 * 17, DType::f32, -1, 1);
  Vals b = rng.uniform(17 * 29, DType::f32, -1, 1);
  Tensor r =
      kiln::matmul(make(a, Shape{8, 33, 17}, DType::f32), make(b, Shape{17, 29}, DType::f32));
  Vals e(8 * 33 * 29, 0.0);
  for (int q = 0; q < 8; ++q)
    for (int i = 0; i < 33; ++i)
      for (int j = 0; j < 29; ++j)
        for (int k = 0; k < 17; ++k)
          e[(q * 33 + i) * 29 + j] += a[(q * 33 + i) * 17 + k] * b[k * 29 + j];
  EXPECT_TRUE(matches(r, Shape{8, 33, 29}, DType::f32, e, Tol{1e-5, 1e-5}));
}

TEST_F(Large, SixteenBitSumsAccumulateInFloat) {
  // torch accumulates f16/bf16 reductions in f32: summing 10000 ones gives 10000 (rounded to
  // the output type), not 2048 (f16) or 256 (bf16) as a 16-bit accumulator would.
  Tensor h = kiln::ones({10000}, DType::f16);
  EXPECT_EQ(kiln::sum(h).dtype(), DType::f16);
  EXPECT_EQ(kiln::sum(h).item<double>(), 10000.0);
  EXPECT_EQ(kiln::mean(h).item<double>(), 1.0);
  Tensor b = kiln::ones({10000}, DType::bf16);
  EXPECT_EQ(kiln::sum(b).item<double>(), quantize(DType::bf16, 10000.0));
  EXPECT_EQ(kiln::mean(b).item<double>(), 1.0);
  Tensor h2 = kiln::full({100, 300}, 0.5, DType::f16);
  EXPECT_TRUE(matches(kiln::sum(h2, {1}), Shape{100}, DType::f16, Vals(100, 150.0)));
  EXPECT_TRUE(matches(kiln::sum(h2, {0}), Shape{300}, DType::f16, Vals(300, 50.0)));
}

TEST_F(Large, Int64IsExactBeyondDoublePrecision) {
  const int64_t big = (int64_t{1} << 60) + 12345;
  std::vector<int64_t> v{big, -big, big + 1, 7};
  Tensor x = kiln::from_vector(v, Shape{4});
  EXPECT_EQ((x + 1).to_vector<int64_t>(), (std::vector<int64_t>{big + 1, -big + 1, big + 2, 8}));
  EXPECT_EQ((x - x).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(kiln::max(x).item<int64_t>(), big + 1);
  EXPECT_EQ(kiln::min(x).item<int64_t>(), -big);
  EXPECT_EQ(kiln::argmax(x).item<int64_t>(), 2);
  EXPECT_EQ(kiln::sum(x).item<int64_t>(), big + 8);
  EXPECT_EQ(kiln::maximum(x, int64_t{8}).to_vector<int64_t>(),
            (std::vector<int64_t>{big, 8, big + 1, 8}));
  // Integer scalars beyond 2^53 must stay exact (not pass through double).
  EXPECT_EQ((x == big + 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ((x > big).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ((x - big).to_vector<int64_t>(), (std::vector<int64_t>{0, -2 * big, 1, 7 - big}));
  EXPECT_EQ(kiln::full({2}, big, DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{big, big}));
  EXPECT_EQ(kiln::where(x > 0, x, int64_t{0}).to_vector<int64_t>(),
            (std::vector<int64_t>{big, 0, big + 1, 7}));
  Tensor y = kiln::from_vector(std::vector<int64_t>{3, 5}, Shape{2, 1});
  Tensor z = kiln::from_vector(std::vector<int64_t>{big, 1}, Shape{1, 2});
  EXPECT_EQ(kiln::matmul(kiln::reshape(z, {1, 2}), y).item<int64_t>(), 3 * big + 5);
}

TEST_F(Large, ArgmaxOverDtypes) {
  for (DType t : numeric_dtypes()) {
    Rng rng(static_cast<uint32_t>(t) + 17);
    std::vector<int64_t> d{6, 9};
    Vals a = is_float(t) ? rng.uniform(54, t, -50, 50) : rng.uniform(54, t, -1000, 1000);
    Tensor x = make(a, to_shape(d), t);
    for (int ax : {0, 1}) {
      Reduced r = ref_reduce(a, d, {ax}, fold_argmax);
      EXPECT_TRUE(matches(kiln::argmax(x, ax), to_shape(r.shape_drop), DType::i64, r.vals))
          << name(t) << " axis " << ax;
    }
    EXPECT_EQ(kiln::argmax(x).item<int64_t>(), static_cast<int64_t>(fold_argmax(a))) << name(t);
  }
}

} // namespace

// Ops a model needs beyond the basic catalogue: log1p, zeros_like / ones_like, stack, var /
// stddev, argmin, and compound assignment (issue 18). Each against a double-precision
// reference on the test device, plus the errors they raise.
#include "reference.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace kiln;
using namespace kt;

namespace {

class ModelOps : public OpsTest {};

// Row-major [rows, cols] values; the reference statistic of each row (axis 1) or column (0).
Vals per_axis(const Vals& v, int64_t rows, int64_t cols, int axis,
              double (*stat)(const Vals&, int64_t correction), int64_t correction) {
  Vals out;
  const int64_t outer = axis == 1 ? rows : cols, inner = axis == 1 ? cols : rows;
  for (int64_t o = 0; o < outer; ++o) {
    Vals slice;
    for (int64_t i = 0; i < inner; ++i)
      slice.push_back(axis == 1 ? v[o * cols + i] : v[i * cols + o]);
    out.push_back(stat(slice, correction));
  }
  return out;
}

double variance(const Vals& v, int64_t correction) {
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const int64_t divisor = std::max<int64_t>(0, static_cast<int64_t>(v.size()) - correction);
  return ss / static_cast<double>(divisor);
}

} // namespace

TEST_F(ModelOps, Log1pIsAccurateForSmallValues) {
  Tensor x = from_vector<float>({1e-10f, -1e-7f, 0.5f, 3.0f, -0.5f});
  Vals want = {std::log1p(1e-10), std::log1p(-1e-7), std::log1p(0.5), std::log1p(3.0),
               std::log1p(-0.5)};
  EXPECT_TRUE(matches(log1p(x), {5}, DType::f32, want, Tol{1e-6, 0}));
  // Where log(1 + x) rounds 1 + x to 1 and loses everything.
  EXPECT_EQ(log(x + 1.0f).to_vector<float>()[0], 0.0f);
  EXPECT_TRUE(matches(log1p(from_vector<int32_t>({0, 1, 9})), {3}, DType::f32,
                      {0.0, std::log(2.0), std::log(10.0)}));
}

TEST_F(ModelOps, ZerosAndOnesLikeKeepShapeDtypeAndDevice) {
  Tensor a = randn({3, 4}, DType::f16);
  Tensor z = zeros_like(a), o = ones_like(a, DType::i32);
  EXPECT_TRUE(matches(z, {3, 4}, DType::f16, Vals(12, 0.0)));
  EXPECT_TRUE(matches(o, {3, 4}, DType::i32, Vals(12, 1.0)));
  EXPECT_EQ(z.device(), a.device());
  EXPECT_KILN_ERROR("[zeros_like]", zeros_like(Tensor{}));
}

TEST_F(ModelOps, StackAddsADim) {
  Tensor a = from_vector<float>({1, 2, 3}), b = from_vector<float>({4, 5, 6});
  EXPECT_TRUE(matches(stack({a, b}), {2, 3}, DType::f32, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(matches(stack({a, b}, -1), {3, 2}, DType::f32, {1, 4, 2, 5, 3, 6}));
  EXPECT_TRUE(matches(stack({a, b}, 1), {3, 2}, DType::f32, {1, 4, 2, 5, 3, 6}));
  EXPECT_TRUE(matches(stack({full({}, 7.0)}), {1}, DType::f32, {7}));
  EXPECT_KILN_ERROR(
      "[stack] every tensor must have one shape: tensor 0 has (3,), tensor 1 has (2,)",
      stack({a, from_vector<float>({1, 2})}));
  EXPECT_KILN_ERROR("[stack] needs at least one tensor", stack({}));
  EXPECT_KILN_ERROR("[stack]", stack({a, b}, 2));
}

TEST_F(ModelOps, VarAndStddevMatchTorchsDefinitions) {
  Rng rng;
  const int64_t rows = 7, cols = 33;
  Vals v = rng.uniform(rows * cols, DType::f64, -3, 3);
  Tensor x = make(v, {rows, cols}, DType::f64);
  for (int64_t correction : {int64_t(0), int64_t(1)}) {
    for (int axis : {0, 1}) {
      Vals want = per_axis(v, rows, cols, axis, variance, correction);
      const Shape s = axis == 1 ? Shape{rows} : Shape{cols};
      EXPECT_TRUE(matches(var(x, {axis}, correction), s, DType::f64, want))
          << "axis " << axis << " correction " << correction;
      Vals sd;
      for (double w : want) sd.push_back(std::sqrt(w));
      EXPECT_TRUE(matches(stddev(x, {axis}, correction), s, DType::f64, sd));
    }
    EXPECT_TRUE(matches(var(x, {}, correction), {}, DType::f64, {variance(v, correction)}));
  }
  EXPECT_TRUE(matches(var(cast(x, DType::f32), {1}, 1, true), {rows, 1}, DType::f32,
                      per_axis(v, rows, cols, 1, variance, 1)));
  // One element with Bessel's correction divides 0 by 0, as torch.var: NaN.
  EXPECT_TRUE(std::isnan(var(from_vector<float>({2.5f})).item<float>()));
  EXPECT_TRUE(std::isinf(var(from_vector<float>({1, 2}), {}, 2).item<float>()));
  EXPECT_KILN_ERROR("[var] needs a floating-point input, got i32",
                    var(from_vector<int32_t>({1, 2})));
  EXPECT_KILN_ERROR("[var] dim 2 is out of range", var(x, {2}));
}

TEST_F(ModelOps, ArgminFindsTheFirstMinimumOfEveryDtype) {
  Tensor f = from_vector<float>({3, -1, 4, -1, 5, 9, 2, 6}).reshape({2, 4});
  EXPECT_TRUE(matches(argmin(f), {}, DType::i64, {1}));
  EXPECT_TRUE(matches(argmin(f, 1), {2}, DType::i64, {1, 2}));
  EXPECT_TRUE(matches(argmin(f, 0, true), {1, 4}, DType::i64, {0, 0, 1, 0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(matches(argmin(from_vector<float>({1, nan, -5})), {}, DType::i64, {1}));
  const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  EXPECT_TRUE(matches(argmin(from_vector<int32_t>({hi, 0, lo, lo})), {}, DType::i64, {2}));
  EXPECT_TRUE(matches(argmax(from_vector<int32_t>({lo, hi, 0, hi})), {}, DType::i64, {1}));
  EXPECT_TRUE(matches(argmin(from_vector<int64_t>({5, std::numeric_limits<int64_t>::max()})), {},
                      DType::i64, {0}));
  EXPECT_TRUE(matches(argmin(from_vector<bool>({true, false, false})), {}, DType::i64, {1}));
  EXPECT_TRUE(matches(argmin(cast(f, DType::bf16), 1), {2}, DType::i64, {1, 2}));
  EXPECT_KILN_ERROR("[argmin] cannot reduce an empty tensor", argmin(zeros({0})));
  EXPECT_KILN_ERROR("[argmin] cannot reduce over the zero-size dim 1", argmin(zeros({2, 0}), 1));
  EXPECT_KILN_ERROR("[argmin]", argmin(f, 3));
}

TEST_F(ModelOps, CompoundAssignmentRebindsTheHandle) {
  Tensor w = from_vector<float>({1, 2, 3});
  Tensor before = w; // another handle to the old value keeps it
  Tensor g = from_vector<float>({0.5f, 0.5f, 0.5f});
  w -= 2.0f * g;
  w *= 2;
  w += g;
  w /= from_vector<float>({1, 2, 4});
  EXPECT_TRUE(matches(w, {3}, DType::f32, {0.5, 1.25, 1.125}));
  EXPECT_TRUE(matches(before, {3}, DType::f32, {1, 2, 3}));
  // A wider type of w's category is cast back to w's; an integer w takes no float result.
  Tensor h = from_vector<float>({1, 2});
  h += from_vector<double>({0.25, 0.5});
  EXPECT_TRUE(matches(h, {2}, DType::f32, {1.25, 2.5}));
  Tensor i = from_vector<int32_t>({1, 2});
  i += from_vector<int64_t>({10, 20});
  EXPECT_TRUE(matches(i, {2}, DType::i32, {11, 22}));
  EXPECT_KILN_ERROR("[operator+=] the result type f32 cannot be cast to the assigned tensor's "
                    "type i32",
                    i += 0.5);
  EXPECT_TRUE(matches(i, {2}, DType::i32, {11, 22})); // unchanged by the failed call
  EXPECT_KILN_ERROR("[operator*=] the result has shape (2, 2), the assigned tensor (2,); compound "
                    "assignment cannot change a tensor's shape",
                    i *= from_vector<int32_t>({1, 2}).reshape({2, 1}));
  Tensor undefined;
  EXPECT_KILN_ERROR("[operator-=]", undefined -= 1);
}

TEST_F(ModelOps, CompoundAssignmentInALoopUpdatesInPlace) {
  Tensor w = zeros({1024});
  Tensor g = ones({1024});
  eval(w, g);
  reset_stats();
  for (int step = 0; step < 10; ++step) {
    w -= 0.5f * g;
    eval(w);
  }
  EXPECT_GE(stats().buffers_reused, 9); // the old w dies with each step: its buffer is reused
  EXPECT_TRUE(matches(w, {1024}, DType::f32, Vals(1024, -5.0)));
}

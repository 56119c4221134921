// The same op semantics in eager mode (set_eager(true): one kernel per op as it is recorded).
// Each test runs under an EagerGuard, so eager mode is restored even when an assertion fails.
#include "reference.h"

namespace {

using namespace kt;

class Eager : public OpsTestP<DType> {};

TEST_P(Eager, UnaryBinaryScalarChain) {
  EagerGuard g(true);
  DType t = GetParam();
  Rng rng;
  Shape s{5, 6};
  Vals a = rng.uniform(30, t, -2, 2), b = rng.nonzero(30, t, 0.5, 2);
  Tensor x = make(a, s, t), y = make(b, s, t);
  Tensor z = kiln::tanh(x) * y;
  EXPECT_TRUE(z.is_realized());
  Tensor w = 1 / y + kiln::sigmoid(z) - kiln::maximum(x, 0.5) + kiln::gelu(x) * 2;
  Vals e(30);
  for (size_t i = 0; i < 30; ++i) {
    double zz = std::tanh(a[i]) * b[i];
    e[i] = 1 / b[i] + 1 / (1 + std::exp(-zz)) - std::max(a[i], 0.5) +
           0.5 * a[i] * (1 + std::erf(a[i] / std::sqrt(2.0))) * 2;
  }
  Tol tol = tol_for(t);
  if (t == DType::f16 || t == DType::bf16) tol = {3e-2, 5e-2}; // each op rounds to 16 bits
  EXPECT_TRUE(matches(w, s, t, e, tol));
}

TEST_P(Eager, ReductionsAndSoftmax) {
  EagerGuard g(true);
  DType t = GetParam();
  Rng rng;
  std::vector<int64_t> d{3, 4, 5};
  Vals a = rng.uniform(60, t, -1, 1);
  Tensor x = make(a, to_shape(d), t);
  Tol tol = t == DType::f32   ? Tol{1e-5, 1e-4}
            : t == DType::f64 ? Tol{1e-12, 1e-12}
                              : Tol{1e-2, 3e-2};
  Reduced r = ref_reduce(a, d, {0, -1}, fold_sum);
  EXPECT_TRUE(matches(kiln::sum(x, {0, -1}, true), to_shape(r.shape_keep), t, r.vals, tol));
  Reduced m = ref_reduce(a, d, {1}, fold_mean);
  EXPECT_TRUE(matches(kiln::mean(x, {1}), to_shape(m.shape_drop), t, m.vals, tol));
  Reduced mx = ref_reduce(a, d, {2}, fold_max);
  EXPECT_TRUE(matches(kiln::max(x, {2}), to_shape(mx.shape_drop), t, mx.vals, Tol{0, 0}));
  Reduced am = ref_reduce(a, d, {1}, fold_argmax);
  EXPECT_TRUE(matches(kiln::argmax(x, 1), to_shape(am.shape_drop), DType::i64, am.vals));
  Tensor sm = kiln::softmax(x, 1);
  Vals rows = values(kiln::sum(sm.astype(DType::f64), {1}));
  EXPECT_TRUE(all_close(rows, Vals(15, 1.0), Tol{2e-2, 2e-2}));
}

TEST_P(Eager, ViewsAndMatmul) {
  EagerGuard g(true);
  DType t = GetParam();
  Rng rng;
  Vals a = rng.uniform(24, t, -1, 1), b = rng.uniform(20, t, -1, 1);
  Tensor x = make(a, Shape{4, 6}, t);  // transposed below: (6, 4)
  Tensor y = make(b, Shape{2, 10}, t); // reshaped below: (4, 5)
  Tensor xt = kiln::transpose(x, 0, 1);
  Tensor yr = kiln::reshape(y, {4, 5});
  Tensor p = kiln::matmul(xt, yr); // (6, 5)
  Vals e(30, 0.0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 4; ++k) e[i * 5 + j] += a[k * 6 + i] * b[k * 5 + j];
  Tol tol = t == DType::f32   ? Tol{1e-5, 1e-5}
            : t == DType::f64 ? Tol{1e-12, 1e-12}
                              : Tol{1e-2, 3e-2};
  EXPECT_TRUE(matches(p, Shape{6, 5}, t, e, tol));
  // slice / expand / concat / chunk.
  Tensor sl = kiln::slice(x, 1, 0, 6, 3);                                            // (4, 2)
  Tensor cat = kiln::concat({sl, kiln::expand(kiln::slice(x, 1, 5, 6), {4, 2})}, 1); // (4, 4)
  Vals ec(16);
  for (int i = 0; i < 4; ++i) {
    ec[i * 4 + 0] = a[i * 6 + 0];
    ec[i * 4 + 1] = a[i * 6 + 3];
    ec[i * 4 + 2] = a[i * 6 + 5];
    ec[i * 4 + 3] = a[i * 6 + 5];
  }
  EXPECT_TRUE(matches(cat, Shape{4, 4}, t, ec, Tol{0, 0}));
  auto parts = kiln::chunk(cat, 2, 0);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(matches(parts[1] * 1, Shape{2, 4}, t, Vals(ec.begin() + 8, ec.end()), Tol{0, 0}));
}

TEST_P(Eager, CompareWhereCast) {
  EagerGuard g(true);
  DType t = GetParam();
  Rng rng;
  Vals a = rng.pick(20, {-1.5, -1, 0, 1, 2.5});
  Tensor x = make(a, Shape{20}, t);
  Tensor pos = x > 0;
  EXPECT_TRUE(matches(pos, Shape{20}, DType::boolean,
                      ref_unary(a, [](double v) { return v > 0 ? 1.0 : 0.0; })));
  Tensor w = kiln::where(pos, x, kiln::neg(x));
  EXPECT_TRUE(matches(w, Shape{20}, t, ref_unary(a, [](double v) { return std::fabs(v); })));
  EXPECT_TRUE(matches(kiln::cast(x, DType::i32), Shape{20}, DType::i32,
                      ref_unary(a, [](double v) { return std::trunc(v); })));
  EXPECT_TRUE(matches(kiln::logical_not(x), Shape{20}, DType::boolean,
                      ref_unary(a, [](double v) { return v == 0 ? 1.0 : 0.0; })));
}

INSTANTIATE_TEST_SUITE_P(Ops, Eager, ::testing::ValuesIn(float_dtypes()),
                         [](const auto& info) { return name(info.param); });

class EagerMisc : public OpsTest {};

TEST_F(EagerMisc, IntegerOpsAndBroadcast) {
  EagerGuard g(true);
  Rng rng;
  Vals a = rng.uniform(4, DType::i32, -50, 50), b = rng.uniform(5, DType::i64, -50, 50);
  Tensor x = make(a, Shape{4, 1}, DType::i32), y = make(b, Shape{1, 5}, DType::i64);
  Tensor r = x * y - 3;
  EXPECT_TRUE(matches(
      r, Shape{4, 5}, DType::i64,
      ref_binary(a, Shape{4, 1}, b, Shape{1, 5}, [](double u, double v) { return u * v - 3; })));
  Tensor s = kiln::sum(r);
  EXPECT_EQ(s.dtype(), DType::i64);
  Vals rv = values(r);
  EXPECT_EQ(s.item<int64_t>(), static_cast<int64_t>(fold_sum(rv)));
  Tensor q = x / 2;
  EXPECT_TRUE(matches(q, Shape{4, 1}, DType::f32, ref_unary(a, [](double v) { return v / 2; })));
}

TEST_F(EagerMisc, SwitchingModesMidGraph) {
  // Values recorded lazily, then consumed after switching to eager, and back.
  Rng rng;
  Vals a = rng.uniform(12, DType::f64, -1, 1);
  Tensor x = make(a, Shape{3, 4}, DType::f64);
  Tensor lazy = kiln::exp(x) + 1;
  Tensor mixed;
  {
    EagerGuard g(true);
    mixed = kiln::log(lazy) * 2;
    EXPECT_TRUE(mixed.is_realized());
  }
  Tensor back = mixed - x;
  Vals e = ref_unary(a, [](double v) { return 2 * std::log(std::exp(v) + 1) - v; });
  EXPECT_TRUE(matches(back, Shape{3, 4}, DType::f64, e));
  EXPECT_TRUE(matches(lazy, Shape{3, 4}, DType::f64,
                      ref_unary(a, [](double v) { return std::exp(v) + 1; })));
}

} // namespace

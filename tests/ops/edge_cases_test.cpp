// Edge cases: empty tensors, 0-d tensors, size-1 dims, NaN/inf propagation, overflow, long
// chains and forced flushes.
#include "reference.h"

namespace {

using namespace kt;

class EdgeEmpty : public OpsTest {};

TEST_F(EdgeEmpty, Elementwise) {
  Tensor e = kiln::ones({0, 3});
  EXPECT_EQ(e.numel(), 0);
  Tensor r = kiln::exp(e) * 2 + kiln::ones({3});
  EXPECT_EQ(r.shape(), (Shape{0, 3}));
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_TRUE(values(r).empty());
  Tensor b = kiln::zeros({0, 1}) + kiln::ones({1, 4});
  EXPECT_EQ(b.shape(), (Shape{0, 4}));
  EXPECT_TRUE(values(b).empty());
  EXPECT_EQ((e < 1).dtype(), DType::boolean);
  EXPECT_EQ((e < 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(kiln::where(e > 0, e, 1.0).shape(), (Shape{0, 3}));
  EXPECT_EQ(kiln::cast(e, DType::i32).shape(), (Shape{0, 3}));
  EXPECT_TRUE(kiln::cast(e, DType::i32).to_vector<int32_t>().empty());
}

TEST_F(EdgeEmpty, Reductions) {
  Tensor e = kiln::ones({0, 3});
  Tensor s = kiln::sum(e);
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.item<double>(), 0.0);
  EXPECT_TRUE(matches(kiln::sum(e, {0}), Shape{3}, DType::f32, {0, 0, 0}));
  EXPECT_EQ(kiln::sum(e, {1}).shape(), (Shape{0}));
  EXPECT_TRUE(matches(kiln::sum(e, {0}, true), Shape{1, 3}, DType::f32, {0, 0, 0}));
  EXPECT_EQ(kiln::sum(kiln::ones({0}, DType::i32)).item<int64_t>(), 0);
  EXPECT_TRUE(std::isnan(kiln::mean(e).item<double>())) << "mean of empty is NaN (torch)";
  EXPECT_KILN_ERROR("[max]", kiln::max(e));
  EXPECT_KILN_ERROR("[max]", kiln::max(e, {0}));
  EXPECT_KILN_ERROR("[min]", kiln::min(e, {0}));
  EXPECT_EQ(kiln::max(e, {1}).shape(), (Shape{0}));
  EXPECT_EQ(kiln::min(e, {1}).shape(), (Shape{0}));
  EXPECT_EQ(kiln::softmax(e, 1).shape(), (Shape{0, 3}));
}

TEST_F(EdgeEmpty, MatmulViewsConcat) {
  Tensor a = kiln::ones({0, 3}), b = kiln::ones({3, 4});
  EXPECT_EQ(kiln::matmul(a, b).shape(), (Shape{0, 4}));
  Tensor c = kiln::ones({2, 0}), d = kiln::ones({0, 3});
  EXPECT_TRUE(matches(kiln::matmul(c, d), Shape{2, 3}, DType::f32, Vals(6, 0.0)))
      << "an empty inner dimension gives zeros";
  EXPECT_EQ(kiln::transpose(a, 0, 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(kiln::reshape(a, {3, -1}).shape(), (Shape{3, 0}));
  Tensor x = make({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::f32);
  EXPECT_TRUE(matches(kiln::concat({a, x, a}, 0), Shape{2, 3}, DType::f32, {1, 2, 3, 4, 5, 6}));
  Tensor empty_slice = kiln::slice(x, 1, 2, 2);
  EXPECT_EQ(empty_slice.shape(), (Shape{2, 0}));
  EXPECT_TRUE(values(empty_slice * 3).empty());
}

class EdgeZeroDim : public OpsTest {};

TEST_F(EdgeZeroDim, OpsOnScalars) {
  Tensor s = make({-2.5}, Shape{}, DType::f64);
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<double>(), -2.5);
  EXPECT_EQ(kiln::abs(s).item<double>(), 2.5);
  EXPECT_EQ((s * s + 1).item<double>(), 7.25);
  EXPECT_EQ((s * s).shape(), Shape{});
  EXPECT_EQ(kiln::sum(s).shape(), Shape{});
  EXPECT_EQ(kiln::sum(s).item<double>(), -2.5);
  EXPECT_EQ(kiln::max(s).item<double>(), -2.5);
  EXPECT_EQ(kiln::argmax(s).item<int64_t>(), 0);
  EXPECT_EQ(kiln::unsqueeze(s, 0).shape(), (Shape{1}));
  EXPECT_EQ(kiln::reshape(s, {1, 1}).shape(), (Shape{1, 1}));
  Tensor ex = kiln::expand(s, {2, 3});
  EXPECT_TRUE(matches(ex, Shape{2, 3}, DType::f64, Vals(6, -2.5)));
}

TEST_F(EdgeZeroDim, SizeOneDims) {
  Rng rng;
  Vals v = rng.uniform(1, DType::f32, 1, 2);
  Tensor x = make(v, Shape{1, 1, 1}, DType::f32);
  EXPECT_EQ(kiln::sum(x, {1}).shape(), (Shape{1, 1}));
  EXPECT_TRUE(matches(kiln::sum(x), Shape{}, DType::f32, v));
  EXPECT_TRUE(matches(kiln::softmax(x, 1), Shape{1, 1, 1}, DType::f32, {1}));
  EXPECT_TRUE(matches(kiln::log_softmax(x, -1), Shape{1, 1, 1}, DType::f32, {0}));
  EXPECT_EQ(x.item<float>(), static_cast<float>(v[0]));
  Vals w = rng.uniform(5, DType::f32, -1, 1);
  Tensor y = make(w, Shape{5, 1}, DType::f32);
  EXPECT_TRUE(matches(kiln::max(y, {1}), Shape{5}, DType::f32, w));
  EXPECT_TRUE(matches(kiln::argmax(y, 1), Shape{5}, DType::i64, Vals(5, 0.0)));
  EXPECT_TRUE(matches(
      kiln::matmul(y, kiln::transpose(y, 0, 1)), Shape{5, 5}, DType::f32,
      ref_binary(w, Shape{5, 1}, w, Shape{1, 5}, [](double a, double b) { return a * b; })));
}

class EdgeSpecialValues : public OpsTestP<DType> {};

TEST_P(EdgeSpecialValues, UnaryInfNaN) {
  DType t = GetParam();
  Vals in{kInf, -kInf, 0, -1, kNaN};
  Tensor x = make(in, Shape{5}, t);
  auto check = [&](const Tensor& r, Vals e, const char* what) {
    EXPECT_TRUE(matches(r, Shape{5}, t, e)) << what;
  };
  check(kiln::exp(x), {kInf, 0, 1, std::exp(-1.0), kNaN}, "exp");
  check(kiln::log(x), {kInf, kNaN, -kInf, kNaN, kNaN}, "log");
  check(kiln::sqrt(x), {kInf, kNaN, 0, kNaN, kNaN}, "sqrt");
  check(kiln::rsqrt(x), {0, kNaN, kInf, kNaN, kNaN}, "rsqrt");
  check(kiln::tanh(x), {1, -1, 0, std::tanh(-1.0), kNaN}, "tanh");
  check(kiln::sigmoid(x), {1, 0, 0.5, 1 / (1 + std::exp(1.0)), kNaN}, "sigmoid");
  check(kiln::abs(x), {kInf, kInf, 0, 1, kNaN}, "abs");
  check(kiln::neg(x), {-kInf, kInf, 0, 1, kNaN}, "neg");
  check(1 / x, {0, 0, kInf, -1, kNaN}, "1 / x");
  check(x - x, {kNaN, kNaN, 0, 0, kNaN}, "x - x");
  check(x * 0, {kNaN, kNaN, 0, 0, kNaN}, "x * 0");
  check(kiln::clamp(x, -0.5, 0.5), {0.5, -0.5, 0, -0.5, kNaN}, "clamp propagates NaN");
}

TEST_P(EdgeSpecialValues, NaNPropagatesThroughMaxMin) {
  DType t = GetParam();
  Tensor x = make({1, kNaN, 3, -2}, Shape{4}, t);
  Tensor y = make({kNaN, 0, 5, -3}, Shape{4}, t);
  EXPECT_TRUE(matches(kiln::maximum(x, y), Shape{4}, t, {kNaN, kNaN, 5, -2}));
  EXPECT_TRUE(matches(kiln::maximum(y, x), Shape{4}, t, {kNaN, kNaN, 5, -2}));
  EXPECT_TRUE(matches(kiln::minimum(x, y), Shape{4}, t, {kNaN, kNaN, 3, -3}));
  EXPECT_TRUE(matches(kiln::minimum(y, x), Shape{4}, t, {kNaN, kNaN, 3, -3}));
  EXPECT_TRUE(std::isnan(kiln::max(x).item<double>()));
  EXPECT_TRUE(std::isnan(kiln::min(x).item<double>()));
  Tensor m = make({1, 2, 3, kNaN, 4, 5}, Shape{2, 3}, t);
  EXPECT_TRUE(matches(kiln::max(m, {1}), Shape{2}, t, {3, kNaN}));
  EXPECT_TRUE(matches(kiln::min(m, {0}), Shape{3}, t, {kNaN, 2, 3}));
  EXPECT_TRUE(std::isnan(kiln::sum(m).item<double>()));
  // Comparisons with NaN: all false except ne.
  Tensor n = make({kNaN}, Shape{1}, t);
  EXPECT_FALSE((n == n).item<bool>());
  EXPECT_TRUE((n != n).item<bool>());
  EXPECT_FALSE((n < 1).item<bool>());
  EXPECT_FALSE((n >= 1).item<bool>());
  // Inf arithmetic.
  Tensor inf = make({kInf, -kInf}, Shape{2}, t);
  EXPECT_TRUE(matches(kiln::sum(inf), Shape{}, t, {kNaN}));
  EXPECT_TRUE(matches(inf + 1, Shape{2}, t, {kInf, -kInf}));
  EXPECT_TRUE(matches(kiln::max(inf), Shape{}, t, {kInf}));
}

INSTANTIATE_TEST_SUITE_P(Ops, EdgeSpecialValues, ::testing::ValuesIn(float_dtypes()),
                         [](const auto& info) { return name(info.param); });

class EdgeNumerics : public OpsTest {};

TEST_F(EdgeNumerics, OverflowAndDivisionByZero) {
  Tensor h = make({60000, 1}, Shape{2}, DType::f16);
  EXPECT_TRUE(matches(h * 2, Shape{2}, DType::f16, {kInf, 2}));
  EXPECT_TRUE(
      matches(kiln::exp(make({12, 0}, Shape{2}, DType::f16)), Shape{2}, DType::f16, {kInf, 1}));
  EXPECT_TRUE(
      matches(kiln::exp(make({100, -200}, Shape{2}, DType::f32)), Shape{2}, DType::f32, {kInf, 0}));
  // Integer true division by zero: f32 inf/nan, no crash.
  Tensor a = make({1, -1, 0}, Shape{3}, DType::i32);
  Tensor z = make({0, 0, 0}, Shape{3}, DType::i32);
  EXPECT_TRUE(matches(a / z, Shape{3}, DType::f32, {kInf, -kInf, kNaN}));
  EXPECT_TRUE(matches(1 / z, Shape{3}, DType::f32, {kInf, kInf, kInf}));
  EXPECT_TRUE(
      matches(make({2, -3}, Shape{2}, DType::f64) / 0.0, Shape{2}, DType::f64, {kInf, -kInf}));
}

TEST_F(EdgeNumerics, SoftmaxIsStableForLargeInputs) {
  Tensor x = make({1000, 1001, 1002, -1000, -1001, -1002}, Shape{2, 3}, DType::f32);
  double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  Vals sm{std::exp(-2.0) / z, std::exp(-1.0) / z, 1 / z, 1 / z,
          std::exp(-1.0) / z, std::exp(-2.0) / z};
  EXPECT_TRUE(matches(kiln::softmax(x, 1), Shape{2, 3}, DType::f32, sm));
  Vals ls = ref_unary(sm, [](double v) { return std::log(v); });
  EXPECT_TRUE(matches(kiln::log_softmax(x, 1), Shape{2, 3}, DType::f32, ls));
  Tensor h = make({60000, 60000, -60000}, Shape{3}, DType::f16);
  EXPECT_TRUE(matches(kiln::softmax(h), Shape{3}, DType::f16, {0.5, 0.5, 0}));
  // -inf entries get probability 0, the rest still sum to 1.
  Tensor m = make({-kInf, 0, 0}, Shape{3}, DType::f64);
  EXPECT_TRUE(matches(kiln::softmax(m), Shape{3}, DType::f64, {0, 0.5, 0.5}));
  EXPECT_TRUE(
      matches(kiln::log_softmax(m), Shape{3}, DType::f64, {-kInf, std::log(0.5), std::log(0.5)}));
}

TEST_F(EdgeNumerics, SigmoidAndGeluTails) {
  Tensor x = make({-100, 100, -30, 30}, Shape{4}, DType::f32);
  Vals s = values(kiln::sigmoid(x));
  EXPECT_NEAR(s[0], 0.0, 1e-30);
  EXPECT_EQ(s[1], 1.0);
  for (double v : s) EXPECT_TRUE(std::isfinite(v));
  Vals g = values(kiln::gelu(x));
  EXPECT_NEAR(g[0], 0.0, 1e-6);
  EXPECT_NEAR(g[1], 100.0, 1e-4);
  EXPECT_NEAR(g[2], 0.0, 1e-6);
  EXPECT_NEAR(g[3], 30.0, 1e-5);
}

TEST_F(EdgeNumerics, ClampWithLowAboveHighGivesHigh) {
  // torch.clamp: if min > max, every element becomes max.
  Tensor x = make({-5, 0, 5}, Shape{3}, DType::f32);
  EXPECT_TRUE(matches(kiln::clamp(x, 2.0, 1.0), Shape{3}, DType::f32, {1, 1, 1}));
}

class EdgeGraph : public OpsTest {};

TEST_F(EdgeGraph, LongChainAndSameTensorManyTimes) {
  Rng rng;
  Vals a = rng.uniform(16, DType::f64, -1, 1);
  Tensor x = make(a, Shape{16}, DType::f64);
  Tensor y = x;
  for (int i = 0; i < 300; ++i) y = y + x;
  EXPECT_TRUE(matches(y, Shape{16}, DType::f64, ref_unary(a, [](double v) { return 301 * v; })));
  Tensor z = x * x + x * x - x * x + kiln::exp(x) - kiln::exp(x);
  EXPECT_TRUE(matches(z, Shape{16}, DType::f64, ref_unary(a, [](double v) { return v * v; })));
}

TEST_F(EdgeGraph, ForcedFlushesKeepResultsCorrect) {
  kiln::set_pending_limits(4, int64_t{1} << 30);
  struct Restore {
    ~Restore() { kiln::set_pending_limits(10000, int64_t{1} << 30); }
  } restore;
  kiln::reset_stats();
  Rng rng;
  Vals a = rng.uniform(20, DType::f32, -1, 1);
  Tensor x = make(a, Shape{4, 5}, DType::f32);
  Tensor y = x;
  std::vector<Tensor> keep;
  for (int i = 0; i < 20; ++i) {
    y = kiln::tanh(y) * 0.5 + x;
    keep.push_back(y);
  }
  Vals e = a;
  std::vector<Vals> all;
  for (int i = 0; i < 20; ++i) {
    for (size_t k = 0; k < e.size(); ++k) e[k] = std::tanh(e[k]) * 0.5 + a[k];
    all.push_back(e);
  }
  EXPECT_GT(kiln::stats().auto_flushes, 0) << "the node limit should have forced flushes";
  for (int i = 0; i < 20; i += 7)
    EXPECT_TRUE(matches(keep[i], Shape{4, 5}, DType::f32, all[i])) << "step " << i;
  EXPECT_TRUE(matches(y, Shape{4, 5}, DType::f32, all[19]));
}

TEST_F(EdgeGraph, DroppedPendingWorkNeverRuns) {
  Tensor x = kiln::ones({8});
  kiln::eval(x);
  kiln::reset_stats();
  { Tensor unused = kiln::exp(x) * 3; }
  Tensor used = x + 1;
  EXPECT_TRUE(matches(used, Shape{8}, DType::f32, Vals(8, 2.0)));
  EXPECT_GT(kiln::stats().nodes_dropped, 0);
}

TEST_F(EdgeGraph, HandlesCopyMoveAndMetadata) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::f32);
  Tensor c = x; // copy shares the node
  EXPECT_EQ(c.node(), x.node());
  Tensor m = std::move(c);
  EXPECT_FALSE(c.defined()); // NOLINT(bugprone-use-after-move): moved-from is documented empty
  EXPECT_EQ(m.node(), x.node());
  EXPECT_EQ(x.size(0), 2);
  EXPECT_EQ(x.size(1), 3);
  EXPECT_EQ(x.size(-1), 3);
  EXPECT_EQ(x.size(-2), 2);
  EXPECT_EQ(x.ndim(), 2);
  EXPECT_EQ(x.numel(), 6);
  EXPECT_EQ(x.device(), kt::test_device());
  EXPECT_EQ(x.to(kt::test_device()).node(), x.node()) << "to() the same device returns *this";
  Tensor y = x * 2;
  y = y + 1; // reassigning a handle to a value that depends on its old value
  EXPECT_TRUE(matches(y, Shape{2, 3}, DType::f32, {3, 5, 7, 9, 11, 13}));
}

TEST_F(EdgeGraph, EvalSeveralSharingASubgraph) {
  Rng rng;
  Vals a = rng.uniform(10, DType::f64, -1, 1);
  Tensor x = make(a, Shape{10}, DType::f64);
  Tensor shared = kiln::exp(x) + 1;
  Tensor p = shared * 2, q = kiln::log(shared), r = kiln::sum(shared);
  kiln::eval(p, q, r);
  EXPECT_TRUE(p.is_realized());
  EXPECT_TRUE(q.is_realized());
  EXPECT_TRUE(r.is_realized());
  EXPECT_TRUE(matches(p, Shape{10}, DType::f64,
                      ref_unary(a, [](double v) { return 2 * (std::exp(v) + 1); })));
  EXPECT_TRUE(matches(q, Shape{10}, DType::f64,
                      ref_unary(a, [](double v) { return std::log(std::exp(v) + 1); })));
  double s = 0;
  for (double v : a) s += std::exp(v) + 1;
  EXPECT_NEAR(r.item<double>(), s, 1e-12 * s);
  // sync() computes everything pending that has a handle.
  Tensor later = p - q;
  kiln::sync();
  EXPECT_TRUE(later.is_realized());
}

} // namespace

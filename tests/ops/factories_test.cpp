// Factories: zeros ones full arange from_vector from_data rand randn manual_seed; printing.
#include "reference.h"

namespace {

using namespace kt;

class Factories : public OpsTestP<DType> {};

TEST_P(Factories, ZerosOnesFull) {
  DType t = GetParam();
  Shape s{3, 5};
  Tensor z = kiln::zeros(s, t), o = kiln::ones(s, t);
  EXPECT_TRUE(matches(z, s, t, Vals(15, 0.0), Tol{0, 0}));
  EXPECT_TRUE(matches(o, s, t, Vals(15, 1.0), Tol{0, 0}));
  EXPECT_EQ(z.device(), kt::test_device());
  double v = t == DType::boolean ? 1 : (is_int(t) ? -7 : 2.5);
  kiln::Scalar sc = t == DType::boolean ? kiln::Scalar(true)
                    : is_int(t)         ? kiln::Scalar(-7)
                                        : kiln::Scalar(2.5);
  EXPECT_TRUE(matches(kiln::full(s, sc, t), s, t, Vals(15, v), Tol{0, 0}));
  // A value that needs rounding in the target type.
  if (is_float(t)) {
    Tensor f = kiln::full({4}, 0.1, t);
    EXPECT_TRUE(matches(f, Shape{4}, t, Vals(4, quantize(t, 0.1)), Tol{0, 0}));
  }
  // Factories compose with ops.
  EXPECT_TRUE(matches(kiln::ones(s, t) + kiln::ones(s, t) * 0, s,
                      t == DType::boolean ? DType::i64 : t, Vals(15, 1.0), Tol{0, 0}));
}

TEST_P(Factories, FromDataRoundTrip) {
  DType t = GetParam();
  Rng rng;
  Vals v = is_float(t) ? rng.uniform(24, t, -100, 100) : rng.uniform(24, t, -1000, 1000);
  Tensor x = make(v, Shape{2, 3, 4}, t);
  EXPECT_TRUE(matches(x, Shape{2, 3, 4}, t, quantize_all(t, v), Tol{0, 0}));
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.strides(), (Shape{12, 4, 1}));
}

TEST_P(Factories, DefaultDtypeShapeAndTypedToVector) {
  DType t = GetParam();
  EXPECT_EQ(kiln::zeros({2}).dtype(), DType::f32);
  EXPECT_EQ(kiln::ones({2}).dtype(), DType::f32);
  Tensor x = make({1, 0, 1, 1}, Shape{2, 2}, t);
  // to_vector converts like astype.
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1, 1}));
  // (to_vector<bool> cannot compile: std::vector<bool> has no data(); item<bool> works.)
  EXPECT_TRUE(kiln::slice(kiln::reshape(x, {4}), 0, 0, 1).item<bool>());
  EXPECT_FALSE(kiln::slice(kiln::reshape(x, {4}), 0, 1, 2).item<bool>());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 0, 1, 1}));
}

INSTANTIATE_TEST_SUITE_P(Ops, Factories, ::testing::ValuesIn(all_dtypes()),
                         [](const auto& info) { return name(info.param); });

class FactoriesMisc : public OpsTest {};

TEST_F(FactoriesMisc, FromVectorHostTypes) {
  Tensor f = kiln::from_vector(std::vector<float>{1.5f, -2, 3}, Shape{3, 1});
  EXPECT_TRUE(matches(f, Shape{3, 1}, DType::f32, {1.5, -2, 3}, Tol{0, 0}));
  Tensor d = kiln::from_vector(std::vector<double>{0.1, 0.2});
  EXPECT_TRUE(matches(d, Shape{2}, DType::f64, {0.1, 0.2}, Tol{0, 0}));
  Tensor i = kiln::from_vector(std::vector<int32_t>{-5, 7, 9, 11}, Shape{2, 2});
  EXPECT_TRUE(matches(i, Shape{2, 2}, DType::i32, {-5, 7, 9, 11}, Tol{0, 0}));
  Tensor l = kiln::from_vector(std::vector<int64_t>{1LL << 40, -3});
  EXPECT_EQ(l.to_vector<int64_t>(), (std::vector<int64_t>{1LL << 40, -3}));
  Tensor b = kiln::from_vector(std::vector<bool>{true, false, true});
  EXPECT_TRUE(matches(b, Shape{3}, DType::boolean, {1, 0, 1}, Tol{0, 0}));
  // The tensor owns a copy: changing the host vector afterwards changes nothing.
  std::vector<float> host{1, 2, 3};
  Tensor c = kiln::from_vector(host);
  host[0] = 100;
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST_F(FactoriesMisc, ArangeIntegerForms) {
  Tensor a = kiln::arange(5);
  EXPECT_TRUE(matches(a, Shape{5}, DType::i64, {0, 1, 2, 3, 4}, Tol{0, 0}));
  Tensor b = kiln::arange(2, 7);
  EXPECT_TRUE(matches(b, Shape{5}, DType::i64, {2, 3, 4, 5, 6}, Tol{0, 0}));
  Tensor c = kiln::arange(0, 10, 3);
  EXPECT_TRUE(matches(c, Shape{4}, DType::i64, {0, 3, 6, 9}, Tol{0, 0}));
  Tensor d = kiln::arange(4, DType::f32);
  EXPECT_TRUE(matches(d, Shape{4}, DType::f32, {0, 1, 2, 3}, Tol{0, 0}));
  Tensor e = kiln::arange(5, 0, -1);
  EXPECT_TRUE(matches(e, Shape{5}, DType::i64, {5, 4, 3, 2, 1}, Tol{0, 0}));
  Tensor f = kiln::arange(10, -3, -4, DType::i32);
  EXPECT_TRUE(matches(f, Shape{4}, DType::i32, {10, 6, 2, -2}, Tol{0, 0}));
  Tensor g = kiln::arange(0, DType::i64);
  EXPECT_EQ(g.shape(), (Shape{0}));
}

TEST_F(FactoriesMisc, ArangeFloatSteps) {
  Tensor a = kiln::arange(0.0, 1.0, 0.25, DType::f64);
  EXPECT_TRUE(matches(a, Shape{4}, DType::f64, {0, 0.25, 0.5, 0.75}));
  // numpy.arange length: ceil((stop - start) / step).
  Tensor b = kiln::arange(0.0, 1.0, 0.1, DType::f32);
  ASSERT_EQ(b.shape(), (Shape{10}));
  Vals eb(10);
  for (int i = 0; i < 10; ++i) eb[i] = i * 0.1;
  EXPECT_TRUE(matches(b, Shape{10}, DType::f32, eb));
  Tensor c = kiln::arange(1.0, -1.0, -0.5, DType::f64);
  EXPECT_TRUE(matches(c, Shape{4}, DType::f64, {1, 0.5, 0, -0.5}));
  Tensor d = kiln::arange(-2.5, 2.6, 1.25, DType::f32);
  EXPECT_TRUE(matches(d, Shape{5}, DType::f32, {-2.5, -1.25, 0, 1.25, 2.5}));
  Tensor e = kiln::arange(0.5, 3.0, 1.0, DType::f64); // 0.5 1.5 2.5
  EXPECT_TRUE(matches(e, Shape{3}, DType::f64, {0.5, 1.5, 2.5}));
  EXPECT_KILN_ERROR("[arange]", kiln::arange(0.0, 1.0, 0.0, DType::f32));
}

TEST_F(FactoriesMisc, RandUniformInUnitInterval) {
  kiln::manual_seed(1234);
  for (DType t : float_dtypes()) {
    Tensor r = kiln::rand({100000}, t);
    EXPECT_EQ(r.dtype(), t);
    EXPECT_EQ(r.shape(), (Shape{100000}));
    Vals v = values(r);
    double mn = *std::min_element(v.begin(), v.end());
    double mx = *std::max_element(v.begin(), v.end());
    EXPECT_GE(mn, 0.0) << name(t);
    EXPECT_LT(mx, 1.0) << name(t) << ": rand must stay in [0, 1)";
    double mean = fold_mean(v);
    EXPECT_NEAR(mean, 0.5, 0.01) << name(t);
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    var /= static_cast<double>(v.size());
    EXPECT_NEAR(var, 1.0 / 12, 0.005) << name(t);
    // Not degenerate: many distinct values.
    std::sort(v.begin(), v.end());
    int64_t distinct = std::unique(v.begin(), v.end()) - v.begin();
    EXPECT_GT(distinct, t == DType::f32 || t == DType::f64 ? 90000 : 100) << name(t);
  }
}

TEST_F(FactoriesMisc, RandnMoments) {
  kiln::manual_seed(99);
  for (DType t : {DType::f32, DType::f64}) {
    Vals v = values(kiln::randn({100000}, t));
    double mean = fold_mean(v);
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    double sd = std::sqrt(var / static_cast<double>(v.size()));
    EXPECT_NEAR(mean, 0.0, 0.02) << name(t);
    EXPECT_NEAR(sd, 1.0, 0.02) << name(t);
    // Tails exist but are sane: about 4.55% outside 2 sigma.
    int64_t out2 = std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) > 2; });
    EXPECT_NEAR(static_cast<double>(out2) / 1e5, 0.0455, 0.005) << name(t);
    for (double x : v) ASSERT_TRUE(std::isfinite(x));
  }
  Tensor h = kiln::randn({1000}, DType::f16);
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_NEAR(fold_mean(values(h)), 0.0, 0.15);
}

TEST_F(FactoriesMisc, ManualSeedReproducibility) {
  kiln::manual_seed(42);
  Vals a = values(kiln::rand({3, 100}));
  Vals a2 = values(kiln::randn({50}));
  kiln::manual_seed(42);
  Vals b = values(kiln::rand({3, 100}));
  Vals b2 = values(kiln::randn({50}));
  EXPECT_EQ(a, b) << "same seed, same values";
  EXPECT_EQ(a2, b2);
  kiln::manual_seed(43);
  Vals c = values(kiln::rand({3, 100}));
  EXPECT_NE(a, c) << "different seeds, different values";
  // Successive draws differ.
  kiln::manual_seed(42);
  Vals d1 = values(kiln::rand({300}));
  Vals d2 = values(kiln::rand({300}));
  EXPECT_EQ(d1, a);
  EXPECT_NE(d1, d2);
}

TEST_F(FactoriesMisc, RandIsTheSameLazyAndEager) {
  Vals lazy_a, lazy_b, eager_a, eager_b;
  {
    EagerGuard g(false);
    kiln::manual_seed(7);
    Tensor a = kiln::rand({8, 16});
    Tensor b = kiln::randn({100});
    // Evaluate in reverse order of creation: values depend on draw order, not on evaluation.
    lazy_b = values(b * 1);
    lazy_a = values(a + 0);
  }
  {
    EagerGuard g(true);
    ASSERT_TRUE(kiln::eager());
    kiln::manual_seed(7);
    Tensor a = kiln::rand({8, 16});
    Tensor b = kiln::randn({100});
    eager_a = values(a);
    eager_b = values(b);
  }
  EXPECT_FALSE(kiln::eager()) << "eager mode must be restored";
  EXPECT_EQ(lazy_a, eager_a);
  EXPECT_EQ(lazy_b, eager_b);
  // A dropped (never evaluated) draw still advances the stream the same way.
  kiln::manual_seed(7);
  { Tensor unused = kiln::rand({8, 16}); }
  Vals again_b = values(kiln::randn({100}));
  EXPECT_EQ(again_b, eager_b);
}

TEST_F(FactoriesMisc, EagerModeGivesSameResultsForOps) {
  Rng rng;
  Vals a = rng.uniform(30, DType::f32, -2, 2);
  Vals lazy, eager;
  {
    Tensor x = make(a, Shape{5, 6}, DType::f32);
    lazy = values(
        kiln::softmax(kiln::tanh(x) * 3 + kiln::transpose(kiln::transpose(x, 0, 1), 0, 1), 1));
  }
  {
    EagerGuard g(true);
    Tensor x = make(a, Shape{5, 6}, DType::f32);
    Tensor y = kiln::tanh(x) * 3;
    EXPECT_TRUE(y.is_realized()) << "eager mode computes each op when recorded";
    eager = values(kiln::softmax(y + kiln::transpose(kiln::transpose(x, 0, 1), 0, 1), 1));
  }
  EXPECT_TRUE(all_close(lazy, eager, Tol{1e-6, 1e-7}));
}

// ---- printing ------------------------------------------------------------------------------
TEST_F(FactoriesMisc, PrintSmallTensor) {
  Tensor t = kiln::from_vector(std::vector<float>{1.5f, -2.25f, 3.75f}, Shape{3});
  std::ostringstream os;
  os << t;
  std::string s = os.str();
  EXPECT_NE(s.find("1.5"), std::string::npos) << s;
  EXPECT_NE(s.find("-2.25"), std::string::npos) << s;
  EXPECT_NE(s.find("3.75"), std::string::npos) << s;
  EXPECT_NE(s.find("shape="), std::string::npos) << s;
  EXPECT_NE(s.find("f32"), std::string::npos) << s;
  EXPECT_NE(s.find("device=" + kt::test_device().str()), std::string::npos) << s;

  Tensor i = kiln::from_vector(std::vector<int32_t>{7, -12, 345, 6}, Shape{2, 2});
  std::ostringstream oi;
  oi << i;
  std::string si = oi.str();
  EXPECT_NE(si.find("-12"), std::string::npos) << si;
  EXPECT_NE(si.find("345"), std::string::npos) << si;
  EXPECT_NE(si.find("i32"), std::string::npos) << si;
  EXPECT_NE(si.find("(2, 2)"), std::string::npos) << si;

  // A pending value prints its computed values.
  std::ostringstream op;
  op << (i * 2);
  EXPECT_NE(op.str().find("690"), std::string::npos) << op.str();
  EXPECT_NE(op.str().find("-24"), std::string::npos) << op.str();

  std::ostringstream ob;
  ob << kiln::from_vector(std::vector<bool>{true, false});
  EXPECT_NE(ob.str().find("bool"), std::string::npos) << ob.str();
}

TEST_F(FactoriesMisc, PrintLargeTensorIsAbbreviated) {
  Tensor big = kiln::arange(100000, DType::f32) + 0.5;
  std::ostringstream os;
  os << big;
  std::string s = os.str();
  EXPECT_NE(s.find("..."), std::string::npos);
  EXPECT_LT(s.size(), 2000u) << "printed " << s.size() << " characters";
  EXPECT_NE(s.find("100000"), std::string::npos) << s; // the shape
  Tensor big2 = kiln::zeros({300, 400}, DType::i64);
  std::ostringstream o2;
  o2 << big2;
  EXPECT_NE(o2.str().find("..."), std::string::npos);
  EXPECT_LT(o2.str().size(), 3000u);
}

TEST_F(FactoriesMisc, ShapeAndDeviceStrings) {
  EXPECT_EQ((Shape{2, 3}).str(), "(2, 3)");
  EXPECT_EQ(Shape{}.str(), "()");
  EXPECT_EQ((Shape{2, 3, 4}).numel(), 24);
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ((Shape{0, 3}).numel(), 0);
  EXPECT_EQ(kiln::Device::cpu().str(), "cpu");
  EXPECT_TRUE(kiln::is_available(kiln::Device::cpu()));
  EXPECT_EQ(kiln::default_device(), kt::test_device()); // the fixture set it
}

} // namespace

// NumPy broadcasting of binary (and ternary) ops, and errors for incompatible shapes.
#include "reference.h"

namespace {

using namespace kt;

struct ShapePair {
  const char* name;
  Shape a, b, out;
};

const std::vector<ShapePair>& shape_pairs() {
  static const std::vector<ShapePair> ps{
      {"row_vs_matrix", {4, 5}, {5}, {4, 5}},
      {"row2d_vs_matrix", {4, 5}, {1, 5}, {4, 5}},
      {"column_vs_matrix", {4, 5}, {4, 1}, {4, 5}},
      {"matrix_vs_column", {4, 1}, {4, 5}, {4, 5}},
      {"scalar0d_vs_matrix", {}, {3, 4}, {3, 4}},
      {"matrix_vs_scalar0d", {3, 4}, {}, {3, 4}},
      {"scalar0d_vs_scalar0d", {}, {}, {}},
      {"outer", {4, 1}, {1, 6}, {4, 6}},
      {"size1_both_sides", {3, 1, 5}, {1, 4, 1}, {3, 4, 5}},
      {"rank4_vs_rank2", {2, 3, 4, 5}, {4, 5}, {2, 3, 4, 5}},
      {"rank1_vs_rank3", {5}, {2, 1, 1}, {2, 1, 5}},
      {"one_vs_vector", {1}, {7}, {7}},
      {"all_ones_vs_matrix", {1, 1}, {3, 2}, {3, 2}},
      {"leading_ones", {1, 1, 3}, {2, 3}, {1, 2, 3}},
      {"same_shape", {2, 3}, {2, 3}, {2, 3}},
  };
  return ps;
}

struct BOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  double (*ref)(double, double);
};
const std::vector<BOp>& bops() {
  static const std::vector<BOp> ops{
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return kiln::mul(a, b); },
       [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return kiln::div(a, b); },
       [](double a, double b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return kiln::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return kiln::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return kiln::lt(a, b); },
       [](double a, double b) { return a < b ? 1.0 : 0.0; }},
  };
  return ops;
}

struct BParam {
  size_t pair, op;
};
std::vector<BParam> bparams() {
  std::vector<BParam> ps;
  for (size_t i = 0; i < shape_pairs().size(); ++i)
    for (size_t j = 0; j < bops().size(); ++j) ps.push_back({i, j});
  return ps;
}

class Broadcast : public OpsTestP<BParam> {};

TEST_P(Broadcast, MatchesReference) {
  const ShapePair& sp = shape_pairs()[GetParam().pair];
  const BOp& op = bops()[GetParam().op];
  Rng rng;
  // Positive values keep pow and div well defined.
  Vals a = rng.uniform(sp.a.numel(), DType::f32, 0.5, 3);
  Vals b = rng.nonzero(sp.b.numel(), DType::f32, 0.5, 2);
  if (std::string(op.name) == "pow")
    for (auto& v : b) v = std::fabs(v);
  Tensor x = make(a, sp.a, DType::f32), y = make(b, sp.b, DType::f32);
  Tensor r = op.fn(x, y);
  DType out = std::string(op.name) == "lt" ? DType::boolean : DType::f32;
  Vals e = ref_binary(a, sp.a, b, sp.b, op.ref);
  EXPECT_TRUE(matches(r, sp.out, out, e)) << sp.name << " " << op.name;
}

void PrintTo(const BParam& p, std::ostream* os) {
  *os << shape_pairs()[p.pair].name << "/" << bops()[p.op].name;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Broadcast, ::testing::ValuesIn(bparams()), [](const auto& info) {
  return std::string(shape_pairs()[info.param.pair].name) + "_" + bops()[info.param.op].name;
});

class BroadcastMisc : public OpsTest {};

TEST_F(BroadcastMisc, MixedDtypesBroadcast) {
  Rng rng;
  Shape as{4, 1}, bs{1, 5};
  Vals a = rng.uniform(4, DType::i32, -20, 20);
  Vals b = rng.uniform(5, DType::f64, -2, 2);
  Tensor r = make(a, as, DType::i32) * make(b, bs, DType::f64);
  EXPECT_TRUE(matches(r, Shape{4, 5}, DType::f64,
                      ref_binary(a, as, b, bs, [](double u, double v) { return u * v; })));
}

TEST_F(BroadcastMisc, PendingOperandsBroadcast) {
  // Both operands are pending results of other ops when broadcast.
  Rng rng;
  Shape as{4, 1}, bs{1, 5};
  Vals a = rng.uniform(4, DType::f32, -2, 2), b = rng.uniform(5, DType::f32, -2, 2);
  Tensor x = make(a, as, DType::f32), y = make(b, bs, DType::f32);
  Tensor r = (x + 1) * (y * 2) - kiln::exp(x);
  Vals e =
      ref_binary(a, as, b, bs, [](double u, double v) { return (u + 1) * (v * 2) - std::exp(u); });
  EXPECT_TRUE(matches(r, Shape{4, 5}, DType::f32, e));
}

TEST_F(BroadcastMisc, ChainedBroadcastsGrowRank) {
  Rng rng;
  Vals a = rng.uniform(3, DType::f64, -1, 1), b = rng.uniform(4, DType::f64, -1, 1),
       c = rng.uniform(2, DType::f64, -1, 1);
  Tensor x = make(a, Shape{3, 1}, DType::f64);    // (3, 1)
  Tensor y = make(b, Shape{4, 1, 1}, DType::f64); // (4, 1, 1)
  Tensor z = make(c, Shape{2}, DType::f64);       // (2)
  Tensor r = x + y * z;                           // (4, 3, 2)
  std::vector<int64_t> od{4, 3, 2};
  Vals e(24);
  for (int64_t i = 0; i < 24; ++i) {
    auto idx = unravel(i, od);
    e[i] = a[idx[1]] + b[idx[0]] * c[idx[2]];
  }
  EXPECT_TRUE(matches(r, Shape{4, 3, 2}, DType::f64, e));
}

TEST_F(BroadcastMisc, ScalarTensorZeroDimOnBothSides) {
  Tensor s = make({2.5}, Shape{}, DType::f32);
  Rng rng;
  Vals a = rng.nonzero(6, DType::f32, 0.5, 3);
  Tensor x = make(a, Shape{2, 3}, DType::f32);
  EXPECT_TRUE(
      matches(s - x, Shape{2, 3}, DType::f32, ref_unary(a, [](double v) { return 2.5 - v; })));
  EXPECT_TRUE(
      matches(s / x, Shape{2, 3}, DType::f32, ref_unary(a, [](double v) { return 2.5 / v; })));
  EXPECT_TRUE(
      matches(x / s, Shape{2, 3}, DType::f32, ref_unary(a, [](double v) { return v / 2.5; })));
  Tensor ss = s * s;
  EXPECT_EQ(ss.ndim(), 0);
  EXPECT_DOUBLE_EQ(ss.item<double>(), 6.25);
}

// ---- errors --------------------------------------------------------------------------------
struct BadPair {
  Shape a, b;
};

class BroadcastErrors : public OpsTest {};

TEST_F(BroadcastErrors, IncompatibleShapesThrowNamingOpAndShapes) {
  const std::vector<BadPair> bad{
      {{3, 4}, {4, 3}}, {{2, 3}, {2}}, {{2, 3, 4}, {3, 3}}, {{5}, {4}}, {{2, 1, 3}, {4, 2}}};
  for (const auto& p : bad) {
    Tensor x = kiln::ones(p.a), y = kiln::ones(p.b);
    SCOPED_TRACE(p.a.str() + " vs " + p.b.str());
    EXPECT_KILN_ERROR("[add]", kiln::add(x, y));
    EXPECT_KILN_ERROR("[sub]", x - y);
    EXPECT_KILN_ERROR("[mul]", x * y);
    EXPECT_KILN_ERROR("[div]", kiln::div(x, y));
    EXPECT_KILN_ERROR("[pow]", kiln::pow(x, y));
    EXPECT_KILN_ERROR("[maximum]", kiln::maximum(x, y));
    EXPECT_KILN_ERROR("[minimum]", kiln::minimum(x, y));
    EXPECT_KILN_ERROR("[eq]", x == y);
    EXPECT_KILN_ERROR("[lt]", kiln::lt(x, y));
    EXPECT_KILN_ERROR("[logical_and]", kiln::logical_and(x, y));
    // The message names both shapes.
    EXPECT_KILN_ERROR(p.a.str(), kiln::add(x, y));
    EXPECT_KILN_ERROR(p.b.str(), kiln::add(x, y));
  }
}

TEST_F(BroadcastErrors, WhereAndClampIncompatible) {
  Tensor c = kiln::ones({3, 4}, DType::boolean);
  Tensor a = kiln::ones({3, 4}), b = kiln::ones({2, 4});
  EXPECT_KILN_ERROR("[where]", kiln::where(c, a, b));
  EXPECT_KILN_ERROR("[where]", kiln::where(kiln::ones({5}, DType::boolean), a, a));
  EXPECT_KILN_ERROR("[clamp]", kiln::clamp(a, b, a));
}

TEST_F(BroadcastErrors, FailedBroadcastDoesNotDisturbOperands) {
  Rng rng;
  Vals a = rng.uniform(12, DType::f32, -1, 1);
  Tensor x = make(a, Shape{3, 4}, DType::f32);
  Tensor y = x * 3;
  EXPECT_KILN_ERROR("[add]", y + kiln::ones({4, 3}));
  EXPECT_TRUE(matches(y, Shape{3, 4}, DType::f32, ref_unary(a, [](double v) { return v * 3; })));
}

} // namespace

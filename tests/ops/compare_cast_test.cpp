// Comparisons, logical ops, where and cast over every dtype.
#include "reference.h"

namespace {

using namespace kt;

/// Inputs with frequent ties: a small grid of values exactly representable in every float type.
Vals tie_values(Rng& rng, int64_t n, DType t) {
  if (t == DType::boolean) return rng.pick(n, {0, 1});
  if (is_int(t)) return rng.pick(n, {-2, -1, 0, 1, 2});
  return rng.pick(n, {-1.5, -1, -0.5, 0, 0.5, 1, 1.5});
}

// ---- comparisons ---------------------------------------------------------------------------
struct CmpOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  Tensor (*fn_op)(const Tensor&, const Tensor&);
  Tensor (*fn_scalar)(const Tensor&, kiln::Scalar);
  bool (*ref)(double, double);
};

const std::vector<CmpOp>& cmp_ops() {
  static const std::vector<CmpOp> ops{
      {"eq", [](const Tensor& a, const Tensor& b) { return kiln::eq(a, b); },
       [](const Tensor& a, const Tensor& b) { return a == b; },
       [](const Tensor& a, kiln::Scalar s) { return kiln::eq(a, s); },
       [](double a, double b) { return a == b; }},
      {"ne", [](const Tensor& a, const Tensor& b) { return kiln::ne(a, b); },
       [](const Tensor& a, const Tensor& b) { return a != b; },
       [](const Tensor& a, kiln::Scalar s) { return kiln::ne(a, s); },
       [](double a, double b) { return a != b; }},
      {"lt", [](const Tensor& a, const Tensor& b) { return kiln::lt(a, b); },
       [](const Tensor& a, const Tensor& b) { return a < b; },
       [](const Tensor& a, kiln::Scalar s) { return kiln::lt(a, s); },
       [](double a, double b) { return a < b; }},
      {"le", [](const Tensor& a, const Tensor& b) { return kiln::le(a, b); },
       [](const Tensor& a, const Tensor& b) { return a <= b; },
       [](const Tensor& a, kiln::Scalar s) { return kiln::le(a, s); },
       [](double a, double b) { return a <= b; }},
      {"gt", [](const Tensor& a, const Tensor& b) { return kiln::gt(a, b); },
       [](const Tensor& a, const Tensor& b) { return a > b; },
       [](const Tensor& a, kiln::Scalar s) { return kiln::gt(a, s); },
       [](double a, double b) { return a > b; }},
      {"ge", [](const Tensor& a, const Tensor& b) { return kiln::ge(a, b); },
       [](const Tensor& a, const Tensor& b) { return a >= b; },
       [](const Tensor& a, kiln::Scalar s) { return kiln::ge(a, s); },
       [](double a, double b) { return a >= b; }},
  };
  return ops;
}

struct CmpParam {
  size_t op;
  DType dtype;
};
std::vector<CmpParam> cmp_params() {
  std::vector<CmpParam> ps;
  for (size_t i = 0; i < cmp_ops().size(); ++i)
    for (DType t : all_dtypes()) ps.push_back({i, t});
  return ps;
}

class Compare : public OpsTestP<CmpParam> {};

TEST_P(Compare, TensorTensor) {
  const CmpOp& op = cmp_ops()[GetParam().op];
  DType t = GetParam().dtype;
  Rng rng;
  Shape s{6, 8};
  Vals a = tie_values(rng, 48, t), b = tie_values(rng, 48, t);
  Tensor x = make(a, s, t), y = make(b, s, t);
  Vals e = ref_binary(a, s, b, s, [&](double u, double v) { return op.ref(u, v) ? 1.0 : 0.0; });
  EXPECT_TRUE(matches(op.fn(x, y), s, DType::boolean, e)) << op.name;
  EXPECT_TRUE(matches(op.fn_op(x, y), s, DType::boolean, e)) << op.name << " operator";
  // Self comparison.
  Vals es = ref_unary(a, [&](double u) { return op.ref(u, u) ? 1.0 : 0.0; });
  EXPECT_TRUE(matches(op.fn(x, x), s, DType::boolean, es)) << op.name << " x vs x";
}

TEST_P(Compare, TensorScalar) {
  const CmpOp& op = cmp_ops()[GetParam().op];
  DType t = GetParam().dtype;
  Rng rng;
  Shape s{5, 5};
  Vals a = tie_values(rng, 25, t);
  Tensor x = make(a, s, t);
  double sv = t == DType::boolean ? 1 : (is_int(t) ? 1 : 0.5);
  kiln::Scalar sc = t == DType::boolean ? kiln::Scalar(true)
                    : is_int(t)         ? kiln::Scalar(1)
                                        : kiln::Scalar(0.5);
  Vals e = ref_unary(a, [&](double u) { return op.ref(u, sv) ? 1.0 : 0.0; });
  EXPECT_TRUE(matches(op.fn_scalar(x, sc), s, DType::boolean, e)) << op.name;
  // A floating scalar against an integer tensor compares in floating point (1 < 1.5).
  if (is_int(t)) {
    Vals e2 = ref_unary(a, [&](double u) { return op.ref(u, 1.5) ? 1.0 : 0.0; });
    EXPECT_TRUE(matches(op.fn_scalar(x, 1.5), s, DType::boolean, e2)) << op.name << " vs 1.5";
  }
}

void PrintTo(const CmpParam& p, std::ostream* os) {
  *os << cmp_ops()[p.op].name << "/" << name(p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, Compare, ::testing::ValuesIn(cmp_params()), [](const auto& info) {
  return std::string(cmp_ops()[info.param.op].name) + "_" + name(info.param.dtype);
});

class CompareOperators : public OpsTest {};

TEST_F(CompareOperators, ScalarOperatorsAndMixedDtypes) {
  Rng rng;
  Shape s{20};
  Vals a = tie_values(rng, 20, DType::i32);
  Vals b = tie_values(rng, 20, DType::f32);
  Tensor x = make(a, s, DType::i32), y = make(b, s, DType::f32);
  auto ref = [&](auto f) {
    return ref_binary(a, s, b, s, [&](double u, double v) { return f(u, v) ? 1.0 : 0.0; });
  };
  EXPECT_TRUE(matches(x < y, s, DType::boolean, ref([](double u, double v) { return u < v; })));
  EXPECT_TRUE(matches(x == y, s, DType::boolean, ref([](double u, double v) { return u == v; })));
  EXPECT_TRUE(matches(y >= x, s, DType::boolean, ref([](double u, double v) { return v >= u; })));
  EXPECT_TRUE(
      matches(x > 0, s, DType::boolean, ref_unary(a, [](double u) { return u > 0 ? 1.0 : 0.0; })));
  EXPECT_TRUE(matches(y <= -0.5, s, DType::boolean,
                      ref_unary(b, [](double u) { return u <= -0.5 ? 1.0 : 0.0; })));
  EXPECT_TRUE(matches(x != 1, s, DType::boolean,
                      ref_unary(a, [](double u) { return u != 1 ? 1.0 : 0.0; })));
}

// ---- logical -------------------------------------------------------------------------------
class Logical : public OpsTestP<DType> {};

TEST_P(Logical, AndOrNot) {
  DType t = GetParam();
  Rng rng;
  Shape s{4, 9};
  Vals a = tie_values(rng, 36, t), b = tie_values(rng, 36, t);
  Tensor x = make(a, s, t), y = make(b, s, t);
  auto truth = [](double v) { return v != 0; };
  EXPECT_TRUE(matches(kiln::logical_and(x, y), s, DType::boolean,
                      ref_binary(a, s, b, s, [&](double u, double v) {
                        return truth(u) && truth(v) ? 1.0 : 0.0;
                      })));
  EXPECT_TRUE(matches(kiln::logical_or(x, y), s, DType::boolean,
                      ref_binary(a, s, b, s, [&](double u, double v) {
                        return truth(u) || truth(v) ? 1.0 : 0.0;
                      })));
  EXPECT_TRUE(matches(kiln::logical_not(x), s, DType::boolean,
                      ref_unary(a, [&](double u) { return truth(u) ? 0.0 : 1.0; })));
  EXPECT_TRUE(matches(kiln::logical_not(kiln::logical_not(y)), s, DType::boolean,
                      ref_unary(b, [&](double u) { return truth(u) ? 1.0 : 0.0; })));
}

TEST_P(Logical, BroadcastAgainstBool) {
  DType t = GetParam();
  Rng rng;
  Shape s{3, 1}, bs{1, 5};
  Vals a = tie_values(rng, 3, t), b = rng.pick(5, {0, 1});
  a[0] = 0;
  a[1] = t == DType::boolean ? 1 : 2;
  Tensor x = make(a, s, t), y = make(b, bs, DType::boolean);
  EXPECT_TRUE(matches(
      kiln::logical_and(x, y), Shape{3, 5}, DType::boolean,
      ref_binary(a, s, b, bs, [](double u, double v) { return (u != 0 && v != 0) ? 1.0 : 0.0; })));
}

INSTANTIATE_TEST_SUITE_P(Ops, Logical, ::testing::ValuesIn(all_dtypes()),
                         [](const auto& info) { return name(info.param); });

// ---- where ---------------------------------------------------------------------------------
class Where : public OpsTestP<DType> {};

TEST_P(Where, SameShape) {
  DType t = GetParam();
  Rng rng;
  Shape s{6, 7};
  Vals c = rng.pick(42, {0, 1});
  Vals a = rng.uniform(42, t, -50, 50), b = rng.uniform(42, t, -50, 50);
  Tensor r = kiln::where(make(c, s, DType::boolean), make(a, s, t), make(b, s, t));
  Vals e(42);
  for (size_t i = 0; i < 42; ++i) e[i] = c[i] ? a[i] : b[i];
  EXPECT_TRUE(matches(r, s, t, e, Tol{0, 0}));
}

TEST_P(Where, BroadcastAllThree) {
  DType t = GetParam();
  Rng rng;
  Shape cs{4, 1, 1}, as{1, 3, 1}, bs{5};
  Vals c = rng.pick(4, {0, 1});
  c[0] = 1;
  c[1] = 0;
  Vals a = rng.uniform(3, t, -50, 50), b = rng.uniform(5, t, -50, 50);
  Tensor r = kiln::where(make(c, cs, DType::boolean), make(a, as, t), make(b, bs, t));
  std::vector<int64_t> od{4, 3, 5};
  Vals e(60);
  for (int64_t i = 0; i < 60; ++i) {
    auto idx = unravel(i, od);
    e[i] = at_broadcast(c, {4, 1, 1}, idx) ? at_broadcast(a, {1, 3, 1}, idx)
                                           : at_broadcast(b, {5}, idx);
  }
  EXPECT_TRUE(matches(r, Shape{4, 3, 5}, t, e, Tol{0, 0}));
}

class WhereNumeric : public OpsTestP<DType> {};

TEST_P(WhereNumeric, ScalarBranches) {
  DType t = GetParam();
  Rng rng;
  Shape s{3, 8};
  Vals c = rng.pick(24, {0, 1});
  Vals a = rng.uniform(24, t, -20, 20);
  Tensor cond = make(c, s, DType::boolean), x = make(a, s, t);
  // Integer scalar: keeps the tensor's dtype.
  Vals e1(24), e2(24), e3(24);
  for (size_t i = 0; i < 24; ++i) {
    e1[i] = c[i] ? a[i] : -3;
    e2[i] = c[i] ? 7 : a[i];
    e3[i] = c[i] ? a[i] : 0.5;
  }
  EXPECT_TRUE(matches(kiln::where(cond, x, -3), s, t, e1, Tol{0, 0}));
  EXPECT_TRUE(matches(kiln::where(cond, 7, x), s, t, e2, Tol{0, 0}));
  // Floating scalar: integer tensors promote to f32.
  EXPECT_TRUE(matches(kiln::where(cond, x, 0.5), s, is_float(t) ? t : DType::f32, e3, Tol{0, 0}));
}

TEST_P(WhereNumeric, CondFromComparison) {
  DType t = GetParam();
  Rng rng;
  Shape s{50};
  Vals a = rng.uniform(50, t, -20, 20);
  Tensor x = make(a, s, t);
  Tensor r = kiln::where(x > 0, x, kiln::neg(x)); // abs
  EXPECT_TRUE(matches(r, s, t, ref_unary(a, [](double v) { return std::fabs(v); }), Tol{0, 0}));
}

INSTANTIATE_TEST_SUITE_P(Ops, Where, ::testing::ValuesIn(all_dtypes()),
                         [](const auto& info) { return name(info.param); });
INSTANTIATE_TEST_SUITE_P(Ops, WhereNumeric, ::testing::ValuesIn(numeric_dtypes()),
                         [](const auto& info) { return name(info.param); });

// ---- cast ----------------------------------------------------------------------------------
struct CastParam {
  DType from, to;
};
std::vector<CastParam> cast_params() {
  std::vector<CastParam> ps;
  for (DType a : all_dtypes())
    for (DType b : all_dtypes()) ps.push_back({a, b});
  return ps;
}

class Cast : public OpsTestP<CastParam> {};

TEST_P(Cast, MatchesHostConversion) {
  DType from = GetParam().from, to = GetParam().to;
  Rng rng;
  Vals a;
  if (from == DType::boolean) {
    a = rng.pick(40, {0, 1});
  } else if (is_int(from)) {
    a = rng.uniform(40, from, -100, 100);
    a[0] = 0;
    a[1] = 1;
  } else {
    // f64 sources keep full precision unless the target is a 16-bit float (avoid the
    // double-rounding question f64 -> f32 -> f16 altogether).
    bool f16_target = to == DType::f16 || to == DType::bf16;
    DType gen = (from == DType::f64 && f16_target) ? DType::f32 : from;
    a = rng.uniform(40, gen, -100, 100);
    a[0] = 0;
    a[1] = 2.5;
    a[2] = -2.5;
    a[3] = -0.75;
    a[4] = 99.9; // rounds in 16-bit types; truncates to 99 in ints
    a = quantize_all(gen, a);
    if (from == DType::f32 || from == DType::f64) {
      // Ties: round-to-nearest-even in the 16-bit types.
      a[5] = 1 + std::ldexp(1.0, -11);     // f16 tie -> 1
      a[6] = 1 + 3 * std::ldexp(1.0, -11); // f16 tie -> 1 + 2^-9
      a[7] = 1 + std::ldexp(1.0, -8);      // bf16 tie -> 1
      a[8] = 1 + 3 * std::ldexp(1.0, -8);  // bf16 tie -> 1 + 2^-6
    }
  }
  Shape s{5, 8};
  Tensor x = make(a, s, from);
  Vals src = quantize_all(from, a);
  Vals e = quantize_all(to, src);
  EXPECT_TRUE(matches(kiln::cast(x, to), s, to, e, Tol{0, 0}));
  EXPECT_TRUE(matches(x.astype(to), s, to, e, Tol{0, 0}));
}

class CastChain : public OpsTestP<CastParam> {};

TEST_P(CastChain, InsideChain) {
  // cast inside a fused chain: cast(x) * 2, read back in the target dtype.
  DType from = GetParam().from, to = GetParam().to;
  Rng rng;
  Vals a = rng.uniform(24, from == DType::f64 ? DType::f32 : from, -40, 40);
  Shape s{24};
  Tensor y = kiln::cast(make(a, s, from), to) * 2;
  Vals e = ref_unary(quantize_all(to, a), [](double v) { return v * 2; });
  EXPECT_TRUE(matches(y, s, to, e, Tol{0, 0}));
}

void PrintTo(const CastParam& p, std::ostream* os) {
  *os << name(p.from) << "->" << name(p.to);
}

INSTANTIATE_TEST_SUITE_P(Ops, Cast, ::testing::ValuesIn(cast_params()), [](const auto& info) {
  return name(info.param.from) + "_to_" + name(info.param.to);
});
std::vector<CastParam> numeric_cast_params() {
  std::vector<CastParam> ps;
  for (const auto& p : cast_params())
    if (p.from != DType::boolean && p.to != DType::boolean) ps.push_back(p);
  return ps;
}
INSTANTIATE_TEST_SUITE_P(Ops, CastChain, ::testing::ValuesIn(numeric_cast_params()),
                         [](const auto& info) {
                           return name(info.param.from) + "_to_" + name(info.param.to);
                         });

class CastSame : public OpsTest {};

TEST_F(CastSame, AstypeToSameDtypeReturnsSameTensor) {
  Tensor x = make({1, 2, 3}, Shape{3}, DType::f32);
  Tensor y = x.astype(DType::f32);
  EXPECT_EQ(y.node(), x.node());
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

} // namespace

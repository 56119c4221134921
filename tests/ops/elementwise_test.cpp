// Elementwise math: every unary and binary op over the dtypes it supports, scalar operands on
// both sides, clamp. Each result is compared with a double reference computed on the host from
// the exact (dtype-rounded) input values.
#include "reference.h"

namespace {

using namespace kt;

// ---- unary ---------------------------------------------------------------------------------
struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double (*ref)(double);
  double lo, hi;   // float input domain
  double ilo, ihi; // integer input domain
  bool float_math; // integer inputs give f32 (like torch.exp on an int tensor)
  bool ints_ok;    // defined on integer inputs at all
};

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

const std::vector<UnaryOp>& unary_ops() {
  static const std::vector<UnaryOp> ops{
      {"neg", [](const Tensor& a) { return kiln::neg(a); }, [](double x) { return -x; }, -5, 5,
       -100, 100, false, true},
      {"abs", [](const Tensor& a) { return kiln::abs(a); }, [](double x) { return std::fabs(x); },
       -5, 5, -100, 100, false, true},
      {"relu", [](const Tensor& a) { return kiln::relu(a); },
       [](double x) { return x > 0 ? x : 0.0; }, -5, 5, -100, 100, false, true},
      {"exp", [](const Tensor& a) { return kiln::exp(a); }, [](double x) { return std::exp(x); },
       -4, 4, -4, 4, true, true},
      {"log", [](const Tensor& a) { return kiln::log(a); }, [](double x) { return std::log(x); },
       0.05, 10, 1, 50, true, true},
      {"log1p", [](const Tensor& a) { return kiln::log1p(a); },
       [](double x) { return std::log1p(x); }, -0.9, 10, 0, 50, true, true},
      {"sqrt", [](const Tensor& a) { return kiln::sqrt(a); }, [](double x) { return std::sqrt(x); },
       0.01, 10, 0, 50, true, true},
      {"rsqrt", [](const Tensor& a) { return kiln::rsqrt(a); },
       [](double x) { return 1.0 / std::sqrt(x); }, 0.05, 10, 1, 50, true, true},
      {"sin", [](const Tensor& a) { return kiln::sin(a); }, [](double x) { return std::sin(x); },
       -4, 4, -10, 10, true, true},
      {"cos", [](const Tensor& a) { return kiln::cos(a); }, [](double x) { return std::cos(x); },
       -4, 4, -10, 10, true, true},
      {"tanh", [](const Tensor& a) { return kiln::tanh(a); }, [](double x) { return std::tanh(x); },
       -3, 3, -3, 3, true, true},
      {"sigmoid", [](const Tensor& a) { return kiln::sigmoid(a); },
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -6, 6, -6, 6, true, true},
      {"gelu", [](const Tensor& a) { return kiln::gelu(a); }, gelu_ref, -4, 4, 0, 0, true, false},
  };
  return ops;
}

struct UnaryParam {
  size_t op;
  DType dtype;
};

std::vector<UnaryParam> unary_params() {
  std::vector<UnaryParam> ps;
  for (size_t i = 0; i < unary_ops().size(); ++i)
    for (DType t : numeric_dtypes())
      if (is_float(t) || unary_ops()[i].ints_ok) ps.push_back({i, t});
  return ps;
}

class Unary : public OpsTestP<UnaryParam> {};

TEST_P(Unary, MatchesReference) {
  const UnaryOp& op = unary_ops()[GetParam().op];
  DType in = GetParam().dtype;
  Rng rng;
  Shape s{6, 7};
  Vals a = is_float(in) ? rng.uniform(42, in, op.lo, op.hi) : rng.uniform(42, in, op.ilo, op.ihi);
  Tensor x = make(a, s, in);
  Tensor y = op.fn(x);
  DType out = (op.float_math && !is_float(in)) ? DType::f32 : in;
  EXPECT_TRUE(matches(y, s, out, ref_unary(a, op.ref))) << op.name << " on " << name(in);
  // The input is untouched.
  EXPECT_TRUE(matches(x, s, in, a, Tol{0, 0}));
}

class UnaryChain : public OpsTestP<UnaryParam> {};

TEST_P(UnaryChain, InsideAFusedChain) {
  // The op in the middle of a chain: op(x * 1) * 2 + 1, evaluated as one pending graph.
  const UnaryOp& op = unary_ops()[GetParam().op];
  DType in = GetParam().dtype;
  Rng rng;
  Shape s{3, 5, 4};
  Vals a = rng.uniform(60, in, op.lo, op.hi);
  Tensor x = make(a, s, in);
  Tensor y = op.fn(x * 1) * 2 + 1;
  Vals e = ref_unary(a, [&](double v) { return op.ref(v) * 2 + 1; });
  Tol tol = tol_for(in);
  tol.atol *= 3;
  EXPECT_TRUE(matches(y, s, in, e, tol)) << op.name;
}

void PrintTo(const UnaryParam& p, std::ostream* os) {
  *os << unary_ops()[p.op].name << "/" << name(p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, Unary, ::testing::ValuesIn(unary_params()), [](const auto& info) {
  return std::string(unary_ops()[info.param.op].name) + "_" + name(info.param.dtype);
});

std::vector<UnaryParam> unary_float_params() {
  std::vector<UnaryParam> ps;
  for (const auto& p : unary_params())
    if (is_float(p.dtype)) ps.push_back(p);
  return ps;
}
INSTANTIATE_TEST_SUITE_P(Ops, UnaryChain, ::testing::ValuesIn(unary_float_params()),
                         [](const auto& info) {
                           return std::string(unary_ops()[info.param.op].name) + "_" +
                                  name(info.param.dtype);
                         });

// ---- binary --------------------------------------------------------------------------------
enum class Domain { general, divisor, power };

struct BinaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  double (*ref)(double, double);
  Domain domain;
  bool int_to_f32; // integer inputs give f32 (true division)
};

const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops{
      {"add", [](const Tensor& a, const Tensor& b) { return kiln::add(a, b); },
       [](double a, double b) { return a + b; }, Domain::general, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return kiln::sub(a, b); },
       [](double a, double b) { return a - b; }, Domain::general, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return kiln::mul(a, b); },
       [](double a, double b) { return a * b; }, Domain::general, false},
      {"div", [](const Tensor& a, const Tensor& b) { return kiln::div(a, b); },
       [](double a, double b) { return a / b; }, Domain::divisor, true},
      {"pow", [](const Tensor& a, const Tensor& b) { return kiln::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, Domain::power, false},
      {"maximum", [](const Tensor& a, const Tensor& b) { return kiln::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, Domain::general, false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return kiln::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, Domain::general, false},
      // The operators must be the same ops.
      {"op_plus", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double a, double b) { return a + b; }, Domain::general, false},
      {"op_minus", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double a, double b) { return a - b; }, Domain::general, false},
      {"op_times", [](const Tensor& a, const Tensor& b) { return a * b; },
       [](double a, double b) { return a * b; }, Domain::general, false},
      {"op_divide", [](const Tensor& a, const Tensor& b) { return a / b; },
       [](double a, double b) { return a / b; }, Domain::divisor, true},
  };
  return ops;
}

struct BinaryParam {
  size_t op;
  DType dtype;
};

std::vector<BinaryParam> binary_params() {
  std::vector<BinaryParam> ps;
  for (size_t i = 0; i < binary_ops().size(); ++i)
    for (DType t : numeric_dtypes()) ps.push_back({i, t});
  return ps;
}

class Binary : public OpsTestP<BinaryParam> {};

void binary_inputs(Rng& rng, Domain d, DType t, int64_t n, Vals& a, Vals& b) {
  bool f = is_float(t);
  switch (d) {
  case Domain::general:
    a = f ? rng.uniform(n, t, -10, 10) : rng.uniform(n, t, -100, 100);
    b = f ? rng.uniform(n, t, -10, 10) : rng.uniform(n, t, -100, 100);
    break;
  case Domain::divisor:
    a = f ? rng.uniform(n, t, -10, 10) : rng.uniform(n, t, -100, 100);
    b = f ? rng.nonzero(n, t, 0.5, 5) : rng.nonzero(n, t, 1, 9);
    break;
  case Domain::power:
    a = f ? rng.uniform(n, t, 0.5, 3) : rng.uniform(n, t, -4, 4);
    b = f ? rng.uniform(n, t, -2, 2) : rng.uniform(n, t, 0, 5);
    break;
  }
}

TEST_P(Binary, MatchesReference) {
  const BinaryOp& op = binary_ops()[GetParam().op];
  DType t = GetParam().dtype;
  Rng rng;
  Shape s{5, 9};
  Vals a, b;
  binary_inputs(rng, op.domain, t, s.numel(), a, b);
  Tensor x = make(a, s, t), y = make(b, s, t);
  DType out = (op.int_to_f32 && !is_float(t)) ? DType::f32 : t;
  EXPECT_TRUE(matches(op.fn(x, y), s, out, ref_binary(a, s, b, s, op.ref)))
      << op.name << " on " << name(t);
}

TEST_P(Binary, SameTensorBothSides) {
  const BinaryOp& op = binary_ops()[GetParam().op];
  DType t = GetParam().dtype;
  Rng rng;
  Shape s{4, 4};
  Vals a, b;
  binary_inputs(rng, op.domain, t, s.numel(), a, b);
  // x op x: a nonzero divisor for div, a valid base (and non-negative int exponent) for pow.
  Vals vv = op.domain == Domain::divisor ? b : a;
  if (op.domain == Domain::power && !is_float(t)) vv = rng.uniform(16, t, 0, 4);
  Tensor x = make(vv, s, t);
  DType out = (op.int_to_f32 && !is_float(t)) ? DType::f32 : t;
  EXPECT_TRUE(matches(op.fn(x, x), s, out, ref_binary(vv, s, vv, s, op.ref))) << op.name;
}

void PrintTo(const BinaryParam& p, std::ostream* os) {
  *os << binary_ops()[p.op].name << "/" << name(p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, Binary, ::testing::ValuesIn(binary_params()), [](const auto& info) {
  return std::string(binary_ops()[info.param.op].name) + "_" + name(info.param.dtype);
});

// ---- scalar operands -----------------------------------------------------------------------
struct ScalarCase {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double (*ref)(double);
  int kind; // 0: integer scalar (keeps dtype), 1: floating scalar, 2: true division
  bool positive_input = false;
  bool nonzero_input = false;
};

const std::vector<ScalarCase>& scalar_cases() {
  static const std::vector<ScalarCase> cs{
      {"x_plus_2", [](const Tensor& x) { return x + 2; }, [](double v) { return v + 2; }, 0},
      {"2_plus_x", [](const Tensor& x) { return 2 + x; }, [](double v) { return 2 + v; }, 0},
      {"x_minus_3", [](const Tensor& x) { return x - 3; }, [](double v) { return v - 3; }, 0},
      {"2_minus_x", [](const Tensor& x) { return 2 - x; }, [](double v) { return 2 - v; }, 0},
      {"rsub_7", [](const Tensor& x) { return kiln::rsub(x, 7); }, [](double v) { return 7 - v; },
       0},
      {"x_times_3", [](const Tensor& x) { return x * 3; }, [](double v) { return v * 3; }, 0},
      {"neg2_times_x", [](const Tensor& x) { return -2 * x; }, [](double v) { return -2 * v; }, 0},
      {"x_times_half", [](const Tensor& x) { return x * 0.5; }, [](double v) { return v * 0.5; },
       1},
      {"1p5_times_x", [](const Tensor& x) { return 1.5 * x; }, [](double v) { return 1.5 * v; }, 1},
      {"x_plus_quarter", [](const Tensor& x) { return x + 0.25; },
       [](double v) { return v + 0.25; }, 1},
      {"2p5_minus_x", [](const Tensor& x) { return 2.5 - x; }, [](double v) { return 2.5 - v; }, 1},
      {"x_div_4", [](const Tensor& x) { return x / 4; }, [](double v) { return v / 4; }, 2},
      {"x_div_0p5", [](const Tensor& x) { return x / 0.5; }, [](double v) { return v / 0.5; }, 2},
      {"1_div_x", [](const Tensor& x) { return 1 / x; }, [](double v) { return 1 / v; }, 2, false,
       true},
      {"rdiv_3", [](const Tensor& x) { return kiln::rdiv(x, 3); }, [](double v) { return 3 / v; },
       2, false, true},
      {"pow_2", [](const Tensor& x) { return kiln::pow(x, 2); }, [](double v) { return v * v; }, 0},
      {"pow_3", [](const Tensor& x) { return kiln::pow(x, 3); }, [](double v) { return v * v * v; },
       0},
      {"pow_half", [](const Tensor& x) { return kiln::pow(x, 0.5); },
       [](double v) { return std::sqrt(v); }, 1, true},
      {"maximum_1", [](const Tensor& x) { return kiln::maximum(x, 1); },
       [](double v) { return std::max(v, 1.0); }, 0},
      {"minimum_neg1", [](const Tensor& x) { return kiln::minimum(x, -1); },
       [](double v) { return std::min(v, -1.0); }, 0},
      {"maximum_0p5", [](const Tensor& x) { return kiln::maximum(x, 0.5); },
       [](double v) { return std::max(v, 0.5); }, 1},
      {"add_fn_true", [](const Tensor& x) { return kiln::add(x, true); },
       [](double v) { return v + 1; }, 0},
      {"sub_fn_2", [](const Tensor& x) { return kiln::sub(x, 2); }, [](double v) { return v - 2; },
       0},
      {"mul_fn_int64", [](const Tensor& x) { return kiln::mul(x, int64_t{-3}); },
       [](double v) { return v * -3; }, 0},
      {"div_fn_2", [](const Tensor& x) { return kiln::div(x, 2); }, [](double v) { return v / 2; },
       2},
  };
  return cs;
}

struct ScalarParam {
  size_t c;
  DType dtype;
};
std::vector<ScalarParam> scalar_params() {
  std::vector<ScalarParam> ps;
  for (size_t i = 0; i < scalar_cases().size(); ++i)
    for (DType t : numeric_dtypes()) ps.push_back({i, t});
  return ps;
}

class ScalarOperand : public OpsTestP<ScalarParam> {};

TEST_P(ScalarOperand, MatchesReference) {
  const ScalarCase& c = scalar_cases()[GetParam().c];
  DType t = GetParam().dtype;
  Rng rng;
  Shape s{3, 11};
  Vals a;
  if (c.positive_input)
    a = is_float(t) ? rng.uniform(33, t, 0.1, 9) : rng.uniform(33, t, 0, 30);
  else if (c.nonzero_input)
    a = is_float(t) ? rng.nonzero(33, t, 0.5, 8) : rng.nonzero(33, t, 1, 30);
  else
    a = is_float(t) ? rng.uniform(33, t, -8, 8) : rng.uniform(33, t, -30, 30);
  // Scalar promotion: an integer scalar keeps the tensor's type; a floating scalar keeps a
  // floating tensor's type and gives f32 for integer tensors; true division gives f32 for ints.
  DType out = c.kind == 0 ? t : (is_float(t) ? t : DType::f32);
  Tensor x = make(a, s, t);
  EXPECT_TRUE(matches(c.fn(x), s, out, ref_unary(a, c.ref))) << c.name << " on " << name(t);
}

void PrintTo(const ScalarParam& p, std::ostream* os) {
  *os << scalar_cases()[p.c].name << "/" << name(p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, ScalarOperand, ::testing::ValuesIn(scalar_params()),
                         [](const auto& info) {
                           return std::string(scalar_cases()[info.param.c].name) + "_" +
                                  name(info.param.dtype);
                         });

// ---- clamp ---------------------------------------------------------------------------------
class Clamp : public OpsTestP<DType> {};

TEST_P(Clamp, ScalarBounds) {
  DType t = GetParam();
  Rng rng;
  Shape s{4, 10};
  Vals a = is_float(t) ? rng.uniform(40, t, -6, 6) : rng.uniform(40, t, -60, 60);
  double lo = is_float(t) ? -1.5 : -20, hi = is_float(t) ? 2.25 : 25;
  Tensor x = make(a, s, t);
  auto sc = [&](double v) {
    return is_float(t) ? kiln::Scalar(v) : kiln::Scalar(static_cast<int64_t>(v));
  };
  EXPECT_TRUE(matches(kiln::clamp(x, sc(lo), sc(hi)), s, t,
                      ref_unary(a, [&](double v) { return std::min(std::max(v, lo), hi); })));
  EXPECT_TRUE(matches(kiln::clamp(x, sc(lo), std::nullopt), s, t,
                      ref_unary(a, [&](double v) { return std::max(v, lo); })));
  EXPECT_TRUE(matches(kiln::clamp(x, std::nullopt, sc(hi)), s, t,
                      ref_unary(a, [&](double v) { return std::min(v, hi); })));
}

TEST_P(Clamp, TensorBoundsBroadcast) {
  DType t = GetParam();
  Rng rng;
  Shape s{5, 6}, ls{1, 6}, hs{5, 1};
  Vals a = is_float(t) ? rng.uniform(30, t, -6, 6) : rng.uniform(30, t, -60, 60);
  Vals lo = is_float(t) ? rng.uniform(6, t, -4, -1) : rng.uniform(6, t, -40, -10);
  Vals hi = is_float(t) ? rng.uniform(5, t, 1, 4) : rng.uniform(5, t, 10, 40);
  Tensor r = kiln::clamp(make(a, s, t), make(lo, ls, t), make(hi, hs, t));
  Vals lo_b = ref_binary(a, s, lo, ls, [](double v, double l) { return std::max(v, l); });
  Vals e = ref_binary(lo_b, s, hi, hs, [](double v, double h) { return std::min(v, h); });
  EXPECT_TRUE(matches(r, s, t, e));
}

INSTANTIATE_TEST_SUITE_P(Ops, Clamp, ::testing::ValuesIn(numeric_dtypes()),
                         [](const auto& info) { return name(info.param); });

// ---- a few mixed chains --------------------------------------------------------------------
class ElementwiseChain : public OpsTest {};

TEST_F(ElementwiseChain, LongFusedChainF32) {
  Rng rng;
  Shape s{16, 33};
  Vals a = rng.uniform(s.numel(), DType::f32, -2, 2);
  Vals b = rng.nonzero(s.numel(), DType::f32, 0.5, 2);
  Tensor x = make(a, s, DType::f32), y = make(b, s, DType::f32);
  Tensor z = kiln::tanh(x * y + 1) / y - kiln::sigmoid(x) * kiln::exp(-kiln::abs(x));
  z = kiln::maximum(z, kiln::neg(kiln::relu(x))) + kiln::sqrt(y * y);
  Vals e(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    double zz = std::tanh(a[i] * b[i] + 1) / b[i] -
                (1 / (1 + std::exp(-a[i]))) * std::exp(-std::fabs(a[i]));
    zz = std::max(zz, -(a[i] > 0 ? a[i] : 0.0)) + std::fabs(b[i]);
    e[i] = zz;
  }
  EXPECT_TRUE(matches(z, s, DType::f32, e, Tol{1e-5, 1e-5}));
}

TEST_F(ElementwiseChain, IntermediateReadTwice) {
  // A value read, then used again in a longer chain: both reads must be right.
  Rng rng;
  Shape s{7, 3};
  Vals a = rng.uniform(21, DType::f64, -3, 3);
  Tensor x = make(a, s, DType::f64);
  Tensor y = x * x + 1;
  EXPECT_TRUE(matches(y, s, DType::f64, ref_unary(a, [](double v) { return v * v + 1; })));
  Tensor z = kiln::log(y) - x;
  EXPECT_TRUE(
      matches(z, s, DType::f64, ref_unary(a, [](double v) { return std::log(v * v + 1) - v; })));
  EXPECT_TRUE(matches(y, s, DType::f64, ref_unary(a, [](double v) { return v * v + 1; })));
}

TEST_F(ElementwiseChain, LargeTensor) {
  Rng rng;
  Shape s{100000};
  Vals a = rng.uniform(s.numel(), DType::f32, -3, 3);
  Tensor x = make(a, s, DType::f32);
  Tensor y = kiln::gelu(x) * 2 - kiln::sin(x);
  EXPECT_TRUE(matches(y, s, DType::f32,
                      ref_unary(a, [](double v) { return gelu_ref(v) * 2 - std::sin(v); })));
}

} // namespace

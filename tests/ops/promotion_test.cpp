// Type promotion (PyTorch rules, include/kiln/dtype.h): tensor-tensor table, scalars, 0-d
// tensors, true division, comparisons; dtype helpers.
#include "reference.h"

namespace {

using namespace kt;

/// PyTorch's promote_types restricted to kiln's dtypes, written out independently.
DType expected_promote(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) {
    switch (t) {
    case DType::boolean:
      return 0;
    case DType::i32:
      return 1;
    case DType::i64:
      return 2;
    case DType::f16:
      return 3;
    case DType::bf16:
      return 3;
    case DType::f32:
      return 4;
    case DType::f64:
      return 5;
    }
    return -1;
  };
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16))
    return DType::f32;
  return rank(a) >= rank(b) ? a : b;
}

struct PairParam {
  DType a, b;
};
std::vector<PairParam> all_pairs() {
  std::vector<PairParam> ps;
  for (DType a : all_dtypes())
    for (DType b : all_dtypes()) ps.push_back({a, b});
  return ps;
}

class PromoteTable : public OpsTestP<PairParam> {};

TEST_P(PromoteTable, PromoteTypesMatchesTorch) {
  DType a = GetParam().a, b = GetParam().b;
  EXPECT_EQ(kiln::promote_types(a, b), expected_promote(a, b));
  EXPECT_EQ(kiln::promote_types(b, a), expected_promote(a, b));
}

TEST_P(PromoteTable, MulResultDtypeAndValues) {
  DType a = GetParam().a, b = GetParam().b;
  DType out = expected_promote(a, b);
  Rng rng;
  // Small integers are exact in every dtype; bool operands are 0/1.
  Vals va = a == DType::boolean ? rng.pick(12, {0, 1}) : rng.pick(12, {-3, -2, -1, 1, 2, 3});
  Vals vb = b == DType::boolean ? rng.pick(12, {0, 1}) : rng.pick(12, {-3, -2, -1, 1, 2, 3});
  Tensor x = make(va, Shape{3, 4}, a), y = make(vb, Shape{3, 4}, b);
  Vals e = ref_binary(va, Shape{3, 4}, vb, Shape{3, 4}, [](double u, double v) { return u * v; });
  if (a == DType::boolean && b == DType::boolean) {
    // bool op bool arithmetic is checked in Promotion.BoolBoolArithmeticLikeTorch.
    EXPECT_EQ(kiln::logical_and(x, y).dtype(), DType::boolean);
    return;
  }
  EXPECT_TRUE(matches(kiln::mul(x, y), Shape{3, 4}, out, e, Tol{0, 0}));
  EXPECT_EQ(kiln::maximum(x, y).dtype(), out);
  EXPECT_EQ(kiln::add(x, y).dtype(), out);
  EXPECT_EQ(kiln::sub(x, y).dtype(), out);
  // Comparisons are boolean whatever the operands.
  EXPECT_EQ(kiln::lt(x, y).dtype(), DType::boolean);
  EXPECT_EQ(kiln::eq(x, y).dtype(), DType::boolean);
  // True division: floating result; integer/bool pairs give the default f32.
  {
    DType dv = is_float(out) ? out : DType::f32;
    Vals nz = rng.pick(12, {-3, -2, -1, 1, 2, 3});
    if (b == DType::boolean) nz = Vals(12, 1.0);
    Tensor d = kiln::div(x, make(nz, Shape{3, 4}, b));
    Vals ed =
        ref_binary(va, Shape{3, 4}, nz, Shape{3, 4}, [](double u, double v) { return u / v; });
    EXPECT_TRUE(matches(d, Shape{3, 4}, dv, ed));
  }
}

void PrintTo(const PairParam& p, std::ostream* os) {
  *os << name(p.a) << "," << name(p.b);
}

INSTANTIATE_TEST_SUITE_P(Ops, PromoteTable, ::testing::ValuesIn(all_pairs()), [](const auto& info) {
  return name(info.param.a) + "_" + name(info.param.b);
});

class Promotion : public OpsTest {};

TEST_F(Promotion, RepresentativeTensorPairs) {
  auto t = [](DType d) { return kiln::ones({2}, d); };
  EXPECT_EQ((t(DType::i32) + t(DType::f16)).dtype(), DType::f16);
  EXPECT_EQ((t(DType::f16) + t(DType::bf16)).dtype(), DType::f32);
  EXPECT_EQ((t(DType::i32) + t(DType::i64)).dtype(), DType::i64);
  EXPECT_EQ((t(DType::f16) + t(DType::f32)).dtype(), DType::f32);
  EXPECT_EQ((t(DType::i64) * t(DType::bf16)).dtype(), DType::bf16);
  EXPECT_EQ((t(DType::f32) - t(DType::f64)).dtype(), DType::f64);
  EXPECT_EQ((t(DType::boolean) + t(DType::i32)).dtype(), DType::i32);
  EXPECT_EQ((t(DType::i32) / t(DType::i32)).dtype(), DType::f32);
  EXPECT_EQ((t(DType::i64) / t(DType::i64)).dtype(), DType::f32);
  EXPECT_EQ((t(DType::f16) / t(DType::f16)).dtype(), DType::f16);
  EXPECT_EQ((t(DType::f64) < t(DType::i32)).dtype(), DType::boolean);
  EXPECT_EQ(kiln::pow(t(DType::i32), t(DType::f32)).dtype(), DType::f32);
  EXPECT_EQ(kiln::where(t(DType::boolean), t(DType::i32), t(DType::f64)).dtype(), DType::f64);
}

TEST_F(Promotion, ScalarsDoNotWidenSameCategory) {
  Tensor f16 = make({1.5, -2}, Shape{2}, DType::f16);
  Tensor bf16 = make({1.5, -2}, Shape{2}, DType::bf16);
  Tensor i32 = make({3, -4}, Shape{2}, DType::i32);
  Tensor i64 = make({3, -4}, Shape{2}, DType::i64);
  Tensor b = make({1, 0}, Shape{2}, DType::boolean);
  Tensor f32 = make({1.5, -2}, Shape{2}, DType::f32);

  EXPECT_TRUE(matches(f16 * 2.0, Shape{2}, DType::f16, {3, -4}));
  EXPECT_TRUE(matches(bf16 + 1, Shape{2}, DType::bf16, {2.5, -1}));
  EXPECT_TRUE(matches(f32 * 2.0, Shape{2}, DType::f32, {3, -4}));
  EXPECT_TRUE(matches(i32 + 1, Shape{2}, DType::i32, {4, -3}));
  EXPECT_TRUE(matches(i32 * int64_t{5}, Shape{2}, DType::i32, {15, -20}));
  EXPECT_TRUE(matches(i64 - 1, Shape{2}, DType::i64, {2, -5}));
  EXPECT_TRUE(matches(i32 + true, Shape{2}, DType::i32, {4, -3}));
  EXPECT_TRUE(matches(f16 + true, Shape{2}, DType::f16, {2.5, -1}));
  // A double scalar that f16 cannot hold exactly is still applied in f16.
  EXPECT_EQ((f16 * 1e-3).dtype(), DType::f16);
  EXPECT_EQ((bf16 + 0.1).dtype(), DType::bf16);
  EXPECT_EQ((b * 3).dtype(), DType::i64);
}

TEST_F(Promotion, BoolBoolArithmeticLikeTorch) {
  // dtype.h: among tensors the result is the smallest type that holds both, so bool op bool
  // is bool (torch: True + True -> True, True * False -> False; a bool scalar keeps bool).
  Tensor b = make({1, 0, 1, 0}, Shape{4}, DType::boolean);
  Tensor c = make({1, 1, 0, 0}, Shape{4}, DType::boolean);
  EXPECT_TRUE(matches(b * c, Shape{4}, DType::boolean, {1, 0, 0, 0}));
  EXPECT_TRUE(matches(b + c, Shape{4}, DType::boolean, {1, 1, 1, 0}));
  EXPECT_TRUE(matches(b + true, Shape{4}, DType::boolean, {1, 1, 1, 1}));
  EXPECT_TRUE(matches(b * false, Shape{4}, DType::boolean, {0, 0, 0, 0}));
}

TEST_F(Promotion, ScalarsOfHigherCategoryGiveDefaultType) {
  Tensor i32 = make({3, -4}, Shape{2}, DType::i32);
  Tensor i64 = make({3, -4}, Shape{2}, DType::i64);
  Tensor b = make({1, 0}, Shape{2}, DType::boolean);
  EXPECT_TRUE(matches(i32 * 0.5, Shape{2}, DType::f32, {1.5, -2}));
  EXPECT_TRUE(matches(i64 + 0.25, Shape{2}, DType::f32, {3.25, -3.75}));
  EXPECT_TRUE(matches(b + 1, Shape{2}, DType::i64, {2, 1}));
  EXPECT_TRUE(matches(1 + b, Shape{2}, DType::i64, {2, 1}));
  EXPECT_TRUE(matches(b * 2.5, Shape{2}, DType::f32, {2.5, 0}));
  EXPECT_TRUE(matches(i32 / 2, Shape{2}, DType::f32, {1.5, -2}));
  EXPECT_TRUE(matches(3 / i32, Shape{2}, DType::f32, {1, -0.75}));
  EXPECT_TRUE(
      matches(kiln::pow(i32, 0.5).astype(DType::f64) * 0 + 1, Shape{2}, DType::f64, {1, kNaN}));
  EXPECT_EQ((i32 > 0.5).dtype(), DType::boolean);
  EXPECT_EQ((b == 1).dtype(), DType::boolean);
}

TEST_F(Promotion, ZeroDimTensorsWidenOnlyLowerCategories) {
  Tensor f64_0d = make({2.5}, Shape{}, DType::f64);
  Tensor i64_0d = make({2}, Shape{}, DType::i64);
  Tensor f32_0d = make({2}, Shape{}, DType::f32);
  Tensor i32_0d = make({2}, Shape{}, DType::i32);
  Tensor f32 = make({1, 2}, Shape{2}, DType::f32);
  Tensor f16 = make({1, 2}, Shape{2}, DType::f16);
  Tensor i32 = make({1, 2}, Shape{2}, DType::i32);
  Tensor b = make({1, 0}, Shape{2}, DType::boolean);
  // Same category: the dimensioned tensor's type wins.
  EXPECT_EQ((f32 + f64_0d).dtype(), DType::f32);
  EXPECT_EQ((f16 * f32_0d).dtype(), DType::f16);
  EXPECT_EQ((i32 + i64_0d).dtype(), DType::i32);
  EXPECT_EQ((i64_0d + i32).dtype(), DType::i32);
  EXPECT_TRUE(matches(f32 + f64_0d, Shape{2}, DType::f32, {3.5, 4.5}));
  // Higher category: the 0-d tensor's type.
  EXPECT_EQ((i32 + f64_0d).dtype(), DType::f64);
  EXPECT_TRUE(matches(i32 * f64_0d, Shape{2}, DType::f64, {2.5, 5}));
  EXPECT_EQ((b + i32_0d).dtype(), DType::i32);
  EXPECT_EQ((i32 + f32_0d).dtype(), DType::f32);
  // Two 0-d tensors promote like ordinary tensors.
  EXPECT_EQ((f32_0d + f64_0d).dtype(), DType::f64);
  EXPECT_EQ((i32_0d + i64_0d).dtype(), DType::i64);
  // 0-d with a scalar.
  EXPECT_EQ((i32_0d * 0.5).dtype(), DType::f32);
}

TEST_F(Promotion, MixedDtypeValuesAreComputedInTheResultType) {
  Rng rng;
  Vals a = rng.uniform(20, DType::i32, -1000, 1000);
  Vals b = rng.uniform(20, DType::f64, -1, 1);
  Tensor r = make(a, Shape{20}, DType::i32) + make(b, Shape{20}, DType::f64);
  EXPECT_TRUE(
      matches(r, Shape{20}, DType::f64,
              ref_binary(a, Shape{20}, b, Shape{20}, [](double u, double v) { return u + v; })));
  // i64 values beyond 2^31 survive i32 + i64.
  Vals big{3e9, -5e9, 1e12};
  Vals small{1, 2, 3};
  Tensor s = make(small, Shape{3}, DType::i32) + make(big, Shape{3}, DType::i64);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.to_vector<int64_t>(),
            (std::vector<int64_t>{3000000001LL, -4999999998LL, 1000000000003LL}));
  // f16 + bf16 computes in f32: 1 + 2^-10 is not representable in bf16 but is in f32/f16.
  Tensor h = make({std::ldexp(1.0, -10)}, Shape{1}, DType::f16);
  Tensor bf = make({1.0}, Shape{1}, DType::bf16);
  Tensor hb = h + bf;
  EXPECT_EQ(hb.dtype(), DType::f32);
  EXPECT_EQ(hb.item<double>(), 1 + std::ldexp(1.0, -10));
}

TEST_F(Promotion, DtypeHelpers) {
  EXPECT_EQ(kiln::itemsize(DType::f32), 4);
  EXPECT_EQ(kiln::itemsize(DType::f64), 8);
  EXPECT_EQ(kiln::itemsize(DType::f16), 2);
  EXPECT_EQ(kiln::itemsize(DType::bf16), 2);
  EXPECT_EQ(kiln::itemsize(DType::i32), 4);
  EXPECT_EQ(kiln::itemsize(DType::i64), 8);
  EXPECT_EQ(kiln::itemsize(DType::boolean), 1);
  for (DType t : all_dtypes()) {
    EXPECT_EQ(std::string(kiln::dtype_name(t)), name(t));
    EXPECT_EQ(kiln::is_floating(t), is_float(t)) << name(t);
    EXPECT_EQ(kiln::is_integral(t), is_int(t)) << name(t);
    std::ostringstream os;
    os << t;
    EXPECT_EQ(os.str(), name(t));
  }
}

TEST_F(Promotion, HalfAndBfloat16HostTypes) {
  // Host conversion structs round to nearest even, like our reference encoder.
  for (double v : {1.0, -2.5, 0.1, 65504.0, 1 + std::ldexp(1.0, -11), 1 + 3 * std::ldexp(1.0, -11),
                   std::ldexp(1.0, -20), 3.14159}) {
    kiln::half h(static_cast<float>(v));
    EXPECT_EQ(h.bits, half_bits(quantize(DType::f16, v))) << v;
    EXPECT_EQ(static_cast<double>(static_cast<float>(h)), quantize(DType::f16, v)) << v;
  }
  for (double v :
       {1.0, -2.5, 0.1, 1 + std::ldexp(1.0, -8), 1 + 3 * std::ldexp(1.0, -8), 3.14159, 1e30}) {
    kiln::bfloat16 b(static_cast<float>(v));
    EXPECT_EQ(b.bits, bf16_bits(quantize(DType::bf16, static_cast<float>(v)))) << v;
    EXPECT_EQ(static_cast<double>(static_cast<float>(b)),
              quantize(DType::bf16, static_cast<float>(v)))
        << v;
  }
  EXPECT_TRUE(std::isnan(static_cast<float>(kiln::bfloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(static_cast<float>(kiln::half(std::nanf("")))));
  // from_vector of the host types.
  Tensor t = kiln::from_vector(std::vector<kiln::half>{kiln::half(1.5f), kiln::half(-0.25f)});
  EXPECT_TRUE(matches(t, Shape{2}, DType::f16, {1.5, -0.25}));
  Tensor u = kiln::from_vector(std::vector<kiln::bfloat16>{kiln::bfloat16(3.0f)});
  EXPECT_TRUE(matches(u, Shape{1}, DType::bf16, {3}));
}

} // namespace

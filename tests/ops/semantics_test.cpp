// Behaviour spelled out in docs/semantics.md (and the accuracy notes of docs/architecture.md):
// integer pow and wrap-around, saturating casts, NaN in argmax, random-stream offsets,
// what eval() computes, double accumulation on the CPU, f32 math accuracy, fused == eager.
#include "reference.h"

#include <climits>

namespace {

using namespace kt;

class Semantics : public OpsTest {};

TEST_F(Semantics, IntegerPowStaysIntegerNegativeExponentsGiveZero) {
  Tensor base = kiln::from_vector(std::vector<int32_t>{2, -1, 1, 3, -2, -1, 5});
  Tensor r = kiln::pow(base, -1);
  EXPECT_TRUE(matches(r, Shape{7}, DType::i32, {0, -1, 1, 0, 0, -1, 0}));
  Tensor ex = kiln::from_vector(std::vector<int32_t>{-2, -3, -5, 2, 3, 0, 1});
  EXPECT_TRUE(matches(kiln::pow(base, ex), Shape{7}, DType::i32, {0, -1, 1, 9, -8, 1, 5}));
  Tensor b64 = kiln::from_vector(std::vector<int64_t>{3, -3, 10});
  EXPECT_TRUE(
      matches(kiln::pow(b64, 13), Shape{3}, DType::i64, {1594323, -1594323, 10000000000000.0}));
}

TEST_F(Semantics, IntegerArithmeticWraps) {
  Tensor a = kiln::from_vector(std::vector<int32_t>{INT32_MAX, INT32_MIN, 65536});
  EXPECT_EQ((a + 1).to_vector<int32_t>(), (std::vector<int32_t>{INT32_MIN, INT32_MIN + 1, 65537}));
  EXPECT_EQ((a - 1).to_vector<int32_t>(), (std::vector<int32_t>{INT32_MAX - 1, INT32_MAX, 65535}));
  EXPECT_EQ(kiln::slice(a * a, 0, 2, 3).item<int32_t>(), 0); // 2^32 wraps to 0
  Tensor b = kiln::from_vector(std::vector<int64_t>{INT64_MAX, INT64_MIN});
  EXPECT_EQ((b + 1).to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MIN + 1}));
  EXPECT_EQ(kiln::neg(b).to_vector<int64_t>(), (std::vector<int64_t>{-INT64_MAX, INT64_MIN}));
}

TEST_F(Semantics, BoolArithmeticRules) {
  Tensor b = make({1, 0, 1, 0}, Shape{4}, DType::boolean);
  Tensor c = make({1, 1, 0, 0}, Shape{4}, DType::boolean);
  EXPECT_KILN_ERROR("[sub]", b - c);
  EXPECT_KILN_ERROR("[pow]", kiln::pow(b, c));
  EXPECT_TRUE(matches(b + c, Shape{4}, DType::boolean, {1, 1, 1, 0}));
  EXPECT_TRUE(matches(b * c, Shape{4}, DType::boolean, {1, 0, 0, 0}));
  // With a non-bool operand bool promotes and arithmetic is ordinary.
  EXPECT_TRUE(
      matches(b - make({1, 1, 1, 1}, Shape{4}, DType::i32), Shape{4}, DType::i32, {0, -1, 0, -1}));
}

TEST_F(Semantics, FloatToIntCastsSaturateAndNaNIsZero) {
  Tensor f = make({3e9, -3e9, kNaN, kInf, -kInf, 2.9, -2.9}, Shape{7}, DType::f32);
  EXPECT_EQ(kiln::cast(f, DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2, -2}));
  Tensor g = make({1e19, -1e19, kNaN, 5.5}, Shape{4}, DType::f64);
  EXPECT_EQ(kiln::cast(g, DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN, 0, 5}));
  Tensor h = make({kInf, -kInf, kNaN}, Shape{3}, DType::f16);
  EXPECT_EQ(kiln::cast(h, DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0}));
  // NaN -> bool is true (NaN != 0); -0.0 -> false.
  Tensor n = make({kNaN, -0.0, 1e-30}, Shape{3}, DType::f32);
  EXPECT_TRUE(matches(kiln::cast(n, DType::boolean), Shape{3}, DType::boolean, {1, 0, 1}));
  EXPECT_TRUE(matches(kiln::logical_not(n), Shape{3}, DType::boolean, {0, 1, 0}));
}

TEST_F(Semantics, ArgmaxCountsNaNAsMaximum) {
  Tensor x = make({1, kNaN, 5, kNaN}, Shape{4}, DType::f32);
  EXPECT_EQ(kiln::argmax(x).item<int64_t>(), 1);
  Tensor m = make({1, 2, kNaN, 7, 3, 9}, Shape{2, 3}, DType::f64);
  EXPECT_TRUE(matches(kiln::argmax(m, 1), Shape{2}, DType::i64, {2, 2}));
  EXPECT_TRUE(matches(kiln::argmax(m, 0), Shape{3}, DType::i64, {1, 1, 0}));
}

TEST_F(Semantics, RandomStreamOffsetsCountElements) {
  kiln::manual_seed(5);
  Vals whole = values(kiln::rand({15}));
  kiln::manual_seed(5);
  Tensor a = kiln::rand({10});
  Tensor b = kiln::rand({5});
  Vals parts = values(kiln::concat({a, b}, 0));
  EXPECT_EQ(parts, whole) << "the second draw continues at offset 10";
  // The shape does not matter, only the element count.
  kiln::manual_seed(5);
  Vals reshaped = values(kiln::reshape(kiln::rand({3, 5}), {15}));
  EXPECT_EQ(reshaped, whole);
  kiln::manual_seed(6);
  EXPECT_NE(values(kiln::rand({15})), whole);
}

TEST_F(Semantics, EvalComputesOnlyWhatIsAskedAndLiveIntermediates) {
  Tensor x = kiln::full({4}, 2.0);
  kiln::eval(x);
  Tensor y = x * 3;     // live intermediate
  Tensor z = y + 1;     // requested
  Tensor other = x - 5; // unrelated pending value
  kiln::eval(z);
  EXPECT_TRUE(z.is_realized());
  EXPECT_FALSE(y.is_realized()) << "a held value cheap to recompute from held values stays "
                                   "pending until read";
  EXPECT_FALSE(other.is_realized()) << "eval(t) leaves unrelated pending values pending";
  EXPECT_TRUE(matches(other, Shape{4}, DType::f32, Vals(4, -3.0)));
  EXPECT_TRUE(matches(y, Shape{4}, DType::f32, Vals(4, 6.0)));
  EXPECT_TRUE(matches(z, Shape{4}, DType::f32, Vals(4, 7.0)));
  kiln::set_write_held_values(true); // every held value written (A/B)
  Tensor y2 = x * 4, z2 = y2 + 1;
  kiln::eval(z2);
  EXPECT_TRUE(y2.is_realized()) << "written when held values are";
  kiln::set_write_held_values(false);
}

TEST_F(Semantics, CpuSumsAccumulateInDouble) {
  // Float accumulation would give 2^24 (each +1 rounds away); double gives 2^24 + 4.
  Tensor f = make({16777216, 1, 1, 1, 1}, Shape{5}, DType::f32);
  EXPECT_EQ(kiln::sum(f).item<double>(), 16777220.0);
  Tensor h = make({2048, 1, 1, 1, 1}, Shape{5}, DType::f16);
  EXPECT_EQ(kiln::sum(h).item<double>(), 2052.0);
  Tensor m = make({1e8, 1, -1e8}, Shape{3}, DType::f32);
  EXPECT_EQ(kiln::sum(m).item<double>(), 1.0);
  EXPECT_NEAR(kiln::mean(m).item<double>(), 1.0 / 3, 1e-7);
}

TEST_F(Semantics, F32MathAccuracyOverWideRanges) {
  Rng rng;
  // exp over nearly its whole finite f32 range, relative accuracy.
  Vals a = rng.uniform(2000, DType::f32, -87, 88);
  Tensor x = make(a, Shape{2000}, DType::f32);
  EXPECT_TRUE(all_close(values(kiln::exp(x)), ref_unary(a, [](double v) { return std::exp(v); }),
                        Tol{2e-6, 0}));
  // tanh and sigmoid of tiny and large-magnitude inputs, relative accuracy.
  Vals tiny = rng.nonzero(500, DType::f32, 1e-6, 1e-2);
  Tensor t = make(tiny, Shape{500}, DType::f32);
  EXPECT_TRUE(all_close(values(kiln::tanh(t)),
                        ref_unary(tiny, [](double v) { return std::tanh(v); }), Tol{2e-6, 0}))
      << "tanh(x) ~ x for small x";
  EXPECT_TRUE(all_close(values(kiln::sin(t)), ref_unary(tiny, [](double v) { return std::sin(v); }),
                        Tol{2e-6, 0}));
  Vals neg = rng.uniform(500, DType::f32, -80, -10);
  Tensor n = make(neg, Shape{500}, DType::f32);
  EXPECT_TRUE(all_close(values(kiln::sigmoid(n)),
                        ref_unary(neg, [](double v) { return 1 / (1 + std::exp(-v)); }),
                        Tol{1e-5, 0}))
      << "sigmoid of large negative inputs keeps relative accuracy";
  Vals mid = rng.uniform(2000, DType::f32, -10, 10);
  Tensor mt = make(mid, Shape{2000}, DType::f32);
  EXPECT_TRUE(all_close(values(kiln::tanh(mt)),
                        ref_unary(mid, [](double v) { return std::tanh(v); }), Tol{2e-6, 1e-7}));
  EXPECT_TRUE(all_close(values(kiln::sigmoid(mt)),
                        ref_unary(mid, [](double v) { return 1 / (1 + std::exp(-v)); }),
                        Tol{2e-6, 1e-7}));
}

class FusedVsEager : public OpsTestP<DType> {};

TEST_P(FusedVsEager, BitIdentical) {
  // docs/architecture.md: 16-bit types round after every op, so fused and eager agree exactly.
  DType t = GetParam();
  Rng rng;
  Vals a = rng.uniform(64, t, -3, 3), b = rng.nonzero(64, t, 0.5, 3);
  auto run = [&] {
    Tensor x = make(a, Shape{8, 8}, t), y = make(b, Shape{8, 8}, t);
    Tensor z = kiln::exp(x) / y - kiln::tanh(x * y) + kiln::sigmoid(kiln::transpose(x, 0, 1));
    z = kiln::sum(z * z, {1}) + kiln::max(kiln::abs(x), {0}) * 0.1;
    return values(z);
  };
  Vals lazy = run();
  Vals eager;
  {
    EagerGuard g(true);
    eager = run();
  }
  ASSERT_EQ(lazy.size(), eager.size());
  for (size_t i = 0; i < lazy.size(); ++i) EXPECT_EQ(lazy[i], eager[i]) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Ops, FusedVsEager, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return name(info.param); });

} // namespace

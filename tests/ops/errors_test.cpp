// Validation: each op throws kiln::Error naming the op in brackets, records nothing when it
// fails, and leaves earlier pending work intact.
#include "reference.h"

namespace {

using namespace kt;

class Errors : public OpsTest {
protected:
  void SetUp() override {
    OpsTest::SetUp();
    m34 = kiln::ones({3, 4});
  }
  Tensor m34;
};

TEST_F(Errors, Reshape) {
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(m34, {5}));
  EXPECT_KILN_ERROR("(3, 4)", kiln::reshape(m34, {5}));
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(m34, {-1, -1}));
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(m34, {-1, 5}));
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(m34, {2, -3}));
  EXPECT_KILN_ERROR("[reshape]", m34.reshape({13}));
}

TEST_F(Errors, TransposePermute) {
  EXPECT_KILN_ERROR("[transpose]", kiln::transpose(m34, 0, 2));
  EXPECT_KILN_ERROR("[transpose]", kiln::transpose(m34, -3, 0));
  EXPECT_KILN_ERROR("[permute]", kiln::permute(m34, {0}));
  EXPECT_KILN_ERROR("[permute]", kiln::permute(m34, {0, 0}));
  EXPECT_KILN_ERROR("[permute]", kiln::permute(m34, {0, 2}));
  EXPECT_KILN_ERROR("[permute]", kiln::permute(m34, {1, 0, 2}));
}

TEST_F(Errors, SliceExpandSqueeze) {
  EXPECT_KILN_ERROR("[slice]", kiln::slice(m34, 2, 0, 1));
  EXPECT_KILN_ERROR("[slice]", kiln::slice(m34, -3, 0, 1));
  EXPECT_KILN_ERROR("[slice]", kiln::slice(m34, 0, 0, 3, 0));
  EXPECT_KILN_ERROR("[slice]", kiln::slice(m34, 0, 3, 0, -1));
  EXPECT_KILN_ERROR("[expand]", kiln::expand(m34, {3, 5}));
  EXPECT_KILN_ERROR("[expand]", kiln::expand(m34, {4}));
  EXPECT_KILN_ERROR("[expand]", kiln::expand(kiln::ones({3, 1}), {2, 4}));
  EXPECT_KILN_ERROR("[unsqueeze]", kiln::unsqueeze(m34, 3));
  EXPECT_KILN_ERROR("[unsqueeze]", kiln::unsqueeze(m34, -4));
  EXPECT_KILN_ERROR("[squeeze]", kiln::squeeze(m34, 2));
  EXPECT_KILN_ERROR("[squeeze]", kiln::squeeze(m34, -3));
  Tensor r8 = kiln::ones({1, 1, 1, 1, 1, 1, 1, 2});
  EXPECT_KILN_ERROR("[unsqueeze]", kiln::unsqueeze(r8, 0));
}

TEST_F(Errors, ChunkSplitConcat) {
  EXPECT_KILN_ERROR("[chunk]", kiln::chunk(m34, 0));
  EXPECT_KILN_ERROR("[chunk]", kiln::chunk(m34, -2));
  EXPECT_KILN_ERROR("[chunk]", kiln::chunk(m34, 2, 2));
  EXPECT_KILN_ERROR("[split]", kiln::split(m34, int64_t{0}));
  EXPECT_KILN_ERROR("[split]", kiln::split(m34, std::vector<int64_t>{1, 1}, 0));
  EXPECT_KILN_ERROR("[split]", kiln::split(m34, std::vector<int64_t>{2, 3}, 1));
  EXPECT_KILN_ERROR("[split]", kiln::split(m34, int64_t{2}, 5));
  EXPECT_KILN_ERROR("[concat]", kiln::concat({}, 0));
  EXPECT_KILN_ERROR("[concat]", kiln::concat({m34, kiln::ones({3, 5})}, 0));
  EXPECT_KILN_ERROR("[concat]", kiln::concat({m34, kiln::ones({3})}, 0));
  EXPECT_KILN_ERROR("[concat]", kiln::concat({m34, m34}, 2));
}

TEST_F(Errors, Reductions) {
  EXPECT_KILN_ERROR("[sum]", kiln::sum(m34, {2}));
  EXPECT_KILN_ERROR("[sum]", kiln::sum(m34, {-3}));
  EXPECT_KILN_ERROR("[sum]", kiln::sum(m34, {1, -1}));
  EXPECT_KILN_ERROR("[mean]", kiln::mean(m34, {0, 5}));
  EXPECT_KILN_ERROR("[max]", kiln::max(m34, {2}));
  EXPECT_KILN_ERROR("[min]", kiln::min(m34, {-3}));
  EXPECT_KILN_ERROR("[argmax]", kiln::argmax(m34, 2));
  EXPECT_KILN_ERROR("[softmax]", kiln::softmax(m34, 2));
  EXPECT_KILN_ERROR("[log_softmax]", kiln::log_softmax(m34, -3));
  EXPECT_KILN_ERROR("[mean]", kiln::mean(kiln::ones({3}, DType::i32)));
  EXPECT_KILN_ERROR("[max]", kiln::max(kiln::ones({0, 3})));
  EXPECT_KILN_ERROR("[min]", kiln::min(kiln::ones({0})));
  EXPECT_KILN_ERROR("[argmax]", kiln::argmax(kiln::ones({0})));
}

TEST_F(Errors, ElementwiseMisc) {
  EXPECT_KILN_ERROR("[where]", kiln::where(kiln::ones({3, 4}), m34, m34));
  EXPECT_KILN_ERROR("[where]", kiln::where(kiln::ones({3, 4}, DType::i32), m34, 1.0));
  EXPECT_KILN_ERROR("[clamp]", kiln::clamp(m34, std::nullopt, std::nullopt));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(m34, m34));
}

TEST_F(Errors, Factories) {
  EXPECT_KILN_ERROR("[rand]", kiln::rand({3}, DType::i32));
  EXPECT_KILN_ERROR("[randn]", kiln::randn({3}, DType::i64));
  EXPECT_KILN_ERROR("[randn]", kiln::randn({3}, DType::boolean));
  EXPECT_KILN_ERROR("[zeros]", kiln::zeros({2, -1}));
  EXPECT_KILN_ERROR("[arange]", kiln::arange(0.0, 5.0, 0.0));
}

TEST_F(Errors, UndefinedTensorsAndShapes) {
  Tensor undef;
  EXPECT_FALSE(undef.defined());
  EXPECT_KILN_ERROR("", kiln::add(undef, m34));
  EXPECT_KILN_ERROR("", kiln::exp(undef));
  EXPECT_KILN_ERROR("", kiln::sum(undef));
  EXPECT_KILN_ERROR("", kiln::matmul(m34, undef));
  Shape s{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_KILN_ERROR("", s.push_back(9));
}

TEST_F(Errors, ItemNeedsExactlyOneElement) {
  EXPECT_KILN_ERROR("item", m34.item<float>());
  EXPECT_KILN_ERROR("item", kiln::ones({0}).item<double>());
  EXPECT_KILN_ERROR("item", kiln::ones({2}, DType::i32).item<int32_t>());
  EXPECT_EQ(kiln::full({1, 1}, 4.5).item<float>(), 4.5f);
  EXPECT_EQ(kiln::full({1}, int64_t{9}, DType::i64).item<int64_t>(), 9);
  EXPECT_EQ(kiln::full(Shape{}, 3, DType::i32).item<double>(), 3.0);
}

TEST_F(Errors, FailedCallRecordsNothing) {
  Tensor x = kiln::ones({3, 4});
  Tensor v5 = kiln::ones({5});
  kiln::eval(x, v5);
  int64_t before = kiln::stats().ops_recorded;
  EXPECT_KILN_ERROR("[add]", x + v5);
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(x, x));
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(x, {7}));
  EXPECT_KILN_ERROR("[sum]", kiln::sum(x, {4}));
  EXPECT_EQ(kiln::stats().ops_recorded, before) << "failed calls must record no node";
}

TEST_F(Errors, PendingWorkSurvivesErrors) {
  Rng rng;
  Vals a = rng.uniform(12, DType::f32, -2, 2), b = rng.uniform(12, DType::f32, -2, 2);
  Tensor x = make(a, Shape{3, 4}, DType::f32), y = make(b, Shape{3, 4}, DType::f32);
  Tensor xy = x * y;        // pending
  Tensor e = kiln::exp(xy); // pending, depends on xy
  EXPECT_FALSE(xy.is_realized());
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(xy, y));
  EXPECT_KILN_ERROR("[add]", xy + kiln::ones({2}));
  EXPECT_KILN_ERROR("[softmax]", kiln::softmax(e, 5));
  EXPECT_KILN_ERROR("[mean]", kiln::mean(kiln::ones({2}, DType::i64)));
  Vals exy = ref_binary(a, Shape{3, 4}, b, Shape{3, 4}, [](double u, double v) { return u * v; });
  EXPECT_TRUE(matches(xy, Shape{3, 4}, DType::f32, exy));
  EXPECT_TRUE(
      matches(e, Shape{3, 4}, DType::f32, ref_unary(exy, [](double v) { return std::exp(v); })));
  // And new work after the errors is fine too.
  EXPECT_TRUE(matches(kiln::matmul(xy, kiln::transpose(y, 0, 1)), Shape{3, 3}, DType::f32, [&] {
    Vals out(9, 0.0);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) out[i * 3 + j] += exy[i * 4 + k] * b[j * 4 + k];
    return out;
  }()));
}

TEST_F(Errors, ErrorsWhileValuesArePendingInEagerMode) {
  EagerGuard g(true);
  Tensor x = kiln::full({2, 2}, 3.0);
  Tensor y = x * x;
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(y, kiln::ones({3})));
  EXPECT_TRUE(matches(y, Shape{2, 2}, DType::f32, Vals(4, 9.0)));
}

} // namespace

// Inputs at the edges of what C++ lets a caller pass: extents whose products overflow int64,
// host data whose size does not match its shape, scalars a dtype cannot hold, dtypes and
// devices made from integers. Each throws kiln::Error naming the op and the values, and a
// failed call records nothing.
#include "reference.h"

#include <cstdint>
#include <limits>

namespace {

using namespace kt;

constexpr int64_t kBig = int64_t(1) << 32;
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

class BadInput : public OpsTest {};

TEST_F(BadInput, ExtentsWhoseProductOverflowsAreRejected) {
  EXPECT_KILN_ERROR("[zeros] shape (4294967296, 4294967296) of f32 is too large",
                    kiln::zeros({kBig, kBig}));
  EXPECT_KILN_ERROR("[full]", kiln::full({kBig, kBig, 2}, 1.0));
  EXPECT_KILN_ERROR("[rand]", kiln::rand({kBig, kBig}));
  EXPECT_KILN_ERROR("[from_data]", kiln::from_data(nullptr, DType::f64, {int64_t(1) << 61}));
  // Bytes overflow even though the element count fits.
  EXPECT_KILN_ERROR("[ones]", kiln::ones({int64_t(1) << 62}, DType::f64));
  // A zero extent does not hide the others: strides would still overflow.
  EXPECT_KILN_ERROR("[zeros]", kiln::zeros({0, kBig, kBig}));
  EXPECT_EQ(kiln::zeros({0, kBig}).numel(), 0);
}

TEST_F(BadInput, ReshapeInferenceDoesNotWrap) {
  Tensor m = kiln::reshape(kiln::arange(12, DType::f32), {3, 4});
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(m, {(int64_t(1) << 62) + 3, 4}));
  EXPECT_KILN_ERROR("[reshape]", kiln::reshape(m, {kBig, kBig, -1}));
  EXPECT_EQ(kiln::reshape(m, {-1, 4}).shape(), (Shape{3, 4}));
}

TEST_F(BadInput, ArangeCountOutsideInt64) {
  EXPECT_KILN_ERROR("[arange] [0, 1e+19) in steps of 1 has 1e+19 elements",
                    kiln::arange(0.0, 1e19));
  EXPECT_KILN_ERROR("[arange]", kiln::arange(-1e308, 1e308, 1.0));
  EXPECT_KILN_ERROR("[arange]", kiln::arange(0.0, 2e18, 1.0, DType::f64)); // 1.6e19 bytes
  EXPECT_EQ(kiln::arange(0.0, 1e19, 1e18).numel(), 10);
}

TEST_F(BadInput, BroadcastAndMatmulResultsThatOverflow) {
  Tensor col = kiln::expand(kiln::ones({1, 1}), {kBig, 1});
  Tensor row = kiln::expand(kiln::ones({1, 1}), {1, kBig});
  EXPECT_KILN_ERROR("[add]", col + row);
  // f16 elements that fit, whose f64 result would not: refused before the cast is recorded.
  Tensor half = kiln::expand(kiln::ones({1}, DType::f16), {int64_t(1) << 61});
  EXPECT_KILN_ERROR("[add] shape (2305843009213693952,) of f64 is too large",
                    half + kiln::ones({1}, DType::f64));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(col, row));
  EXPECT_KILN_ERROR("[expand]", kiln::expand(kiln::ones({1, 1}), {kBig, kBig}));
}

TEST_F(BadInput, SliceAndSplitWithExtremeSizes) {
  Tensor m = kiln::reshape(kiln::arange(12, DType::f32), {3, 4});
  Tensor s = kiln::slice(m, 1, 0, 4, kMax64);
  EXPECT_EQ(s.shape(), (Shape{3, 1}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(kiln::slice(m, 1, 1, kMax64, kMax64).to_vector<float>(), (std::vector<float>{1, 5, 9}));
  EXPECT_EQ(kiln::slice(m, 0, 1, kMax64, kMax64).to_vector<float>(),
            (std::vector<float>{4, 5, 6, 7})); // a row stride of 4 times the step would overflow
  EXPECT_KILN_ERROR("[split] sizes 9223372036854775807, 9223372036854775807, 4 overflow",
                    kiln::split(m, std::vector<int64_t>{kMax64, kMax64, 4}, 1));
}

TEST_F(BadInput, ConcatExtentsThatOverflow) {
  Tensor huge = kiln::expand(kiln::ones({1}, DType::boolean), {int64_t(1) << 61});
  EXPECT_KILN_ERROR("[concat] the extents along dim 0 overflow int64",
                    kiln::concat({huge, huge, huge, huge}));
}

TEST_F(BadInput, HostDataMustMatchTheShape) {
  EXPECT_KILN_ERROR("[from_vector] got 3 elements for shape (4,), which holds 4",
                    kiln::from_vector<float>({1, 2, 3}, Shape{4}));
  EXPECT_KILN_ERROR("[from_vector] got 4 elements for shape (2,)",
                    kiln::from_vector<float>({1, 2, 3, 4}, Shape{2}));
  EXPECT_KILN_ERROR("[from_vector]", kiln::from_vector<bool>({true}, Shape{2}));
  EXPECT_KILN_ERROR("[from_data] data is a null pointer but shape (3,) has 3 elements",
                    kiln::from_data(nullptr, DType::f32, {3}));
  EXPECT_EQ(kiln::from_data(nullptr, DType::f32, {0, 3}).numel(), 0);
  EXPECT_EQ(kiln::from_vector<float>({1, 2, 3, 4}, Shape{2, 2}).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(BadInput, FillValuesOutsideTheDtype) {
  EXPECT_KILN_ERROR("[full] value 3000000000 cannot be converted to i32 without overflow",
                    kiln::full({2}, 3e9, DType::i32));
  EXPECT_KILN_ERROR("[full] value 3000000000 cannot",
                    kiln::full({2}, int64_t{3000000000}, DType::i32));
  EXPECT_KILN_ERROR("[full] value nan", kiln::full({2}, kNaN, DType::i64));
  EXPECT_KILN_ERROR("[full] value inf", kiln::full({2}, kInf, DType::i32));
  EXPECT_KILN_ERROR("[full] value 1e+19", kiln::full({2}, 1e19, DType::i64));
  EXPECT_KILN_ERROR("[full] value 100000 cannot be converted to f16",
                    kiln::full({2}, 1e5, DType::f16));
  EXPECT_KILN_ERROR("[full]", kiln::full({2}, 1e39, DType::f32));
  // What does fit: truncation toward zero (as PyTorch), the ends of the range, infinities and
  // NaN in floating dtypes.
  EXPECT_EQ(kiln::full({1}, -2.9, DType::i32).item<int32_t>(), -2);
  EXPECT_EQ(kiln::full({1}, 2147483647.0, DType::i32).item<int32_t>(), 2147483647);
  EXPECT_EQ(kiln::full({1}, -9223372036854775807.0 - 1, DType::i64).item<int64_t>(),
            std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(std::isinf(kiln::full({1}, kInf, DType::f16).item<float>()));
  EXPECT_TRUE(std::isnan(kiln::full({1}, kNaN, DType::bf16).item<float>()));
  EXPECT_EQ(kiln::full({1}, 65504.0, DType::f16).item<float>(), 65504.0f);
}

TEST_F(BadInput, ScalarOperandsOutsideTheDtype) {
  Tensor i = kiln::ones({2}, DType::i32);
  EXPECT_KILN_ERROR("[add] value 1099511627776 cannot be converted to i32", i + (int64_t(1) << 40));
  EXPECT_KILN_ERROR("[where]", kiln::where(kiln::ones({2}, DType::boolean), i, int64_t(1) << 40));
  EXPECT_EQ((i + 2147483646).to_vector<int32_t>(), (std::vector<int32_t>{2147483647, 2147483647}));
  // A floating scalar promotes an integer tensor, so it never has to fit the integer dtype.
  EXPECT_EQ((i * 3e9).dtype(), DType::f32);
}

TEST_F(BadInput, NonFiniteFloatingScalarsAreDefined) {
  // Converting inf, NaN or 1e300 to int64 is undefined behaviour in C++; Scalar saturates.
  EXPECT_EQ(kiln::Scalar(kInf).i, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(kiln::Scalar(-kInf).i, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(kiln::Scalar(kNaN).i, 0);
  EXPECT_EQ(kiln::Scalar(1e300).i, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(kiln::Scalar(-2.5).i, -2);
  Tensor x = kiln::from_vector<float>({1, -1, 0});
  std::vector<float> y = (x * INFINITY).to_vector<float>();
  EXPECT_EQ(y[0], INFINITY);
  EXPECT_EQ(y[1], -INFINITY);
  EXPECT_TRUE(std::isnan(y[2]));
}

TEST_F(BadInput, RejectedScalarsRecordNothing) {
  Tensor i = kiln::ones({2}, DType::i32);
  kiln::eval(i);
  const int64_t before = kiln::stats().ops_recorded;
  EXPECT_KILN_ERROR("[full]", kiln::full({2}, 3e9, DType::i32));
  EXPECT_KILN_ERROR("[add]", i + (int64_t(1) << 40));
  EXPECT_KILN_ERROR("[zeros]", kiln::zeros({kBig, kBig}));
  EXPECT_EQ(kiln::stats().ops_recorded, before);
}

TEST_F(BadInput, DtypesAndDevicesMadeFromIntegers) {
  const auto bad_dtype = static_cast<DType>(42);
  EXPECT_KILN_ERROR("[zeros] invalid dtype (value 42)", kiln::zeros({2}, bad_dtype));
  EXPECT_KILN_ERROR("[rand]", kiln::rand({2}, bad_dtype));
  EXPECT_KILN_ERROR("[arange]", kiln::arange(0.0, 3.0, 1.0, bad_dtype));
  EXPECT_KILN_ERROR("[from_data]", kiln::from_data(nullptr, bad_dtype, {0}));
  EXPECT_KILN_ERROR("[cast]", kiln::cast(kiln::ones({2}), bad_dtype));
  const kiln::Device bad_device{static_cast<kiln::Device::Kind>(7), 0};
  EXPECT_EQ(bad_device.str(), "invalid device (kind 7, index 0)");
  EXPECT_FALSE(kiln::is_available(bad_device));
  EXPECT_KILN_ERROR("[zeros] invalid device (kind 7, index 0)",
                    kiln::zeros({2}, DType::f32, bad_device));
  EXPECT_KILN_ERROR("[set_default_device]", kiln::set_default_device(bad_device));
}

TEST_F(BadInput, SoftmaxOverAZeroSizeDimIsEmpty) {
  for (auto fn : {&kiln::softmax, &kiln::log_softmax}) {
    Tensor y = fn(kiln::ones({3, 0}), -1);
    EXPECT_EQ(y.shape(), (Shape{3, 0}));
    EXPECT_EQ(y.dtype(), DType::f32);
    EXPECT_TRUE(y.to_vector<float>().empty());
    EXPECT_EQ(fn(kiln::ones({0, 4}, DType::i32), 0).shape(), (Shape{0, 4}));
  }
}

} // namespace

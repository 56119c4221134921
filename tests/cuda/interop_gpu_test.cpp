// Memory kiln does not own, on a GPU (engine/interop.cpp): from_blob over device memory, the
// device check that refuses a host pointer given as CUDA memory, data_ptr and DLPack with
// CUDA tensors. Skipped without a CUDA device.
#include <kiln/kiln.h>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct InteropGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
  }
};

template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(InteropGpu, FromBlobAdoptsDeviceMemoryWithoutACopy) {
  std::vector<float> v(1000);
  std::iota(v.begin(), v.end(), 0.0f);
  const Tensor src = from_vector(v, {10, 100}, Device::cuda(0)); // device memory kiln owns
  const void* p = src.data_ptr();
  int deleted = 0;
  {
    Tensor a = from_blob(const_cast<void*>(p), v.size() * sizeof(float), DType::f32, {100, 10},
                         {1, 100}, Device::cuda(0), [&](void*) { ++deleted; }); // transposed
    EXPECT_EQ(a.data_ptr(), p);
    Tensor s = sum(a * 2.0f, {1}); // row r of a is column r of src
    const std::vector<float> got = s.to_vector<float>();
    for (int r = 0; r < 100; ++r) {
      double want = 0;
      for (int c = 0; c < 10; ++c) want += 2.0 * v[size_t(c) * 100 + r];
      ASSERT_NEAR(got[r], want, 1e-3) << r;
    }
    a = a + 1.0f; // the result never lands in the adopted memory
    eval(a);
    EXPECT_NE(a.data_ptr(), p);
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(src.to_vector<float>(), v) << "the adopted memory is unchanged";
}

TEST_F(InteropGpu, AHostPointerIsNotDeviceMemory) {
  std::vector<float> host(16);
  const std::string e =
      error_of([&] { from_blob(host.data(), 64, DType::f32, {16}, {}, Device::cuda(0)); });
  EXPECT_NE(e.find("[from_blob]"), std::string::npos) << e;
  EXPECT_NE(e.find("not device memory"), std::string::npos) << e;
}

TEST_F(InteropGpu, DlpackRoundTripOfACudaTensor) {
  Tensor x = arange(0, 64, 1, DType::f32, Device::cuda(0)).reshape({8, 8}) * 0.5f;
  DLManagedTensor* m = to_dlpack(transpose(x, 0, 1));
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  EXPECT_EQ(m->dl_tensor.strides[0], 1);
  Tensor back = from_dlpack(m);
  EXPECT_EQ(back.device(), Device::cuda(0));
  EXPECT_EQ(back.data_ptr(), x.data_ptr());
  const std::vector<float> t = back.to_vector<float>();
  EXPECT_EQ(t[1], 4.0f); // element (0, 1) of the transpose: x[1][0] = 8 * 0.5
}

} // namespace

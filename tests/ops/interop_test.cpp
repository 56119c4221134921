// Memory kiln does not own (engine/interop.cpp): from_blob over the caller's memory with and
// without a deleter, copy_to into the caller's memory, data_ptr, DLPack export and import, and
// the errors for bad input. Host memory on the CPU; tests/cuda covers device pointers.
#include <kiln/kiln.h>

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct Interop : ::testing::Test {
  void SetUp() override {
    set_default_device(Device::cpu());
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

TEST_F(Interop, FromBlobReadsTheCallersMemoryWithoutACopyAndNeverWritesIt) {
  std::vector<float> m(12);
  std::iota(m.begin(), m.end(), 0.0f); // a 3 x 4 row-major matrix
  const std::vector<float> before = m;
  Tensor a = from_blob(m.data(), m.size() * sizeof(float), DType::f32, {3, 4});
  EXPECT_EQ(a.data_ptr(), m.data()) << "adopted, not copied";
  EXPECT_EQ(a.to_vector<float>(), m);
  // A column, through strides: elements 1, 5, 9.
  Tensor col = from_blob(m.data() + 1, (m.size() - 1) * sizeof(float), DType::f32, {3}, {4});
  EXPECT_EQ(col.to_vector<float>(), std::vector<float>({1, 5, 9}));
  // A result written where an input dies goes to kiln's own memory, not the caller's.
  a = a * 2.0f + 1.0f;
  eval(a);
  EXPECT_EQ(m, before);
  EXPECT_NE(a.data_ptr(), m.data());
  EXPECT_EQ(a.to_vector<float>()[11], 23.0f);
}

TEST_F(Interop, TheDeleterRunsOnceWhenNothingReadsTheMemoryAnyMore) {
  int calls = 0;
  void* released = nullptr;
  auto* m = new std::array<double, 6>{1, 2, 3, 4, 5, 6};
  void* const original = m->data();
  {
    Tensor a =
        from_blob(m->data(), sizeof(*m), DType::f64, {2, 3}, {}, Device::cpu(), [&](void* p) {
          ++calls;
          released = p;
          delete m;
        });
    Tensor t = transpose(a, 0, 1); // a view: shares the memory
    Tensor s = sum(a * a);         // pending, reads it
    a = Tensor();
    EXPECT_EQ(calls, 0) << "the view and the pending sum still read it";
    EXPECT_EQ(s.item<double>(), 91.0);
    EXPECT_EQ(t.to_vector<double>(), std::vector<double>({1, 4, 2, 5, 3, 6}));
    EXPECT_EQ(calls, 0);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(released, original);
}

TEST_F(Interop, ADeleterThatThrowsIsReportedAndIgnored) {
  std::vector<float> m(4, 1.0f);
  testing::internal::CaptureStderr();
  {
    Tensor a = from_blob(m.data(), 16, DType::f32, {4}, {}, Device::cpu(),
                         [](void*) { throw std::runtime_error("boom"); });
    EXPECT_EQ(a.to_vector<float>(), m);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("deleter"), std::string::npos) << err;
  EXPECT_NE(err.find("boom"), std::string::npos) << err;
  EXPECT_EQ(sum(ones({3})).item<float>(), 3.0f) << "kiln goes on";
}

TEST_F(Interop, BadBlobsAreErrorsNamingTheProblem) {
  alignas(16) std::array<float, 8> m{};
  char* bytes = reinterpret_cast<char*>(m.data());
  EXPECT_NE(
      error_of([&] { from_blob(bytes + 1, 28, DType::f32, {4}); }).find("[from_blob] data 0x"),
      std::string::npos);
  EXPECT_NE(error_of([&] { from_blob(bytes + 1, 28, DType::f32, {4}); }).find("not aligned"),
            std::string::npos);
  const std::string past = error_of([&] { from_blob(m.data(), 32, DType::f32, {3, 4}); });
  EXPECT_NE(past.find("reach element 11"), std::string::npos) << past;
  EXPECT_NE(past.find("past the 32 bytes"), std::string::npos) << past;
  EXPECT_NE(error_of([&] {
              from_blob(m.data(), 32, DType::f32, {2, 2}, {2, 6});
            }).find("reach element 8"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              from_blob(m.data(), 32, DType::f32, {2, 2}, {-2, 1});
            }).find("negative"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              from_blob(m.data(), 32, DType::f32, {2, 2}, {1});
            }).find("1 strides for shape (2, 2)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { from_blob(nullptr, 32, DType::f32, {2}); }).find("null pointer"),
            std::string::npos);
  int deleted = 0; // a failed adoption leaves the memory to the caller
  error_of([&] {
    from_blob(m.data(), 4, DType::f32, {2}, {}, Device::cpu(), [&](void*) { ++deleted; });
  });
  EXPECT_EQ(deleted, 0);
  Tensor empty = from_blob(nullptr, 0, DType::f32, {0, 3});
  EXPECT_EQ(empty.numel(), 0);
}

TEST_F(Interop, CopyToFillsTheCallersMemoryConvertingAsAstype) {
  Tensor x = arange(0, 6, 1, DType::f32).reshape({2, 3}) * 1.5f;
  std::array<double, 6> d{};
  x.copy_to(d);
  EXPECT_EQ(d[5], 7.5);
  std::vector<int32_t> i(6, -1);
  x.copy_to(i);
  EXPECT_EQ(i[5], 7);
  std::vector<float> f(6);
  transpose(x, 0, 1).copy_to(std::span<float>(f)); // a view, in row-major order of the view
  EXPECT_EQ(f, std::vector<float>({0, 4.5f, 1.5f, 6, 3, 7.5f}));
  std::vector<float> small(5);
  const std::string e = error_of([&] { x.copy_to(small); });
  EXPECT_NE(e.find("[copy_to] the destination holds 5 elements, the tensor (shape (2, 3), f32) "
                   "has 6"),
            std::string::npos)
      << e;
}

// to_vector readies a large result's pages first (huge pages, faulted on several threads):
// every element still arrives, converted, and none of the page preparation shows.
TEST_F(Interop, ToVectorOfALargeTensorHasEveryValue) {
  const int64_t n = (int64_t(24) << 20) / 4 + 3; // 24 MiB of f32 and a bit: several huge pages
  Tensor x = arange(0, double(n), 1, DType::i32);
  const std::vector<int32_t> v = x.to_vector<int32_t>();
  ASSERT_EQ(v.size(), size_t(n));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[size_t(i)], i);
  const std::vector<double> d = (x - 5).to_vector<double>();
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(d[size_t(i)], double(i - 5));
  EXPECT_EQ(d.back(), double(n - 6));
}

TEST_F(Interop, DlpackExportSharesMemoryAndHoldsTheValue) {
  Tensor x = arange(0, 12, 1, DType::f32).reshape({3, 4}) + 0.5f;
  Tensor xt = transpose(x, 0, 1); // strides (1, 4) once x is realized
  eval(x);
  DLManagedTensor* m = to_dlpack(xt);
  ASSERT_NE(m, nullptr);
  const DLTensor& d = m->dl_tensor;
  EXPECT_EQ(d.device.device_type, kDLCPU);
  EXPECT_EQ(d.ndim, 2);
  EXPECT_EQ(d.shape[0], 4);
  EXPECT_EQ(d.strides[0], 1);
  EXPECT_EQ(d.strides[1], 4);
  EXPECT_EQ(d.dtype.code, kDLFloat);
  EXPECT_EQ(d.dtype.bits, 32);
  EXPECT_EQ(d.data, x.data_ptr()) << "no copy";
  const void* data = d.data;
  x = Tensor(), xt = Tensor(); // the export still holds the value
  EXPECT_EQ(static_cast<const float*>(data)[5], 5.5f);
  // Imported back: the same memory, its strides, and the export's deleter when done.
  Tensor back = from_dlpack(m);
  EXPECT_EQ(back.data_ptr(), data);
  EXPECT_EQ(back.strides(), Shape({1, 4}));
  EXPECT_EQ(back.to_vector<float>()[1], 4.5f);
  back = Tensor(); // m's deleter runs here (ASan checks nothing leaks or is freed twice)
}

TEST_F(Interop, DlpackImportOfAForeignTensor) {
  static int deleted = 0;
  struct Owned {
    DLManagedTensor m{};
    std::vector<int64_t> shape{2, 3};
    std::vector<int32_t> data{1, 2, 3, 4, 5, 6};
  };
  auto* o = new Owned;
  o->m.dl_tensor = {o->data.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, o->shape.data(), nullptr, 0};
  o->m.manager_ctx = o;
  o->m.deleter = [](DLManagedTensor* self) {
    ++deleted;
    delete static_cast<Owned*>(self->manager_ctx);
  };
  deleted = 0;
  {
    Tensor t = from_dlpack(&o->m);
    EXPECT_EQ(t.dtype(), DType::i32);
    EXPECT_EQ(sum(t).item<int64_t>(), 21);
  }
  EXPECT_EQ(deleted, 1);
  // Unsupported: a dtype kiln lacks, another device; the tensor stays the caller's.
  std::vector<int64_t> shape{4};
  std::vector<uint8_t> bytes(4);
  DLManagedTensor u{};
  u.dl_tensor = {bytes.data(), {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape.data(), nullptr, 0};
  EXPECT_NE(error_of([&] { from_dlpack(&u); }).find("has no kiln dtype"), std::string::npos);
  u.dl_tensor.dtype = {kDLFloat, 32, 1};
  u.dl_tensor.device = {kDLOpenCL, 0};
  EXPECT_NE(error_of([&] { from_dlpack(&u); }).find("neither the CPU nor CUDA"), std::string::npos);
  EXPECT_NE(error_of([&] { from_dlpack(nullptr); }).find("null"), std::string::npos);
}

// In-place reuse is decided when a plan is made, and the plan is cached: a plan made for kiln's
// own memory must not write into adopted memory when it runs again (the key tells them apart).
TEST_F(Interop, ACachedPlanNeverWritesIntoAdoptedMemory) {
  std::vector<float> v(256, 1.5f), m(256, 2.5f);
  const std::vector<float> before = m;
  for (int i = 0; i < 3; ++i) {
    Tensor y;
    {
      Tensor x = i == 0 ? from_vector(v, {256}) : from_blob(m.data(), 1024, DType::f32, {256});
      y = x * 2.0f + 1.0f; // x dies before eval: its buffer may take y, unless it is adopted
    }
    reset_stats();
    eval(y);
    EXPECT_EQ(stats().buffers_reused, i == 0 ? 1 : 0) << i;
    EXPECT_EQ(y.to_vector<float>()[0], i == 0 ? 4.0f : 6.0f);
  }
  EXPECT_EQ(m, before);
}

// A held value is left pending only when what it reads stays unchanged: adopted memory may
// change after the evaluation, so a value computed from it is written.
TEST_F(Interop, HeldValuesOfAdoptedMemoryAreWritten) {
  std::vector<float> m(64, 1.0f);
  Tensor x = from_blob(m.data(), 256, DType::f32, {64});
  Tensor held = x * 2.0f, o = held + 1.0f;
  eval(o);
  EXPECT_TRUE(held.is_realized()) << last_plan();
  m[0] = 100.0f; // the caller changes its memory
  EXPECT_EQ(held.to_vector<float>()[0], 2.0f);
}

} // namespace

namespace {

// Pinned memory comes from the CUDA driver: without a usable GPU, pin_memory is an error that
// says so (and nothing is pinned).
TEST_F(Interop, PinMemoryWithoutAGpuIsAnError) {
  if (is_available(Device::cuda(0))) GTEST_SKIP() << "a CUDA device is usable here";
  Tensor x = ones({4});
  EXPECT_FALSE(x.is_pinned());
  const std::string e = error_of([&] { x.pin_memory(); });
  EXPECT_NE(e.find("[pin_memory] page-locked host memory comes from the CUDA driver, and cuda:0 "
                   "is not usable"),
            std::string::npos)
      << e;
}

} // namespace

// Uploads on the copy stream (runtime/cuda/copy_stream.h): a large copy runs beside the kernels
// queued before it, so everything that reads, frees or waits for its buffer must still come
// after it. Each test reads an upload at the earliest moment it can (a kernel issued right after
// the copy, a sync, a reuse of the memory) and checks every value; run with poisoned allocations
// (scripts/gpu-check), a reader that overtook the copy sees NaN or -1. Skipped without a CUDA
// device.
#include "runtime/cuda/copy_stream.h"

#include <kiln/kiln.h>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace kiln;
using detail::CopyStream;

namespace {

struct CopyStreamGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
  }
};

constexpr int64_t kLarge = int64_t(16) << 20; // 64 MiB of f32: milliseconds on the link

std::vector<float> values(int64_t n, float salt) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i % 8191) * 0.5f + salt;
  return v;
}

// x * 3 + 1 read back and compared with the host's arithmetic, element for element.
void expect_times_three_plus_one(const Tensor& gpu_input, const std::vector<float>& host) {
  Tensor y = gpu_input * 3.0f + 1.0f; // issued right after the copy
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(got[i], host[i] * 3.0f + 1.0f) << "element " << i;
}

TEST_F(CopyStreamGpu, AKernelRightAfterAPinnedUploadReadsAllOfIt) {
  const std::vector<float> host = values(kLarge, 1);
  Tensor p = from_vector(host, {kLarge}, Device::cpu()).pin_memory();
  expect_times_three_plus_one(p.to(Device::cuda(0)), host);
}

TEST_F(CopyStreamGpu, AKernelRightAfterAStagedUploadReadsAllOfIt) {
  const std::vector<float> host = values(kLarge, 2);
  expect_times_three_plus_one(from_vector(host, {kLarge}, Device::cuda(0)), host);
  Tensor cpu = from_vector(host, {kLarge}, Device::cpu());
  expect_times_three_plus_one(cpu.to(Device::cuda(0)), host); // a transfer step of a plan
}

TEST_F(CopyStreamGpu, UploadsJustAboveAndBelowTheThresholdAreRight) {
  const int64_t at = static_cast<int64_t>(CopyStream::kMinBytes / sizeof(float));
  for (int64_t n : {at - 1, at, at + 1}) {
    SCOPED_TRACE(n);
    const std::vector<float> host = values(n, float(n % 7));
    expect_times_three_plus_one(from_vector(host, {n}, Device::cuda(0)), host);
    expect_times_three_plus_one(
        from_vector(host, {n}, Device::cpu()).pin_memory().to(Device::cuda(0)), host);
  }
}

// The upload and the matmul queued before it run at the same time; the matmul's result and the
// uploaded values must both be right, and neither may see the other's memory.
TEST_F(CopyStreamGpu, AnUploadBesideARunningMatmulLeavesBothRight) {
  const int64_t d = 2048;
  const std::vector<float> a_host = values(d * d, 0);
  Tensor a = from_vector(a_host, {d, d}, Device::cuda(0)) * (1.0f / 4096);
  eval(a);
  const std::vector<float> host = values(kLarge, 3);
  Tensor p = from_vector(host, {kLarge}, Device::cpu()).pin_memory();
  Tensor m = matmul(a, a);
  eval(m); // queued, not waited for
  Tensor up = p.to(Device::cuda(0));
  eval(up);
  expect_times_three_plus_one(up, host);
  const std::vector<float> a_vals = a.to_vector<float>();
  const std::vector<float> m_vals = m.to_vector<float>();
  for (int64_t i : {int64_t(0), d / 2, d - 1})
    for (int64_t j : {int64_t(0), d / 3, d - 1}) {
      double want = 0;
      for (int64_t k = 0; k < d; ++k)
        want += double(a_vals[size_t(i * d + k)]) * double(a_vals[size_t(k * d + j)]);
      EXPECT_NEAR(m_vals[size_t(i * d + j)], want, 1e-3 * (1 + std::abs(want))) << i << "," << j;
    }
}

// A buffer released while a kernel still reads it goes back to the pool in the compute
// stream's order; an upload on the copy stream that gets the same memory must wait for that
// kernel, or the kernel reads the upload's values.
TEST_F(CopyStreamGpu, AnUploadIntoMemoryAQueuedKernelStillReadsWaitsForIt) {
  const int64_t d = 2048; // 16 MiB: above the recycled blocks, so it goes back to the pool
  const std::vector<float> x_host = values(d * d, 4);
  Tensor x = from_vector(x_host, {d, d}, Device::cuda(0)) * (1.0f / 4096);
  eval(x);
  const std::vector<float> x_vals = x.to_vector<float>();
  Tensor s = sum(matmul(x, x), {0, 1}); // slow enough to be running when x is released
  eval(s);
  x = Tensor();
  std::vector<Tensor> uploads;
  const std::vector<float> other = values(d * d, 5);
  for (int k = 0; k < 4; ++k) uploads.push_back(from_vector(other, {d, d}, Device::cuda(0)));
  double want = 0; // sum over i, j of (x x)_ij = sum over k of (column sums) * (row sums)
  for (int64_t k = 0; k < d; ++k) {
    double col = 0, row = 0;
    for (int64_t i = 0; i < d; ++i) col += x_vals[size_t(i * d + k)];
    for (int64_t j = 0; j < d; ++j) row += x_vals[size_t(k * d + j)];
    want += col * row;
  }
  EXPECT_NEAR(s.item<float>(), want, 1e-3 * std::abs(want));
  for (const Tensor& u : uploads) ASSERT_EQ(u.to_vector<float>(), other);
}

// sync() and a raw read through data_ptr() on another stream come after the copy.
TEST_F(CopyStreamGpu, SyncWaitsForTheCopyStream) {
  const std::vector<float> host = values(kLarge, 6);
  Tensor up = from_vector(host, {kLarge}, Device::cpu()).pin_memory().to(Device::cuda(0));
  eval(up);
  const void* device = up.data_ptr(); // synchronizes
  std::vector<float> raw(host.size(), -1);
  ASSERT_EQ(cudaMemcpy(raw.data(), device, raw.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(raw, host);
}

} // namespace

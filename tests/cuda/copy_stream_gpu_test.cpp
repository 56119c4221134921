// Copies on the copy streams (runtime/cuda/copy_stream.h). A large upload runs beside the
// kernels queued before it, so everything that reads, frees or waits for its buffer must still
// come after it; a download into pinned memory returns before the data is there, so every host
// reader must wait for it, and its block must not be reused while it is written. Each test reads
// a copy's result at the earliest moment it can (a kernel or a host read right after the copy,
// a sync, a reuse of the memory) and checks every value; run with poisoned allocations
// (scripts/gpu-check), a reader that overtook an upload sees NaN or -1. Skipped without a CUDA
// device.
#include "runtime/cuda/copy_stream.h"

#include <kiln/kiln.h>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
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

constexpr int64_t kLarge = int64_t(64) << 20; // 256 MiB of f32: ~5 ms on the link

std::vector<float> values(int64_t n, float salt) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i % 8191) * 0.5f + salt;
  return v;
}

// Queues four matmuls of about 3 ms each and returns the (pending) result: the next large upload
// then finds the compute stream busy (the host plans it in well under that) and takes the upload
// stream (an idle compute stream gets the copy itself), and a reader queued after both runs
// before a 256 MiB copy ends unless it waits for it. (With one matmul, and in full suites with two,
// an upload found the GPU idle already on the H100's loaded host.)
Tensor keep_compute_stream_busy() {
  static Tensor a = [] {
    Tensor t = from_vector(values(4096 * 4096, 0), {4096, 4096}, Device::cuda(0)) * (1.0f / 8192);
    eval(t);
    kiln::sync();
    return t;
  }();
  Tensor m = matmul(matmul(matmul(matmul(a, a), a), a), a);
  eval(m);
  return m;
}

// Compiles the kernel that expect_times_three_plus_one runs for n elements, so that a later
// run launches it right after the copy (a first compile would give the copy time to finish).
void warm_times_three_plus_one(int64_t n) {
  Tensor w = full({n}, 0.0, DType::f32, Device::cuda(0));
  eval(w);
  ASSERT_EQ((w * 3.0f + 1.0f).to_vector<float>().back(), 1.0f);
}

// x * 3 + 1 read back and compared with the host's arithmetic, element for element.
void expect_times_three_plus_one(const Tensor& gpu_input, const std::vector<float>& host) {
  Tensor y = gpu_input * 3.0f + 1.0f; // issued right after the copy
  eval(y); // before to_vector prepares its pages (tens of ms for 256 MiB)
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(got[i], host[i] * 3.0f + 1.0f) << "element " << i;
}

// x * 3 + 1 of what `upload` returns, issued while a matmul runs; `beside`: whether the copy
// must have run on the upload stream (else the test would not test it). Whether the compute
// stream is still busy when the upload is issued depends on the host's timing (in the whole
// CUDA suite on the H100's host an upload found it idle in two runs of two, alone never): up to
// three tries for one that runs beside the matmul, the values checked every time.
void check_upload_during_matmul(const std::function<Tensor()>& upload,
                                const std::vector<float>& host, bool beside = true) {
  warm_times_three_plus_one(static_cast<int64_t>(host.size()));
  for (int attempt = 0; attempt < 3; ++attempt) {
    Tensor busy = keep_compute_stream_busy();
    const int64_t before = stats().copies_overlapped;
    expect_times_three_plus_one(upload(), host);
    const int64_t overlapped = stats().copies_overlapped - before;
    if (!beside) {
      EXPECT_EQ(overlapped, 0) << "the upload ran beside the matmul";
      return;
    }
    if (overlapped == 1) return;
  }
  ADD_FAILURE() << "the upload did not run beside the matmul in three tries";
}

TEST_F(CopyStreamGpu, AKernelRightAfterAPinnedUploadReadsAllOfIt) {
  const std::vector<float> host = values(kLarge, 1);
  Tensor p = from_vector(host, {kLarge}, Device::cpu()).pin_memory();
  check_upload_during_matmul([&] { return p.to(Device::cuda(0)); }, host);
}

TEST_F(CopyStreamGpu, AKernelRightAfterAStagedUploadReadsAllOfIt) {
  const std::vector<float> host = values(kLarge, 2);
  check_upload_during_matmul([&] { return from_vector(host, {kLarge}, Device::cuda(0)); }, host);
  Tensor cpu = from_vector(host, {kLarge}, Device::cpu());
  check_upload_during_matmul([&] { return cpu.to(Device::cuda(0)); }, host); // a plan's step
  const int64_t before = stats().copies_overlapped;
  expect_times_three_plus_one(cpu.to(Device::cuda(0)), host);
  EXPECT_EQ(stats().copies_overlapped, before) << "an idle GPU gets the copy on its own stream";
}

TEST_F(CopyStreamGpu, UploadsJustAboveAndBelowTheThresholdAreRight) {
  const int64_t at = static_cast<int64_t>(CopyStream::kMinUploadBytes / sizeof(float));
  for (int64_t n : {at - 1, at, at + 1}) {
    SCOPED_TRACE(n);
    const std::vector<float> host = values(n, float(n % 7));
    check_upload_during_matmul([&] { return from_vector(host, {n}, Device::cuda(0)); }, host,
                               n >= at);
    Tensor p = from_vector(host, {n}, Device::cpu()).pin_memory();
    check_upload_during_matmul([&] { return p.to(Device::cuda(0)); }, host, n >= at);
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
  warm_times_three_plus_one(kLarge);
  Tensor m = matmul(a, a);
  eval(m); // queued, not waited for
  const int64_t before = stats().copies_overlapped;
  Tensor up = p.to(Device::cuda(0));
  eval(up);
  EXPECT_EQ(stats().copies_overlapped, before + 1) << "the upload did not run beside the matmul";
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
  const int64_t d = 4096; // 64 MiB: above the recycled blocks (16 MiB), so it goes back to the pool
  const std::vector<float> x_host = values(d * d, 4);
  Tensor x = from_vector(x_host, {d, d}, Device::cuda(0)) * (1.0f / 8192);
  eval(x);
  const std::vector<float> x_vals = x.to_vector<float>();
  const std::vector<float> other = values(d * d, 5);
  (void)sum(matmul(x, x), {0, 1}).item<float>(); // compiles the sum: nothing waits below
  Tensor s = sum(matmul(x, x), {0, 1});          // ~3 ms: running when x is released
  eval(s);
  x = Tensor();
  const int64_t before = stats().copies_overlapped;
  std::vector<Tensor> uploads;
  for (int k = 0; k < 4; ++k) uploads.push_back(from_vector(other, {d, d}, Device::cuda(0)));
  EXPECT_GE(stats().copies_overlapped - before, 1) << "no upload ran beside the matmul";
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
  std::vector<float> raw(host.size(), -1); // allocated before: the read follows the copy at once
  Tensor p = from_vector(host, {kLarge}, Device::cpu()).pin_memory();
  Tensor busy = keep_compute_stream_busy();
  const int64_t before = stats().copies_overlapped;
  Tensor up = p.to(Device::cuda(0));
  eval(up);
  EXPECT_EQ(stats().copies_overlapped, before + 1) << "the upload did not run beside the matmul";
  const void* device = up.data_ptr(); // synchronizes
  ASSERT_EQ(cudaMemcpy(raw.data(), device, raw.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(raw, host);
}

// A matmul slow enough (milliseconds) that a copy queued after it is still waiting when the
// host reads; its values are d x d small integers / 64, exactly representable.
Tensor slow_product(int64_t d, float salt) {
  std::vector<float> v(static_cast<size_t>(d * d));
  for (size_t i = 0; i < v.size(); ++i) v[i] = (float(i % 7) + salt) * 0.125f;
  Tensor a = from_vector(v, {d, d}, Device::cuda(0));
  return matmul(a, a);
}

TEST_F(CopyStreamGpu, AHostReadRightAfterADownloadWaitsForIt) {
  const int64_t d = 4096; // 64 MiB
  for (int k = 0; k < 2; ++k) {
    Tensor m = slow_product(d, float(k));
    const std::vector<float> want = m.to_vector<float>();
    Tensor again = slow_product(d, float(k));
    Tensor down = again.to(Device::cpu());
    eval(down); // returns before the matmul (and so the download) is done
    EXPECT_TRUE(down.is_pinned());
    ASSERT_EQ(down.to_vector<float>(), want) << k;
    Tensor next = slow_product(d, float(k)).to(Device::cpu());
    eval(next);
    const auto* raw = static_cast<const float*>(next.data_ptr()); // waits too
    ASSERT_TRUE(std::equal(want.begin(), want.end(), raw)) << k;
    Tensor later = slow_product(d, float(k)).to(Device::cpu());
    eval(later);
    Tensor twice = later * 2.0f; // a CPU op in a plan of its own: its input is still arriving
    eval(twice);
    const std::vector<float> got = twice.to_vector<float>();
    for (size_t i = 0; i < want.size(); i += 997)
      ASSERT_EQ(got[i], want[i] * 2.0f) << k << " " << i;
  }
}

// Work queued after a download does not wait for it, so the download's source must stay
// untouched until the copy has read it: not freed and handed to a later kernel's output, and
// not written in place by a later update (in a later plan or in the download's own).
TEST_F(CopyStreamGpu, ADownloadsSourceIsNeitherReusedNorOverwrittenBeforeItIsRead) {
  const int64_t d = 4096;
  const size_t bytes = size_t(d * d) * sizeof(float);
  const std::vector<float> want = slow_product(d, 2).to_vector<float>();
  std::vector<float> updated = want;
  for (float& x : updated) x = x * 0.5f + 1.0f;
  { // compiles the kernels below, so that they run while the downloads are in flight
    Tensor w = slow_product(d, 2);
    EXPECT_EQ((w * 0.5f + 1.0f).to_vector<float>(), updated);
    EXPECT_EQ((full({d, d}, 7.0, DType::f32, Device::cuda(0)) + 1.0f).to_vector<float>().back(),
              8.0f);
  }
  for (int k = 0; k < 3; ++k) {
    kiln::sync(); // also drops what earlier downloads held
    const int64_t before = stats().bytes_in_use;
    Tensor h = slow_product(d, 2).to(Device::cpu()); // the product has no handle
    eval(h);
    EXPECT_GE(stats().bytes_in_use - before, int64_t(bytes)) << "the source was let go";
    Tensor z = full({d, d}, 7.0, DType::f32, Device::cuda(0)) + float(k); // may get its memory
    eval(z);
    ASSERT_EQ(h.to_vector<float>(), want) << k;
    ASSERT_EQ(z.to_vector<float>().back(), 7.0f + float(k));
  }
  Tensor w = slow_product(d, 2);
  eval(w);
  Tensor busy = keep_compute_stream_busy(); // the download and the update both wait for it
  Tensor snap = w.to(Device::cpu());
  eval(snap);
  int64_t reused = stats().buffers_reused;
  w = w * 0.5f + 1.0f; // w's only handle goes: a donor, were the download not holding it
  eval(w);
  EXPECT_EQ(stats().buffers_reused, reused) << "the update was written into the source";
  ASSERT_EQ(snap.to_vector<float>(), want) << "a later plan wrote into the download's source";
  EXPECT_EQ(w.to_vector<float>(), updated);
  Tensor v = slow_product(d, 2);
  eval(v);
  busy = keep_compute_stream_busy();
  Tensor snap2 = v.to(Device::cpu());
  Tensor v2 = v * 0.5f + 1.0f;
  v = Tensor();
  reused = stats().buffers_reused;
  eval(snap2, v2); // one plan: the download, then the update
  EXPECT_EQ(stats().buffers_reused, reused) << "the update was written into the source";
  ASSERT_EQ(snap2.to_vector<float>(), want) << "the update wrote into the download's source";
  EXPECT_EQ(v2.to_vector<float>(), updated);
}

// Host work in the same plan as the download: a CPU op on its result, and a copy back.
TEST_F(CopyStreamGpu, HostWorkInTheDownloadsPlanWaitsForIt) {
  const int64_t d = 2048;
  const std::vector<float> m = slow_product(d, 1).to_vector<float>();
  Tensor on_cpu = slow_product(d, 1).to(Device::cpu()) * 2.0f + 1.0f; // one flush
  const std::vector<float> got = on_cpu.to_vector<float>();
  ASSERT_EQ(got.size(), m.size());
  for (size_t i = 0; i < m.size(); ++i) ASSERT_EQ(got[i], m[i] * 2.0f + 1.0f) << i;
  Tensor back = slow_product(d, 1).to(Device::cpu()).to(Device::cuda(0));
  EXPECT_EQ(back.to_vector<float>(), m);
}

// A dropped download's block goes back to the pool while the copy may still write it: the next
// pinned tensor of that size must not get it until the copy is done. The compute stream is idle
// (its fence has passed): only the download stream's fence holds the block back.
TEST_F(CopyStreamGpu, ADroppedDownloadsBlockIsNotReusedWhileItIsWritten) {
  const int64_t n = int64_t(64) << 20; // 256 MiB of f32: several milliseconds on the link
  Tensor g = full({n}, -3.0, DType::f32, Device::cuda(0));
  eval(g);
  kiln::sync();
  for (int k = 0; k < 4; ++k) {
    Tensor src = full({n}, double(k + 1), DType::f32, Device::cpu());
    eval(src);
    Tensor down = g.to(Device::cpu());
    eval(down); // the download is in flight
    down = Tensor();
    Tensor p = src.pin_memory(); // at once: a block of the same size
    kiln::sync();
    const std::vector<float> v = p.to_vector<float>();
    for (size_t i = 0; i < v.size(); i += 4099) ASSERT_EQ(v[i], float(k + 1)) << k << " " << i;
    ASSERT_EQ(v.back(), float(k + 1)) << k;
  }
}

// Each upload beside running kernels gets a fresh block on the upload stream; the blocks that
// earlier uploads freed on the compute stream must be reused, not added to the pool each time.
TEST_F(CopyStreamGpu, UploadsBesideKernelsReuseTheMemoryOfEarlierOnes) {
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  auto reserved = [pool] {
    uint64_t bytes = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &bytes);
    return bytes;
  };
  const std::vector<float> host = values(kLarge, 7);
  uint64_t after_warm_up = 0;
  float first_sum = 0; // the same kernel over the same values: the same bits every time
  const int64_t before = stats().copies_overlapped;
  for (int k = 0; k < 12; ++k) {
    Tensor busy = keep_compute_stream_busy();
    Tensor up = from_vector(host, {kLarge}, Device::cuda(0));
    const float total = sum(up, {0}).item<float>();
    if (k == 0) first_sum = total;
    ASSERT_EQ(total, first_sum) << k;
    if (k == 3) after_warm_up = reserved();
    if (k == 11) EXPECT_EQ(up.to_vector<float>(), host);
  }
  EXPECT_EQ(stats().copies_overlapped - before, 12) << "uploads that did not run beside kernels";
  EXPECT_LE(reserved(), after_warm_up + 2 * uint64_t(kLarge) * sizeof(float))
      << "reserved " << reserved() << " bytes, " << after_warm_up << " after 4 uploads";
}

// A value downloaded every step and read after the loop: each read waits for its own copy.
TEST_F(CopyStreamGpu, DownloadsInALoopAreEachReadBack) {
  Tensor x = full({1 << 16}, 1.0, DType::f32, Device::cuda(0));
  std::vector<Tensor> sums;
  for (int step = 0; step < 50; ++step) {
    x = x * 0.5f + 1.0f;
    sums.push_back(sum(x, {0}).to(Device::cpu()));
  }
  float want = 1;
  for (int step = 0; step < 50; ++step) {
    want = want * 0.5f + 1.0f;
    EXPECT_EQ(sums[size_t(step)].item<float>(), want * float(1 << 16)) << step;
  }
}

} // namespace

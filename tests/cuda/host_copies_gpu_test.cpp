// Host <-> GPU copies through the ring of pinned chunks (runtime/cuda/host_copies.h): sizes
// around and across chunk boundaries, more chunks than the ring holds, offsets into a buffer,
// copies in both directions back to back, and dtype conversions on the way out; pinned tensors
// (Tensor::pin_memory) and the caller's page-locked memory, copied without staging. Every value
// is checked against what went in. Skipped without a CUDA device.
#include "runtime/cuda/host_copies.h"

#include <kiln/kiln.h>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

using namespace kiln;
using detail::HostCopies;

namespace {

struct HostCopiesGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
  }
};

std::vector<int32_t> pattern(size_t n, int32_t salt) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i * 2654435761u) ^ salt;
  return v;
}

constexpr size_t kChunkInts = HostCopies::kChunkBytes / sizeof(int32_t);

TEST_F(HostCopiesGpu, RoundTripsAroundChunkBoundaries) {
  const size_t ring = kChunkInts * HostCopies::kChunks;
  for (size_t n : {size_t(1), size_t(1000), kChunkInts - 1, kChunkInts, kChunkInts + 1,
                   3 * kChunkInts + 5, ring, ring + 1, 2 * ring + kChunkInts / 2}) {
    SCOPED_TRACE(n);
    const std::vector<int32_t> in = pattern(n, static_cast<int32_t>(n));
    Tensor t = from_vector(in, {static_cast<int64_t>(n)}, Device::cuda(0));
    std::vector<int32_t> out(n, -7); // poisoned
    t.copy_to(out);
    ASSERT_EQ(out, in);
    EXPECT_EQ(t.to_vector<int32_t>(), in);
  }
}

TEST_F(HostCopiesGpu, ReadsASliceAtAnOffset) {
  const size_t n = 2 * kChunkInts + 123;
  const std::vector<int32_t> in = pattern(n, 5);
  Tensor t = from_vector(in, {static_cast<int64_t>(n)}, Device::cuda(0));
  const int64_t begin = static_cast<int64_t>(kChunkInts) - 3, end = static_cast<int64_t>(n) - 1;
  Tensor s = slice(t, 0, begin, end); // a view: the copy starts inside the buffer
  std::vector<int32_t> out(static_cast<size_t>(end - begin), -7);
  s.copy_to(out);
  ASSERT_EQ(out, std::vector<int32_t>(in.begin() + begin, in.begin() + end));
}

TEST_F(HostCopiesGpu, BackToBackCopiesKeepEachOthersData) {
  // Copies in, computes, copies out, copies in again while the previous DMAs may still run:
  // no chunk may be overwritten before its DMA has finished with it.
  const size_t n = 5 * kChunkInts + 17;
  std::vector<Tensor> ts;
  for (int32_t k = 0; k < 3; ++k)
    ts.push_back(from_vector(pattern(n, k), {static_cast<int64_t>(n)}, Device::cuda(0)));
  for (int32_t k = 0; k < 3; ++k) {
    std::vector<int32_t> want = pattern(n, k);
    for (int32_t& x : want) x += 1;
    EXPECT_EQ((ts[static_cast<size_t>(k)] + 1).to_vector<int32_t>(), want) << k;
  }
}

TEST_F(HostCopiesGpu, ConvertsOnTheWayOut) {
  const size_t n = kChunkInts + 9;
  std::vector<float> in(n);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 1000) - 500.5f;
  Tensor t = from_vector(in, {static_cast<int64_t>(n)}, Device::cuda(0));
  std::vector<double> out(n, -1);
  t.copy_to(out);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<double>(in[i])) << i;
}

} // namespace

namespace {

TEST_F(HostCopiesGpu, PinMemoryKeepsTheValuesInPinnedMemory) {
  Tensor x = arange(0, 3 * 5, 1, DType::f32, Device::cpu()).reshape({3, 5});
  Tensor xt = transpose(x, 0, 1); // a view: pinned in its own row-major order
  EXPECT_FALSE(xt.is_pinned());
  Tensor p = xt.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_EQ(p.device(), Device::cpu());
  EXPECT_EQ(p.shape(), (Shape{5, 3}));
  EXPECT_EQ(p.to_vector<float>(), xt.to_vector<float>());
  EXPECT_EQ(p.pin_memory().data_ptr(), p.data_ptr()) << "pinned already: the same value";
  EXPECT_EQ((p * 2).to_vector<float>(), (xt * 2).to_vector<float>()) << "CPU ops read it";
  EXPECT_EQ(p.to(Device::cuda(0)).to_vector<float>(), xt.to_vector<float>());
  EXPECT_FALSE((p * 2).is_pinned()) << "results of ops are ordinary memory";
}

// A pinned tensor's copy to the GPU is queued behind earlier GPU work and returns at once; the
// tensor may be dropped right away. Its block must not be handed out again (and overwritten by
// the next pin_memory) before the copy has read it.
TEST_F(HostCopiesGpu, APinnedBlockIsNotReusedBeforeItsCopyHasReadIt) {
  const int64_t n = int64_t(8) << 20; // 32 MiB of f32 per block
  Tensor big = ones({4096, 4096}, DType::f32, Device::cuda(0));
  eval(big);
  std::vector<Tensor> on_gpu;
  for (int k = 0; k < 6; ++k) {
    Tensor slow = matmul(big, big); // keeps the stream busy before the copy
    Tensor p = full({n}, double(k + 1), DType::f32, Device::cpu()).pin_memory();
    on_gpu.push_back(p.to(Device::cuda(0)) + sum(slow, {0, 1}) * 0);
    eval(on_gpu.back()); // queued; p dies at the end of this iteration
  }
  for (int k = 0; k < 6; ++k) {
    const std::vector<float> v = on_gpu[size_t(k)].to_vector<float>();
    for (int64_t i = 0; i < n; i += 65537) ASSERT_EQ(v[size_t(i)], float(k + 1)) << k << " " << i;
    ASSERT_EQ(v.back(), float(k + 1)) << k;
  }
}

TEST_F(HostCopiesGpu, PinMemoryOfAGpuTensorIsAnError) {
  Tensor g = ones({2, 3}, DType::f32, Device::cuda(0));
  try {
    g.pin_memory();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[pin_memory] the tensor (shape (2, 3)) is on cuda:0; "
                                         "only CPU tensors are pinned"),
              std::string::npos)
        << e.what();
  }
}

// The caller's own page-locked memory is read and written directly (no staging).
TEST_F(HostCopiesGpu, CopiesToAndFromTheCallersPageLockedMemory) {
  const size_t n = 3 * kChunkInts + 11;
  int32_t* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(int32_t)), cudaSuccess);
  const std::vector<int32_t> in = pattern(n, 3);
  std::copy(in.begin(), in.end(), pinned);
  Tensor t = from_blob(pinned, n * sizeof(int32_t), DType::i32, {static_cast<int64_t>(n)}, {},
                       Device::cpu())
                 .to(Device::cuda(0));
  eval(t);
  kiln::sync();
  std::fill(pinned, pinned + n, -7); // poisoned: the copy below must overwrite all of it
  t.copy_to(std::span<int32_t>(pinned, n));
  EXPECT_TRUE(std::equal(in.begin(), in.end(), pinned));
  cudaFreeHost(pinned);
}

} // namespace

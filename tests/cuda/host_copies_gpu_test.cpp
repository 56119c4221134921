// Host <-> GPU copies through the ring of pinned chunks (runtime/cuda/host_copies.h): sizes
// around and across chunk boundaries, more chunks than the ring holds, offsets into a buffer,
// copies in both directions back to back, and dtype conversions on the way out. Every value is
// checked against what went in. Skipped without a CUDA device.
#include "runtime/cuda/host_copies.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstdint>
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

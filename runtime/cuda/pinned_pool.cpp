#include "runtime/cuda/pinned_pool.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/host_copies.h"

#include <algorithm>

namespace kiln::detail {

namespace {

constexpr size_t kGranule = size_t(64) << 10;

size_t rounded(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kGranule - 1) / kGranule * kGranule;
}

} // namespace

void* PinnedPool::allocate(size_t bytes, const char* op) {
  const size_t size = rounded(bytes);
  if (auto it = free_.find(size); it != free_.end()) {
    std::vector<Block>& blocks = it->second;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (cudaEventQuery(blocks[i].fence) != cudaSuccess) continue; // a copy still reads it
      (void)cudaGetLastError(); // cudaErrorNotReady is not sticky, but leave nothing behind
      const Block b = blocks[i];
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      cached_ -= size;
      live_[b.p] = {size, b.fence};
      return b.p;
    }
    (void)cudaGetLastError();
  }
  CurrentDevice on(device_);
  cudaEvent_t fence = nullptr; // first: a block is never left without one
  cuda_check(cudaEventCreateWithFlags(&fence, cudaEventDisableTiming), op, "cudaEventCreate");
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, size);
  if (e == cudaErrorMemoryAllocation) { // unpin what is cached, then try once more
    (void)cudaGetLastError();
    trim(0);
    e = cudaMallocHost(&p, size);
  }
  if (e != cudaSuccess) cudaEventDestroy(fence);
  cuda_check(e, op, "cudaMallocHost (page-locked host memory)");
  live_[p] = {size, fence};
  return p;
}

void PinnedPool::release(void* p, cudaStream_t stream) {
  auto it = live_.find(p);
  if (it == live_.end()) return; // not ours: nothing to give back
  const auto [size, fence] = it->second;
  live_.erase(it);
  if (cudaEventRecord(fence, stream) != cudaSuccess) { // cannot fence it: wait, then reuse
    (void)cudaGetLastError();
    cudaStreamSynchronize(stream);
    (void)cudaGetLastError();
  }
  free_[size].push_back({p, fence});
  cached_ += size;
  if (cached_ > kMaxCachedBytes) trim(kMaxCachedBytes / 2);
}

// Unpins released blocks, largest first, until at most `keep` bytes are cached; waits for the
// copies that still read them.
void PinnedPool::trim(size_t keep) {
  for (auto it = free_.rbegin(); it != free_.rend() && cached_ > keep; ++it) {
    std::vector<Block>& blocks = it->second;
    while (!blocks.empty() && cached_ > keep) {
      const Block b = blocks.front();
      blocks.erase(blocks.begin());
      cudaEventSynchronize(b.fence);
      cudaEventDestroy(b.fence);
      cudaFreeHost(b.p);
      (void)cudaGetLastError();
      cached_ -= it->first;
    }
  }
}

} // namespace kiln::detail

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

bool PinnedPool::passed(const Fences& f) {
  for (cudaEvent_t e : f)
    if (cudaEventQuery(e) != cudaSuccess) {
      (void)cudaGetLastError(); // cudaErrorNotReady is not sticky, but leave nothing behind
      return false;
    }
  return true;
}

void* PinnedPool::allocate(size_t bytes, const char* op) {
  const size_t size = rounded(bytes);
  if (auto it = free_.find(size); it != free_.end()) {
    std::vector<Block>& blocks = it->second;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (!passed(blocks[i].fences)) continue; // a copy still uses it
      const Block b = blocks[i];
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      cached_ -= size;
      live_[b.p] = {size, b.fences};
      return b.p;
    }
  }
  CurrentDevice on(device_);
  Fences fences{}; // first: a block is never left without them
  for (cudaEvent_t& e : fences)
    if (cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        err != cudaSuccess) {
      for (cudaEvent_t made : fences)
        if (made) cudaEventDestroy(made);
      cuda_check(err, op, "cudaEventCreate");
    }
  void* p = nullptr;
  cudaError_t e = cudaMallocHost(&p, size);
  if (e == cudaErrorMemoryAllocation) { // unpin what is cached, then try once more
    (void)cudaGetLastError();
    trim(0);
    e = cudaMallocHost(&p, size);
  }
  if (e != cudaSuccess)
    for (cudaEvent_t f : fences) cudaEventDestroy(f);
  cuda_check(e, op, "cudaMallocHost (page-locked host memory)");
  live_[p] = {size, fences};
  return p;
}

void PinnedPool::release(void* p, const Streams& streams) {
  auto it = live_.find(p);
  if (it == live_.end()) return; // not ours: nothing to give back
  const auto [size, fences] = it->second;
  live_.erase(it);
  for (int i = 0; i < kStreams; ++i)
    if (cudaEventRecord(fences[size_t(i)], streams[size_t(i)]) != cudaSuccess) {
      (void)cudaGetLastError(); // cannot fence it: wait, then reuse
      cudaStreamSynchronize(streams[size_t(i)]);
      (void)cudaGetLastError();
    }
  free_[size].push_back({p, fences});
  cached_ += size;
  if (cached_ > kMaxCachedBytes) trim(kMaxCachedBytes / 2);
}

// Unpins released blocks, largest first, until at most `keep` bytes are cached; waits for the
// copies that still use them.
void PinnedPool::trim(size_t keep) {
  for (auto it = free_.rbegin(); it != free_.rend() && cached_ > keep; ++it) {
    std::vector<Block>& blocks = it->second;
    while (!blocks.empty() && cached_ > keep) {
      const Block b = blocks.front();
      blocks.erase(blocks.begin());
      for (cudaEvent_t f : b.fences) {
        cudaEventSynchronize(f);
        cudaEventDestroy(f);
      }
      cudaFreeHost(b.p);
      (void)cudaGetLastError();
      cached_ -= it->first;
    }
  }
}

} // namespace kiln::detail

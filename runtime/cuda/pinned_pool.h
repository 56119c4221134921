#pragma once
// Page-locked host memory for pinned CPU tensors (Tensor::pin_memory), from a pool: pinning is
// a system call that takes about as long as copying the memory once, so blocks are kept and
// reused rather than pinned per tensor. A released block may still be read by a copy queued on
// the GPU's stream, so it carries a fence (an event recorded at release, after that copy) and
// is handed out again only once the fence has passed.
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <vector>

namespace kiln::detail {

class PinnedPool {
public:
  explicit PinnedPool(int device) : device_(device) {}
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  /// A block of at least `bytes` (rounded up to 64 KiB); throws kiln::Error naming `op` when the
  /// driver cannot pin more memory.
  void* allocate(size_t bytes, const char* op);
  /// Gives back a block from allocate(), reusable once the work queued on `stream` so far is done.
  /// Past kMaxCachedBytes of released blocks, the oldest are unpinned, which waits for the copies
  /// still reading them.
  void release(void* p, cudaStream_t stream);

  /// Bytes of released blocks kept for reuse before the oldest are unpinned.
  static constexpr size_t kMaxCachedBytes = size_t(1) << 30;

private:
  struct Block {
    void* p = nullptr;
    cudaEvent_t fence = nullptr;
  };
  void trim(size_t keep);
  int device_; // whose stream fences the blocks (their events belong to it)
  std::map<size_t, std::vector<Block>> free_;            // by rounded size, oldest release first
  std::map<void*, std::pair<size_t, cudaEvent_t>> live_; // size and fence of handed-out blocks
  size_t cached_ = 0;
};

} // namespace kiln::detail

#pragma once
// Page-locked host memory for pinned CPU tensors (Tensor::pin_memory), from a pool: pinning is
// a system call that takes about as long as copying the memory once, so blocks are kept and
// reused rather than pinned per tensor. A released block may still be read or written by a copy
// queued on one of the GPU's streams (compute, uploads, downloads), so it carries a fence per
// stream (events recorded at release, after those copies) and is handed out again only once all
// of them have passed.
#include <cuda_runtime.h>

#include <array>
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
  /// The streams whose queued copies may use a block: a release fences it on each of them.
  static constexpr int kStreams = 3;
  using Streams = std::array<cudaStream_t, kStreams>;
  /// Gives back a block from allocate(), reusable once the work queued on `streams` so far is
  /// done. Past kMaxCachedBytes of released blocks, the oldest are unpinned, which waits for the
  /// copies still using them.
  void release(void* p, const Streams& streams);

  /// Bytes of released blocks kept for reuse before the oldest are unpinned.
  static constexpr size_t kMaxCachedBytes = size_t(1) << 30;

private:
  using Fences = std::array<cudaEvent_t, kStreams>;
  struct Block {
    void* p = nullptr;
    Fences fences{};
  };
  static bool passed(const Fences& f);
  void trim(size_t keep);
  int device_; // whose streams fence the blocks (their events belong to it)
  std::map<size_t, std::vector<Block>> free_;       // by rounded size, oldest release first
  std::map<void*, std::pair<size_t, Fences>> live_; // size and fences of handed-out blocks
  size_t cached_ = 0;
};

} // namespace kiln::detail

#pragma once
// Copies between pageable host memory and a GPU at close to the link's speed: through a ring of
// pinned chunks, so that the DMA engine moves one chunk while host threads copy the next one in
// or out (the host copy and the DMA overlap instead of taking turns), with the host side split
// over the CPU backend's thread pool (one thread's memcpy is slower than the link). Host memory
// that is page-locked already (the caller's cudaMallocHost, a pinned tensor) is copied directly.
#include <cuda_runtime.h>

#include <array>
#include <cstddef>

namespace kiln::detail {

class HostCopies {
public:
  explicit HostCopies(int device);
  ~HostCopies();
  HostCopies(const HostCopies&) = delete;
  HostCopies& operator=(const HostCopies&) = delete;

  /// Copies `bytes` from `src` to device memory `dst`, in `stream`'s order. Returns once `src`
  /// has been read (the caller may free it); the last chunks' DMA may still be running. `op`
  /// names the user's operation in errors.
  void to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream, const char* op);
  /// Copies `bytes` of device memory `src`, after the work queued on `stream`, to `dst`;
  /// returns when `dst` holds them.
  void to_host(void* dst, const void* src, size_t bytes, cudaStream_t stream, const char* op);

  /// The chunk size and count: a copy of more than one chunk is pipelined.
  static constexpr size_t kChunkBytes = size_t(8) << 20;
  static constexpr int kChunks = 4;

private:
  struct Chunk {
    char* host = nullptr;       // pinned, kChunkBytes
    cudaEvent_t done = nullptr; // recorded after the DMA that last used `host`
  };
  Chunk& chunk(int i, const char* op); // allocated on first use
  int device_;                         // events and pinned memory are made with it current
  std::array<Chunk, kChunks> chunks_{};
};

/// Makes `device` the calling thread's current device until the end of the scope (a CUDA event
/// belongs to the device current when it is created).
class CurrentDevice {
public:
  explicit CurrentDevice(int device);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

private:
  int previous_ = -1;
};

/// memcpy split over the CPU backend's thread pool when it is large enough to gain from it.
void parallel_memcpy(void* dst, const void* src, size_t bytes);

} // namespace kiln::detail

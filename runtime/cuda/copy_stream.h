#pragma once
// Host-to-device copies on a stream of their own, so that a copy issued after kernels overlaps
// them (the DMA engines idle while kernels run) instead of waiting behind them on the compute
// stream. The rule that keeps this correct:
//   - the copy's destination is allocated in the copy stream's order (a fresh buffer, never one
//     that queued kernels may still use), so the copy waits for no kernel;
//   - right after issuing a copy, the compute stream is made to wait for it (join), before any
//     later work is issued there: every reader of the buffer, its release and a sync come after
//     the copy, and the compute stream alone stays the one that later work orders against.
#include <cuda_runtime.h>

namespace kiln::detail {

class CopyStream {
public:
  explicit CopyStream(int device);
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  cudaStream_t stream() const { return stream_; }
  /// Makes the work issued to `compute` from now on wait for the copies issued here so far.
  void join(cudaStream_t compute, const char* op);

  /// Uploads smaller than this stay on the compute stream: they take about as long as the
  /// event record and wait that the copy stream costs the host (~2 us).
  static constexpr size_t kMinBytes = size_t(256) << 10;

private:
  cudaStream_t stream_ = nullptr; // never destroyed, like the backend that owns it
  cudaEvent_t copied_ = nullptr;
};

} // namespace kiln::detail

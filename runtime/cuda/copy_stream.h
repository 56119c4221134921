#pragma once
// Copies between host and device on streams of their own (one per direction: an H100 has a DMA
// engine for each), so that a copy overlaps the kernels on the compute stream instead of waiting
// in line behind them. The rules that keep this correct:
//   - An upload's destination is allocated in the upload stream's order (a fresh block, never
//     one that queued kernels may still use), so the upload waits for no kernel; right after
//     issuing it, the compute stream is made to wait for it (join), before any later work is
//     issued there: every reader of the buffer, its release and a sync come after the upload.
//   - A download first waits for the work queued on the compute stream so far (follow), which
//     produced its source; its destination is a pinned host block whose readers on the host wait
//     for the download's ticket (mark, wait), and whose release is fenced on this stream too.
#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace kiln::detail {

class CopyStream {
public:
  explicit CopyStream(int device);
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  cudaStream_t stream() const { return stream_; }
  /// Makes the work issued to `compute` from now on wait for the copies issued here so far.
  void join(cudaStream_t compute, const char* op);
  /// Makes the copies issued here from now on wait for the work issued to `compute` so far.
  void follow(cudaStream_t compute, const char* op);
  /// A ticket for the copies issued here so far; wait(ticket) returns once they are done.
  uint64_t mark(const char* op);
  /// Throws kiln::Error naming `op` if a copy up to `ticket` failed.
  void wait(uint64_t ticket, const char* op);
  /// Waits for everything issued here.
  void synchronize(const char* op);
  /// Whether everything issued here is done (or failed). Never waits.
  bool idle() const { return cudaStreamQuery(stream_) != cudaErrorNotReady; }

  /// Uploads smaller than this stay on the compute stream: they take about as long as the
  /// event record and wait that the copy stream costs the host (~2 us).
  static constexpr size_t kMinUploadBytes = size_t(256) << 10;

private:
  struct Mark {
    uint64_t ticket;
    cudaEvent_t done;
  };
  cudaEvent_t spare_event(const char* op);
  void retire_passed(); // recycles the events of marks that have passed, oldest first

  int device_;
  cudaStream_t stream_ = nullptr; // never destroyed, like the backend that owns it
  cudaEvent_t joined_ = nullptr;  // join's and follow's event
  std::deque<Mark> marks_;        // not yet known to have passed, oldest first
  std::vector<cudaEvent_t> spare_;
  uint64_t issued_ = 0, passed_ = 0;
};

} // namespace kiln::detail

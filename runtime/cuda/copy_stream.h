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
//     Its source buffer is held by the ticket until the copy has read it: later work on the
//     compute stream, which does not wait for the download, can neither free and reuse it nor
//     write into it in place (a held buffer is not donated: engine/buffer_reuse.cpp).
#include "runtime/backend.h"

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
  /// Makes the work issued to `compute` from now on wait for the copies issued here so far; if
  /// that cannot be arranged, waits for them on the host instead. Never throws: a caller about
  /// to release a copy's buffer on `compute` relies on the order.
  void join(cudaStream_t compute) noexcept;
  /// Makes the copies issued here from now on wait for the work issued to `compute` so far.
  void follow(cudaStream_t compute, const char* op);
  /// A ticket for the copies issued here so far; wait(ticket) returns once they are done.
  /// `reads`: a buffer those copies read, kept alive until then.
  uint64_t mark(BufferRef reads, const char* op);
  /// Throws kiln::Error naming `op` if a copy up to `ticket` failed.
  void wait(uint64_t ticket, const char* op);
  /// Waits for everything issued here.
  void synchronize(const char* op);
  /// Drops the buffers held by copies that have passed (done at every mark, wait, sync and read
  /// of GPU memory, and before memory is given back under pressure).
  void release_passed();
  /// Whether everything issued here is done (or failed). Never waits.
  bool idle() const { return cudaStreamQuery(stream_) != cudaErrorNotReady; }

  /// Uploads smaller than this stay on the compute stream: they take about as long as the
  /// event record and wait that the copy stream costs the host (~2 us).
  static constexpr size_t kMinUploadBytes = size_t(256) << 10;

private:
  struct Mark {
    uint64_t ticket;
    cudaEvent_t done;
    BufferRef reads;
  };
  cudaEvent_t spare_event(const char* op);
  // Retires the oldest mark: recycles its event and moves its buffer to `released` (dropped by
  // the caller once done with marks_: a release may synchronize, which retires marks too).
  void retire_front(std::vector<BufferRef>& released);

  int device_;
  cudaStream_t stream_ = nullptr; // never destroyed, like the backend that owns it
  cudaEvent_t joined_ = nullptr;  // join's and follow's event
  std::deque<Mark> marks_;        // not yet known to have passed, oldest first
  std::vector<cudaEvent_t> spare_;
  uint64_t issued_ = 0, passed_ = 0;
};

} // namespace kiln::detail

#pragma once
// The backend's CUDA stream together with the queue of graph launches that the launch thread
// issues to it (launch_thread.h), as one type that keeps the ordering rule: a queued launch
// reaches the stream later than the call that queued it, so any other work issued to the
// stream must first wait for the queue. The raw stream is handed out only by calls that do:
//   after_queued()          work that reports errors: copies, direct launches, cuBLAS, syncs;
//                           throws kiln::Error if a queued launch failed
//   after_queued_quietly()  paths that cannot report (frees, stream captures, poisoning a
//                           recycled block): a queued launch's error stays for after_queued()
//   for_new_allocation()    stream-ordered allocation of a fresh block, which is ordered before
//                           the queued launches and which none of them can use
// wait_quietly() orders host-side changes to graph execs that queued launches name (updates,
// destruction).
#include "runtime/cuda/launch_thread.h"

#include <cuda_runtime.h>

namespace kiln::detail {

class OrderedStream {
public:
  explicit OrderedStream(int device) : stream_(create()), launches_(device, stream_) {}
  OrderedStream(const OrderedStream&) = delete;
  OrderedStream& operator=(const OrderedStream&) = delete;

  cudaStream_t after_queued() {
    launches_.drain();
    return stream_;
  }
  cudaStream_t after_queued_quietly() {
    launches_.wait();
    return stream_;
  }
  cudaStream_t for_new_allocation() { return stream_; }
  void wait_quietly() { launches_.wait(); }

  /// Queue launches (and their node updates) to be issued from the launch thread.
  LaunchThread& launches() { return launches_; }
  /// Nothing queued and the stream done (or failed: the next checked call reports it).
  bool idle() { return launches_.empty() && cudaStreamQuery(stream_) != cudaErrorNotReady; }

private:
  static cudaStream_t create();

  cudaStream_t stream_; // never destroyed: the backend lives until the process ends
  LaunchThread launches_;
};

} // namespace kiln::detail

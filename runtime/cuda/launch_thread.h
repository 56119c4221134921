#pragma once
// LaunchThread: replays of cached CUDA graphs, issued from a worker thread of the backend
// (runtime/issue_queue.h). cudaGraphLaunch costs ~1.9 us of host time and repointing a kernel
// node ~0.7-0.9 us more (tools/graph-costs, H100 host): a third of an LSTM step's host time,
// paid on the thread that records the next step's ops. Queued instead, the recording thread
// pays an atomic store, and the worker issues the launch while the next step is recorded.
//
// The rule that keeps this correct: a queued launch (with the node updates before it) reaches
// the stream later than the call that queued it, so every other operation on the backend's
// stream, and anything that changes or destroys a graph exec that queued items name, waits for
// the queue first. OrderedStream (ordered_stream.h), which owns the stream and this queue,
// makes that the only way to reach the stream. Node updates go through the queue (applied
// right before their launch), as an update made now would change a launch still queued.
//
// Off with kiln::set_launch_thread(false) or KILN_LAUNCH_THREAD=0: launches are then issued
// at once, as before. The thread starts at the first queued launch.
#include "codegen/cuda_codegen.h"
#include "runtime/issue_queue.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace kiln::detail {

struct GraphLaunch {
  cudaGraphExec_t exec = nullptr;
  struct NodeUpdate {
    cudaGraphNode_t node = nullptr;
    cudaKernel_t fn = nullptr;
    CudaLaunch shape;
    std::vector<std::byte> args; // the kernel's Params, copied: the item owns its bytes
  };
  std::vector<NodeUpdate> updates; // the first n_updates are this item's (slots are reused)
  size_t n_updates = 0;
};

class LaunchThread {
public:
  LaunchThread(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~LaunchThread();

  /// Whether launches are queued now (kiln::set_launch_thread).
  static bool enabled();

  /// Build the next item: node updates to apply, then the launch of `exec`.
  GraphLaunch& begin();
  void add_update(GraphLaunch& item, cudaGraphNode_t node, cudaKernel_t fn, const CudaLaunch& shape,
                  const std::vector<std::byte>& args);
  /// Queue the item; false if it was issued at once instead (the worker was asleep).
  bool push(GraphLaunch& item, cudaGraphExec_t exec);

  /// Wait until every queued launch has been issued; throws kiln::Error if one failed.
  void drain() {
    if (queue_) queue_->drain();
  }
  /// The same wait, for paths that cannot report (frees): an error stays for the next drain().
  void wait() {
    if (queue_) queue_->wait();
  }
  /// Throws the error of a queued launch that failed, if any (never waits).
  void rethrow_error() {
    if (queue_) queue_->rethrow_error();
  }
  /// Queued launches that failed so far (never reset).
  uint64_t failures() const { return queue_ ? queue_->failures() : 0; }
  /// Whether nothing queued is still to be issued.
  bool empty() const { return !queue_ || queue_->empty(); }

private:
  static void issue(GraphLaunch& item, cudaStream_t stream);
  int device_;
  cudaStream_t stream_;
  std::unique_ptr<IssueQueue<GraphLaunch>> queue_;
};

/// The countdown behind fail_queued_launch_for_tests (runtime/backend.h).
std::atomic<int>& queued_launch_failure_countdown();

/// A kernel node's parameters: `args` points at the kernel's one Params struct.
cudaKernelNodeParams kernel_node_params(const CudaLaunch& shape, cudaKernel_t fn, void** args);

/// Apply a kernel node update now (the path without the launch thread, and the worker's).
void set_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node, cudaKernel_t fn,
                     const CudaLaunch& shape, const void* args, const char* op);

} // namespace kiln::detail

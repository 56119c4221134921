#pragma once
// Kernels compiled off the calling thread while the stand-in interpreter runs them
// (KILN_COMPILE=background, kernel_cache.h). One thread per device's kernel cache takes every
// kernel submitted since its last round and builds them together (Jit::build_all: the disk
// cache, then compile worker processes of its own when there are several, else NVRTC on the
// thread); the calling thread collects the binaries and loads them into the driver.
//
// At exit the thread is stopped and joined before the objects it uses are destroyed: by a
// thread_local guard of the thread that submits (an exit() from the main thread runs it before
// any exit handler or static destructor, so before NVRTC's, even those a compile in flight
// registered), and by an exit handler for an exit() from any other thread. Exit handlers run in
// the reverse order of their registration, so kiln's is registered when the thread starts, again
// after each compile in this process (a compile may make NVRTC state whose destructor is
// registered then: a new kind of kernel, late in a run) and after each round (the disk cache's
// and the compile workers' state). A round in progress starts no further compile:
// the compiles on this process's threads finish, the compile workers' are ended, and what is
// still queued is dropped (the disk cache keeps whatever was stored). So an exit waits for at
// most one compile per thread, not for a round of a new training step's tens of kernels. In a
// fork()'s child, which has no such thread, nothing is joined.
#include "codegen/jit.h"
#include "codegen/nvrtc/compile_workers.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace kiln::detail {

class BackgroundBuilds {
public:
  struct Finished {
    std::string key; // as submitted
    CudaKernelSource src;
    JitKernel built;   // when error is empty
    std::string error; // the compile's failure (kiln::Error's text)
  };

  explicit BackgroundBuilds(Jit& jit) : jit_(jit) {}
  ~BackgroundBuilds();
  BackgroundBuilds(const BackgroundBuilds&) = delete;
  BackgroundBuilds& operator=(const BackgroundBuilds&) = delete;

  struct Job {
    std::string key;
    CudaKernelSource src;
  };
  /// Queue kernels' builds, to be built together (the thread starts on first use). Throws
  /// (queueing nothing) when no thread can be started, or after the exit handler ran.
  void submit(std::vector<Job> jobs);
  /// The builds finished since the last call, in the order they finished.
  std::vector<Finished> take_finished();
  /// Submitted and not yet taken by take_finished().
  size_t outstanding() const;
  /// Waits until every submitted build has finished (tests, benchmarks).
  void wait_idle();

  /// Stops and joins every BackgroundBuilds' thread (the exit handler).
  static void stop_all();

private:
  void run();
  std::vector<Finished> build(std::vector<Job> jobs);
  void stop();

  Jit& jit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<Finished> finished_;
  size_t outstanding_ = 0;
  bool busy_ = false, stopping_ = false;
  std::atomic<bool> cancel_{false}; // set by stop(), read by a round under way without mu_
  std::thread thread_;
  pid_t owner_ = 0;                         // the process that started thread_
  std::unique_ptr<CompileWorkers> workers_; // started for the first round of several kernels
  bool workers_tried_ = false;
};

} // namespace kiln::detail

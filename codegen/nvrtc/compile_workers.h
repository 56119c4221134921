#pragma once
// Compile workers: helper processes (`kiln-cache serve-compiles`) that compile kernels into the
// disk cache, several at once. On the H100 host NVRTC 13 runs one compile at a time per
// process whatever the number of threads, while separate processes compile in parallel
// (bench/results/2026-11-26-h100-session16.md, calls 12-15), so a plan that needs many new
// kernels (a training step's first run) waits for the slowest worker's share rather than for
// the sum. The caller then loads each kernel from the disk cache; anything a worker could not do
// (no tool, a crash, a compile error) the caller compiles itself, as before.
#include "codegen/nvrtc_compiler.h"

#include <llvm/ADT/ArrayRef.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace kiln::detail {

/// The line KILN_CACHE_MANIFEST records for a kernel; also a worker's request.
std::string manifest_line(const CudaKernelSource& src, const CudaTarget& t);

class CompileWorkers {
public:
  struct Result {
    bool ok = false;
    double compile_ms = 0; // the worker's NVRTC time; 0 when the cache already had the kernel
    std::string error;     // why not ok
  };

  /// The process's n workers for cache directory `dir`, started on first use and kept; null
  /// when none can be started (the tool is missing: KILN_COMPILE_WORKER, else kiln-cache beside
  /// libkiln). Another directory, program or n, or a pool whose workers all died, replaces them;
  /// a program whose workers all died before answering anything is not started again.
  static CompileWorkers* shared(int n, const std::string& dir);
  /// n workers running `path` (a kiln-cache) for cache directory `dir`; null if none starts.
  static std::unique_ptr<CompileWorkers> start(const std::string& path, int n,
                                               const std::string& dir);

  /// Compiles each source into the disk cache, as many at once as there are workers. Once
  /// `cancel` is set (checked every few milliseconds), no job is handed out and the workers
  /// still compiling are ended: what was not answered is not ok.
  std::vector<Result> compile(llvm::ArrayRef<CudaKernelSource> srcs, const CudaTarget& t,
                              const std::atomic<bool>* cancel = nullptr);
  /// The same for manifest lines (manifest_line()), each with its own target.
  std::vector<Result> compile_lines(llvm::ArrayRef<std::string> lines,
                                    const std::atomic<bool>* cancel = nullptr);

  int size() const { return static_cast<int>(workers_.size()); }
  int alive() const;  // the workers not known to have exited
  void reap_exited(); // notices (and reaps) workers that exited since they were last used
  ~CompileWorkers();

  struct Worker; // a process and the socket it reads and answers on

private:
  void end_busy_workers(std::vector<Result>& out, const char* why);

  std::vector<std::unique_ptr<Worker>> workers_;
  int owner_ = static_cast<int>(::getpid()); // the process that started them
  bool answered_ = false;                    // whether any worker ever answered a job
};

/// How many compile workers a plan's new kernels may use: KILN_COMPILE_PROCESSES, else the
/// CPUs up to 8; 0 or 1: compile in the calling process only.
int compile_processes();

/// The compile worker's path: KILN_COMPILE_WORKER, else kiln-cache where an install or the
/// build tree puts it beside libkiln; empty when there is none.
std::string compile_worker_path();

} // namespace kiln::detail

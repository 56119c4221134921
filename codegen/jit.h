#pragma once
// The JIT, in one place: a kernel's binary for (FusedKernel, variant) on a target is rendered
// (cuda_codegen.h), looked up in the disk cache, else compiled by NVRTC and stored there. The
// runtime (runtime/cuda/kernel_cache.h) keeps the table of loaded kernels and launches them;
// it never renders or compiles. Needs NVRTC (built with the CUDA backend), not a GPU.
#include "codegen/disk_cache.h"
#include "codegen/nvrtc_compiler.h"

#include <llvm/ADT/ArrayRef.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

class CompileWorkers;

struct JitStats {
  int64_t disk_hits = 0, compiles = 0;
  int64_t worker_compiles = 0; // of the compiles, those done by compile workers
  double compile_ms = 0;       // NVRTC time of the compiles
};

/// A built kernel: its entry point's name and its binary.
struct JitKernel {
  std::string name;
  CudaBinary binary;
  bool from_disk = false; // loaded from the disk cache rather than compiled now
};

class Jit {
public:
  /// cache_dir empty: the default disk cache directory (DiskCache).
  explicit Jit(const CudaTarget& target, std::string cache_dir = {});
  /// The binary for (k, v): from the disk cache, else compiled (and stored). Throws kiln::Error
  /// with NVRTC's log when the source does not compile.
  JitKernel build(const FusedKernel& k, const CudaVariant& v);
  /// The same for a rendered source (the index kernels, codegen/cuda_index.h). `fresh`:
  /// compile even when the disk cache has it, replacing its entry (the driver rejected the
  /// cached binary).
  JitKernel build(const CudaKernelSource& src, bool fresh = false);
  /// build() for each source, several at once: the ones the disk cache lacks in compile worker
  /// processes (KILN_COMPILE_PROCESSES, compile_workers.h), the rest on KILN_COMPILE_THREADS
  /// threads. An evaluation that needs many new kernels waits for the slowest share of the
  /// compiles, not their sum. All are attempted; then the first failure in `srcs` order is
  /// rethrown (those that built are in the disk cache).
  std::vector<JitKernel> build_all(llvm::ArrayRef<CudaKernelSource> srcs);
  /// The same with the caller's compile workers (null: compile in this process) rather than the
  /// process's shared ones, for kernels the caller found missing from the disk cache already
  /// (not looked up again): the background compiles of runtime/cuda/background_builds.h run on
  /// a thread of their own while the calling thread may use the shared workers. Once `cancel`
  /// is set, no further compile starts: the compiles under way finish (in this process) or
  /// are ended (in workers), and every kernel not built is an error.
  /// `after_compile`, if given, is called on the compiling thread after each compile in this
  /// process.
  std::vector<JitKernel> build_missing(llvm::ArrayRef<CudaKernelSource> srcs,
                                       CompileWorkers* workers,
                                       const std::atomic<bool>* cancel = nullptr,
                                       void (*after_compile)() = nullptr);
  /// The kernel from the disk cache (counted as a disk hit, and added to the manifest), if it
  /// is there; never compiles.
  std::optional<JitKernel> cached(const CudaKernelSource& src);
  const std::string& cache_dir() const { return disk_.dir(); }
  bool disk_cache_enabled() const { return disk_.enabled(); }
  const CudaTarget& target() const { return target_; }
  JitStats stats() const;

private:
  /// The kernel from the disk cache (counted as a disk hit), if it is there.
  std::optional<JitKernel> from_disk(const CudaKernelSource& src);
  struct Round {                       // how build_all goes about it
    CompileWorkers* workers = nullptr; // the caller's, else (shared_workers) the process's
    bool shared_workers = false;
    bool missed = false; // the caller found every source missing from the disk cache
    const std::atomic<bool>* cancel = nullptr;
    void (*after_compile)() = nullptr; // after each compile on this process's threads
  };
  std::vector<JitKernel> build_all(llvm::ArrayRef<CudaKernelSource> srcs, const Round& round);
  void compile_in_workers(llvm::ArrayRef<CudaKernelSource> srcs, const Round& round,
                          std::vector<JitKernel>& out, std::vector<bool>& done,
                          std::vector<bool>& missed);

  CudaTarget target_;
  DiskCache disk_;
  mutable std::mutex stats_mu_; // build() runs on several threads in build_all
  JitStats stats_;
};

/// KILN_COMPILE: what a kernel missing from the disk cache does.
enum class CompileMode {
  background, // runs as the stand-in interpreter while NVRTC compiles it on a thread (default)
  sync,       // waits for NVRTC before its first run
  standin,    // runs as the stand-in interpreter, never compiled (A/B and tests)
  off,        // is an error: the deployment's cache should have had it
};
CompileMode compile_mode();

/// How many compiles build_all runs at once: KILN_COMPILE_THREADS, else 1. One by default: on
/// the H100 host NVRTC 13.0 runs one compile at a time per process, so threads only added
/// contention (65 kernels: 0.8-0.97 s on one thread, 1.1-1.2 s on 16), while on the dev box
/// two threads took 0.6x the time (bench/results/2026-11-26-h100-session16.md, call 12-15).
int compile_threads();

} // namespace kiln::detail

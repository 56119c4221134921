#pragma once
// Compiled kernels of one device: the table of loaded kernels (in-memory key -> kernel) and
// their launches. A kernel not in the table comes from the JIT (codegen/jit.h: the disk cache,
// else NVRTC) and is loaded here.
#include "codegen/cuda_codegen.h"
#include "codegen/cuda_index.h"
#include "codegen/jit.h"
#include "codegen/standin.h"
#include "runtime/cuda/background_builds.h"

#include <cuda_runtime.h>
#include <llvm/ADT/StringMap.h>

namespace kiln::detail {

/// The grid a CudaLaunch describes (x, and y and z for the GEMM-tile layout), for every launch
/// path: direct launches, graph nodes and node updates.
inline dim3 grid_dims(const CudaLaunch& l) {
  return dim3(l.grid, l.grid_y, l.grid_z);
}

/// Launches fn with shape's grid, block and dynamic shared memory, in a thread-block cluster of
/// shape.cluster blocks when that is above 1 (the stand-in interpreter).
void launch_kernel(cudaKernel_t fn, const CudaLaunch& shape, void** args, cudaStream_t stream);

struct KernelCacheStats {
  int64_t memory_hits = 0, disk_hits = 0, compiles = 0;
  double compile_ms = 0, load_ms = 0;
  int64_t background_builds = 0; // kernels handed to the background thread
  int64_t standin_launches = 0;  // launches of the stand-in interpreter (direct ones)
};

/// How a kernel launches: its compiled binary, or (standin set) the stand-in interpreter with
/// its own arguments and shape while the binary is being compiled.
struct KernelChoice {
  cudaKernel_t fn = nullptr;
  std::optional<StandinLaunch> standin;
};

class CudaKernelCache {
public:
  explicit CudaKernelCache(int device);
  /// Render/compile/load as needed, then launch on `stream`.
  void launch(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, cudaStream_t stream);
  /// The kernel for (k, v): from memory, else the disk cache, else compiled and loaded.
  cudaKernel_t get(const FusedKernel& k, const CudaVariant& v);
  /// What runs (k, v) now (KILN_COMPILE): its binary from memory or the disk cache; else, where
  /// the interpreter covers k, the stand-in while the binary compiles in the background (or,
  /// with KILN_COMPILE=standin, always); else the binary compiled now, as get().
  KernelChoice choose(const FusedKernel& k, const CudaVariant& v);
  /// Loads the binaries the background thread finished; a failed compile throws here.
  void collect_background_builds();
  /// Waits for every background build and loads them (tests and benchmarks).
  void finish_background_builds();
  /// Loads every kernel of `kernels` and `index_steps` not in memory yet: from the disk cache,
  /// else, for those the stand-in covers (KILN_COMPILE=background), queued for the background
  /// thread, else compiled several at once (Jit::build_all), so that a new plan's first run
  /// waits for its compiles in parallel rather than one after another. choose(), get() and
  /// get_index() then hit memory or find the key pending.
  void prefetch(llvm::ArrayRef<std::pair<const FusedKernel*, CudaVariant>> kernels,
                llvm::ArrayRef<const IndexStep*> index_steps);
  /// The loaded kernel if it is in memory (no compile, no disk), else null; throws the failure
  /// of its background compile.
  cudaKernel_t find(const FusedKernel& k, const CudaVariant& v) const;
  /// Whether the stand-in interpreter runs here (its fatbin has this GPU's arch and NVRTC is
  /// the version that built it).
  bool standin_available() { return standin_kernel(false) != nullptr; }
  const std::string& standin_why() const { return standin_why_; }
  /// The merged kernel of `count` launches of k (render_cuda_repeat), or null while it is not
  /// loaded: from memory or the disk cache, else compiled now (KILN_COMPILE=sync) or in the
  /// background (the default: a later call finds it). Never compiled with KILN_COMPILE=off,
  /// never used with KILN_COMPILE=standin (the members' stand-ins run, for A/B), and null after
  /// its compile failed: the members then launch one by one.
  /// `waiting`: whether a later call may find it (its compile is under way).
  cudaKernel_t repeat(const FusedKernel& k, const CudaRepeat& r, int count, bool& waiting);
  /// Whether (k, v)'s binary is being compiled in the background.
  bool pending(const FusedKernel& k, const CudaVariant& v) const;
  size_t background_outstanding() const { return background_.outstanding(); }
  /// Counts a direct launch of the stand-in (stats).
  void count_standin_launch() { stats_.standin_launches++; }
  /// gather / scatter_add: the kernel s needs (compiled and loaded once) ...
  cudaKernel_t get_index(const IndexStep& s);
  /// ... launched on `stream`; slot_base[i] is slot i's device pointer.
  void launch_index(const IndexStep& s, llvm::ArrayRef<void*> slot_base, IndexError* err,
                    cudaStream_t stream);
  const CudaTarget& target() const { return jit_.target(); }
  KernelCacheStats stats() const;
  int device() const { return device_; }

private:
  int device_;
  Jit jit_;
  /// The kernel for `src` loaded into the driver (built or read from the disk cache).
  cudaKernel_t load(const CudaKernelSource& src);
  /// The same for a binary built already (by build_all).
  cudaKernel_t load(const CudaKernelSource& src, JitKernel built);
  /// Null with `why` when the driver rejects the binary.
  cudaKernel_t try_load(const JitKernel& built, std::string& why);
  /// The interpreter's kernel (loaded at first use), or null when it cannot run here: libkiln
  /// has no fatbin for this GPU, or NVRTC is not the version that built it.
  cudaKernel_t standin_kernel(bool large);
  /// Whether kernels the interpreter covers run as the stand-in rather than wait for NVRTC.
  bool stands_in() const;
  enum class Start { loaded, pending, unavailable };
  void submit_background(std::vector<BackgroundBuilds::Job> jobs) noexcept;
  Start start_background(llvm::StringRef key, const FusedKernel& k, const CudaVariant& v,
                         const StandinLaunch& standin, std::vector<BackgroundBuilds::Job>& jobs);

  llvm::StringMap<cudaKernel_t> loaded_;
  llvm::StringMap<cudaKernel_t> index_kernels_; // index_kernel_id -> kernel
  llvm::StringMap<bool> pending_;               // keys of loaded_ compiling in the background
  llvm::StringMap<std::string> failed_;         // keys whose background compile failed
  BackgroundBuilds background_{jit_};
  bool standin_tried_ = false;
  std::string standin_why_; // why standin_kernel() is null
  cudaLibrary_t standin_lib_ = nullptr;
  cudaKernel_t standin_fns_[2] = {nullptr, nullptr};
  KernelCacheStats stats_; // memory hits and load time (the JIT counts the rest)
};

KernelCacheStats cuda_kernel_cache_stats(); // summed over devices
/// The kernel cache of a device whose backend exists, else null (benchmarks and tests).
const CudaKernelCache* cuda_kernel_cache(int device);
/// Waits for every device's background compiles and loads their binaries (tests, benchmarks).
void cuda_finish_background_builds();
/// Background compiles queued and not yet collected, over the devices (tests).
int64_t cuda_background_builds_outstanding();
/// Why the stand-in interpreter does not run on a device ("" when it does; tests, benchmarks).
std::string cuda_standin_unavailable_reason(int device);
} // namespace kiln::detail

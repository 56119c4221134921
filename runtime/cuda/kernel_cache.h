#pragma once
// Compiled kernels of one device: the table of loaded kernels (in-memory key -> kernel) and
// their launches. A kernel not in the table comes from the JIT (codegen/jit.h: the disk cache,
// else NVRTC) and is loaded here.
#include "codegen/cuda_codegen.h"
#include "codegen/cuda_index.h"
#include "codegen/jit.h"

#include <cuda_runtime.h>
#include <llvm/ADT/StringMap.h>

namespace kiln::detail {

/// The grid a CudaLaunch describes (x, and y and z for the GEMM-tile layout), for every launch
/// path: direct launches, graph nodes and node updates.
inline dim3 grid_dims(const CudaLaunch& l) {
  return dim3(l.grid, l.grid_y, l.grid_z);
}

struct KernelCacheStats {
  int64_t memory_hits = 0, disk_hits = 0, compiles = 0;
  double compile_ms = 0, load_ms = 0;
};

class CudaKernelCache {
public:
  explicit CudaKernelCache(int device);
  /// Render/compile/load as needed, then launch on `stream`.
  void launch(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, cudaStream_t stream);
  /// The kernel for (k, v): from memory, else the disk cache, else compiled and loaded.
  cudaKernel_t get(const FusedKernel& k, const CudaVariant& v);
  /// Loads every kernel of `kernels` and `index_steps` not in memory yet, compiling the missing
  /// ones several at once (Jit::build_all), so that a new plan's first run waits for its
  /// compiles in parallel rather than one after another. get() and get_index() then hit memory.
  void prefetch(llvm::ArrayRef<std::pair<const FusedKernel*, CudaVariant>> kernels,
                llvm::ArrayRef<const IndexStep*> index_steps);
  /// The loaded kernel if it is in memory (no compile, no disk), else null.
  cudaKernel_t find(const FusedKernel& k, const CudaVariant& v) const;
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
  llvm::StringMap<cudaKernel_t> loaded_;
  llvm::StringMap<cudaKernel_t> index_kernels_; // index_kernel_id -> kernel
  KernelCacheStats stats_; // memory hits and load time (the JIT counts the rest)
};

KernelCacheStats cuda_kernel_cache_stats(); // summed over devices
/// The kernel cache of a device whose backend exists, else null (benchmarks and tests).
const CudaKernelCache* cuda_kernel_cache(int device);
} // namespace kiln::detail

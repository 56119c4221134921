#pragma once
// The JIT, in one place: a kernel's binary for (FusedKernel, variant) on a target is rendered
// (cuda_codegen.h), looked up in the disk cache, else compiled by NVRTC and stored there. The
// runtime (runtime/cuda/kernel_cache.h) keeps the table of loaded kernels and launches them;
// it never renders or compiles. Needs NVRTC (built with the CUDA backend), not a GPU.
#include "codegen/disk_cache.h"
#include "codegen/nvrtc_compiler.h"

#include <cstdint>
#include <string>

namespace kiln::detail {

struct JitStats {
  int64_t disk_hits = 0, compiles = 0;
  double compile_ms = 0; // NVRTC time of the compiles
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
  const CudaTarget& target() const { return target_; }
  const JitStats& stats() const { return stats_; }

private:
  CudaTarget target_;
  DiskCache disk_;
  JitStats stats_;
};

} // namespace kiln::detail

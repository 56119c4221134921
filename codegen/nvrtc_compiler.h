#pragma once
// NVRTC: CUDA source -> cubin for the target arch (PTX only when NVRTC does not know the arch).
// Calls NVRTC, never the driver, so it runs on machines without a GPU.
#include "codegen/cuda_codegen.h"

#include <string>
#include <vector>

namespace kiln::detail {

struct CudaBinary {
  std::vector<char> image; // cubin, or PTX text (NUL-terminated) when is_cubin is false
  bool is_cubin = true;
  std::string log; // NVRTC's log (warnings)
  double compile_ms = 0;
};

/// NVRTC's version as major * 1000 + minor * 10 (13000 for 13.0); 0 if NVRTC is unusable.
int nvrtc_version();
/// Whether NVRTC compiles kernels for `arch` to a cubin itself (else to PTX, which the driver's
/// own compiler finishes).
bool nvrtc_makes_cubin(int arch);
/// Compile; on failure throws kiln::Error with NVRTC's log and the path where the source
/// was saved (under the system temp dir). The engine stays usable.
CudaBinary compile_cuda(const CudaKernelSource& src, const CudaTarget& t);

} // namespace kiln::detail

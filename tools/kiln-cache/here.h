#pragma once
// What this machine can use: the GPU's arch and the NVRTC version, found by loading the CUDA
// driver and NVRTC at run time (kiln-cache runs, and reads caches, where neither exists).
#include <optional>

namespace kiln_cache {

struct Here {
  std::optional<int> arch;  // compute capability x 10 of GPU 0
  std::optional<int> nvrtc; // major * 1000 + minor * 10
  int codegen = 0;          // this kiln's code generator
};

/// Detected values, each replaced by the override where one is given.
Here detect_here(std::optional<int> arch, std::optional<int> nvrtc);

} // namespace kiln_cache

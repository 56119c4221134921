// The stand-in interpreter's fatbin, embedded (CMakeLists.txt runs nvcc on
// codegen/device/standin.cu, then bin2c into kiln_standin_fatbin.h); empty where CMake built
// none (no CUDA toolkit, or none of KILN_STANDIN_ARCHS known to its nvcc).
#include "codegen/standin.h"

#if KILN_HAVE_STANDIN
#include "kiln_standin_fatbin.h"
#endif

namespace kiln::detail {

std::span<const std::byte> standin_fatbin() {
#if KILN_HAVE_STANDIN
  return std::span<const std::byte>(reinterpret_cast<const std::byte*>(kiln_standin_fatbin),
                                    sizeof kiln_standin_fatbin);
#else
  return {};
#endif
}

int standin_cuda_version() {
#if KILN_HAVE_CUDA
  return KILN_STANDIN_CUDA_VERSION;
#else
  return 0;
#endif
}

} // namespace kiln::detail

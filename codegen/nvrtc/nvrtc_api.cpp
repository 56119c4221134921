#include "codegen/nvrtc/nvrtc_api.h"

#include "ir/errors.h"
#include "ir/shared_library.h"

#include <cuda.h> // CUDA_VERSION: the toolkit kiln was built with

namespace kiln::detail {

namespace {

#define KILN_STRINGIFY(x) #x
#define KILN_SYMBOL(x) KILN_STRINGIFY(x) // after macro expansion of x

LoadedApi<NvrtcApi> load() {
  LoadedApi<NvrtcApi> l;
  const std::string so = "libnvrtc.so." + std::to_string(CUDA_VERSION / 1000);
  void* lib = open_shared_library(cuda_library_candidates(so, KILN_CUDA_LIB_DIR), l.error);
  if (!lib) {
    l.error = fmt::format("NVRTC, which compiles kiln's CUDA kernels, could not be loaded ({}); "
                          "install the CUDA toolkit's NVRTC or run on the CPU (KILN_DEVICE=cpu)",
                          l.error);
    return l;
  }
#define KILN_NVRTC_LOAD(name)                                                                      \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(library_symbol(lib, KILN_SYMBOL(name)));     \
  if (!l.api.name && l.error.empty()) l.error = "NVRTC (" + so + ") lacks " KILN_SYMBOL(name);
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_LOAD)
#undef KILN_NVRTC_LOAD
  if (!l.error.empty()) close_shared_library(lib); // an incomplete library: not used
  return l;
}

} // namespace

const NvrtcApi& nvrtc_api() {
  std::string why;
  const NvrtcApi* api = lazy_api<NvrtcApi, load>(&why);
  if (!api) fail("compile", "{}", why);
  return *api;
}

std::string nvrtc_unavailable_reason() {
  std::string why;
  lazy_api<NvrtcApi, load>(&why);
  return why;
}

} // namespace kiln::detail

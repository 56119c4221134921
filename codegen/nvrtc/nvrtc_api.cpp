#include "codegen/nvrtc/nvrtc_api.h"

#include "ir/errors.h"
#include "ir/shared_library.h"

#include <cuda.h> // CUDA_VERSION: the toolkit kiln was built with

#include <mutex>

namespace kiln::detail {

namespace {

#define KILN_STRINGIFY(x) #x
#define KILN_SYMBOL(x) KILN_STRINGIFY(x) // after macro expansion of x

// The loaded API, or why it could not be loaded.
struct Loaded {
  NvrtcApi api;
  std::string error;
};

Loaded load() {
  Loaded l;
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
  return l;
}

const Loaded* loaded() {
  static std::mutex mu;
  static Loaded l;
  static bool ok = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!ok) { // until it loads: a later call may find it (a library path set meanwhile)
    l = load();
    ok = l.error.empty();
  }
  return &l;
}

} // namespace

const NvrtcApi& nvrtc_api() {
  const Loaded* l = loaded();
  if (!l->error.empty()) fail("compile", "{}", l->error);
  return l->api;
}

std::string nvrtc_unavailable_reason() {
  return loaded()->error;
}

} // namespace kiln::detail

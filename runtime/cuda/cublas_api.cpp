#include "runtime/cuda/cublas_api.h"

#include "ir/errors.h"
#include "ir/shared_library.h"

#include <cuda.h> // CUDA_VERSION: the toolkit kiln was built with

namespace kiln::detail {

namespace {

#define KILN_STRINGIFY(x) #x
#define KILN_SYMBOL(x) KILN_STRINGIFY(x) // after macro expansion: cublasCreate_v2

// The C entry points have the types CublasApi gives them.
[[maybe_unused]] constexpr CublasGemmEx kGemmExType = &::cublasGemmEx;
[[maybe_unused]] constexpr CublasGemmStridedBatchedEx kGemmStridedBatchedExType =
    &::cublasGemmStridedBatchedEx;

LoadedApi<CublasApi> load() {
  LoadedApi<CublasApi> l;
  const std::string so = "libcublas.so." + std::to_string(CUDA_VERSION / 1000);
  void* lib = open_shared_library(cuda_library_candidates(so, KILN_CUDA_LIB_DIR), l.error);
  if (!lib) {
    l.error = fmt::format("cuBLAS, which computes kiln's large matmuls on the GPU, could not be "
                          "loaded ({}); install the CUDA toolkit's cuBLAS or run on the CPU "
                          "(KILN_DEVICE=cpu)",
                          l.error);
    return l;
  }
#define KILN_CUBLAS_LOAD(name, type)                                                               \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(library_symbol(lib, KILN_SYMBOL(name)));     \
  if (!l.api.name && l.error.empty()) l.error = "cuBLAS (" + so + ") lacks " KILN_SYMBOL(name);
  KILN_CUBLAS_FUNCTIONS(KILN_CUBLAS_LOAD)
#undef KILN_CUBLAS_LOAD
  if (!l.error.empty()) close_shared_library(lib); // an incomplete library: not used
  return l;
}

} // namespace

const CublasApi& cublas_api() {
  std::string why;
  const CublasApi* api = lazy_api<CublasApi, load>(&why);
  if (!api) fail("matmul", "{}", why);
  return *api;
}

std::string cublas_unavailable_reason() {
  std::string why;
  lazy_api<CublasApi, load>(&why);
  return why;
}

} // namespace kiln::detail

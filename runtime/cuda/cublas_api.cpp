#include "runtime/cuda/cublas_api.h"

#include "ir/errors.h"
#include "ir/shared_library.h"

#include <cuda.h> // CUDA_VERSION: the toolkit kiln was built with

#include <mutex>

namespace kiln::detail {

namespace {

#define KILN_STRINGIFY(x) #x
#define KILN_SYMBOL(x) KILN_STRINGIFY(x) // after macro expansion: cublasCreate_v2

// The C entry points have the types CublasApi gives them.
[[maybe_unused]] constexpr CublasGemmEx kGemmExType = &::cublasGemmEx;
[[maybe_unused]] constexpr CublasGemmStridedBatchedEx kGemmStridedBatchedExType =
    &::cublasGemmStridedBatchedEx;

struct Loaded {
  CublasApi api;
  std::string error;
};

Loaded load() {
  Loaded l;
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
  return l;
}

const Loaded* loaded() {
  static std::mutex mu;
  static Loaded l;
  static bool ok = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!ok) {
    l = load();
    ok = l.error.empty();
  }
  return &l;
}

} // namespace

const CublasApi& cublas_api() {
  const Loaded* l = loaded();
  if (!l->error.empty()) fail("matmul", "{}", l->error);
  return l->api;
}

std::string cublas_unavailable_reason() {
  return loaded()->error;
}

} // namespace kiln::detail

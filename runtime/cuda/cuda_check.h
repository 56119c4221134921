#pragma once
// Turning CUDA runtime and cuBLAS status codes into kiln::Error.
#include "ir/errors.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace kiln::detail {

inline void cuda_check(cudaError_t e, const char* op, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError(); // clear a sticky-free error so the engine stays usable
  fail(op, "{} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

inline void cublas_check(cublasStatus_t s, const char* op, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail(op, "{} failed: cuBLAS status {}", what, static_cast<int>(s));
}

} // namespace kiln::detail

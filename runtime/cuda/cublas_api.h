#pragma once
// cuBLAS's functions, loaded at first use (ir/shared_library.h) instead of linked, so that
// libkiln loads on machines without the CUDA toolkit. Call them as cublas_api().cublasX(...);
// cublas_v2.h maps some names to their _v2 symbols, and so do these members.
#include <cublas_v2.h>

#include <string>

namespace kiln::detail {

// cublas_api.h adds C++ overloads of the GEMMs, so &::cublasGemmEx is ambiguous: the types of
// the C entry points (cublas_api.cpp checks that such an overload exists).
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
    cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
    cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);

// Every cuBLAS function kiln calls, with its type.
#define KILN_CUBLAS_FUNCTIONS(X)                                                                   \
  X(cublasCreate, decltype(&::cublasCreate))                                                       \
  X(cublasSetStream, decltype(&::cublasSetStream))                                                 \
  X(cublasSetWorkspace, decltype(&::cublasSetWorkspace))                                           \
  X(cublasGemmEx, CublasGemmEx)                                                                    \
  X(cublasGemmStridedBatchedEx, CublasGemmStridedBatchedEx)

struct CublasApi {
#define KILN_CUBLAS_MEMBER(name, type) type name = nullptr;
  KILN_CUBLAS_FUNCTIONS(KILN_CUBLAS_MEMBER)
#undef KILN_CUBLAS_MEMBER
};

/// cuBLAS, loaded on the first call; throws kiln::Error naming the library and why it could not
/// be loaded.
const CublasApi& cublas_api();
/// "" when cuBLAS loads, else why not (never throws).
std::string cublas_unavailable_reason();

} // namespace kiln::detail

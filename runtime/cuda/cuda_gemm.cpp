#include "runtime/cuda/cuda_gemm.h"
#include "runtime/cuda/cublas_api.h"

#include "runtime/backend.h"
#include "runtime/cuda/cuda_check.h"

#include <cstdlib>

namespace kiln::detail {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// A row-major matrix operand (rows x cols, strides rs/cs) as cuBLAS sees it: the column-major
// matrix with the same bytes is its transpose, so a row-major operand is "N" with ld = rs and a
// column-major (transposed view) one is "T" with ld = cs.
struct Operand {
  cublasOperation_t op;
  int64_t ld;
};

Operand as_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cols == 1 || cs == 1) return {CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  return {CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
}

} // namespace

cudaDataType_t cublas_data_type(DType t) {
  switch (t) {
  case DType::f64:
    return CUDA_R_64F;
  case DType::f16:
    return CUDA_R_16F;
  case DType::bf16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

cublasComputeType_t cublas_compute_type(DType t) {
  if (t == DType::f64) return CUBLAS_COMPUTE_64F;
  return t == DType::f32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

CudaGemm::CudaGemm(OrderedStream& stream) : stream_(stream) {
  if (cublas_enabled()) ready(); // at the device's start, as before: not in a first step
}

// Without cuBLAS (KILN_CUBLAS=0) no GEMM reaches here, so libcublas is never loaded; one that
// comes after set_cublas(true) makes the handle then (before any capture: not during one).
void CudaGemm::ready() {
  if (handle_) return;
  cublas_check(cublas_api().cublasCreate(&handle_), "matmul", "cublasCreate");
  cuda_check(cudaMalloc(&workspace_, kWorkspaceBytes), "matmul", "cudaMalloc (cuBLAS workspace)");
}

void CudaGemm::run(const GemmStep& g, const void* a, const void* b, void* out) {
  ready();
  issue(g, a, b, out, stream_.after_queued());
}

void CudaGemm::issue(const GemmStep& g, const void* a, const void* b, void* out, cudaStream_t s) {
  // cublasSetStream also resets the handle to cuBLAS's own workspace pool, which allocates
  // during a graph capture (allocation nodes a child graph may not hold): our workspace goes
  // back with every change of stream.
  if (!bound_ || s != bound_stream_) {
    cublas_check(cublas_api().cublasSetStream(handle_, s), "matmul", "cublasSetStream");
    cublas_check(cublas_api().cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes), "matmul",
                 "cublasSetWorkspace");
    bound_stream_ = s;
    bound_ = true;
  }
  const int rank = g.out_shape.size();
  const int64_t M = g.out_shape[rank - 2], N = g.out_shape[rank - 1], K = g.a.shape[rank - 1];
  const int64_t isz = itemsize(g.dtype);
  if (g.out_shape.numel() == 0) return;
  if (K == 0) { // a sum of nothing: zeros (cuBLAS rejects a leading dimension of 0)
    cuda_check(cudaMemsetAsync(out, 0, size_t(g.out_shape.numel() * isz), s), "matmul",
               "cudaMemsetAsync");
    return;
  }
  Operand A = as_operand(M, K, g.a.strides[rank - 2], g.a.strides[rank - 1]);
  Operand B = as_operand(K, N, g.b.strides[rank - 2], g.b.strides[rank - 1]);
  const cudaDataType_t dt = cublas_data_type(g.dtype);
  const cublasComputeType_t compute = cublas_compute_type(g.dtype);
  double one_d = 1, zero_d = 0;
  float one_f = 1, zero_f = 0;
  const void* alpha = g.dtype == DType::f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = g.dtype == DType::f64 ? static_cast<const void*>(&zero_d) : &zero_f;

  // Batch dims: the innermost one goes to the strided-batched call; outer ones loop.
  const int nb = rank - 2;
  int64_t inner = nb ? g.out_shape[nb - 1] : 1;
  int64_t sa = nb ? g.a.strides[nb - 1] : 0, sb = nb ? g.b.strides[nb - 1] : 0;
  int64_t outer = 1;
  for (int d = 0; d + 1 < nb; ++d) outer *= g.out_shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rest = o, offa = g.a.offset, offb = g.b.offset;
    for (int d = nb - 2; d >= 0; --d) {
      int64_t i = rest % g.out_shape[d];
      rest /= g.out_shape[d];
      offa += i * g.a.strides[d];
      offb += i * g.b.strides[d];
    }
    const char* pa = static_cast<const char*>(a) + offa * isz;
    const char* pb = static_cast<const char*>(b) + offb * isz;
    char* pc = static_cast<char*>(out) + o * inner * M * N * isz;
    // Column-major: C^T (N x M) = B^T A^T, i.e. cuBLAS(m=N, n=M, k=K, B, A). A single matrix
    // goes through cublasGemmEx: its heuristics pick different (faster) kernels than the
    // batched entry point with a batch of one.
    if (inner == 1)
      cublas_check(cublas_api().cublasGemmEx(handle_, B.op, A.op, N, M, K, alpha, pb, dt, B.ld, pa,
                                             dt, A.ld, beta, pc, dt, N, compute,
                                             CUBLAS_GEMM_DEFAULT),
                   "matmul", "cublasGemmEx");
    else
      cublas_check(cublas_api().cublasGemmStridedBatchedEx(
                       handle_, B.op, A.op, N, M, K, alpha, pb, dt, B.ld, sb, pa, dt, A.ld, sa,
                       beta, pc, dt, N, M * N, inner, compute, CUBLAS_GEMM_DEFAULT),
                   "matmul", "cublasGemmStridedBatchedEx");
  }
}

cudaGraph_t CudaGemm::capture(const GemmStep& g, const void* a, const void* b, void* out) {
  // The capture records only the work issued between begin and end, so the stream may still
  // have earlier work queued; nothing else issues to it meanwhile (one thread drives kiln).
  ready();
  const cudaStream_t s = stream_.after_queued_quietly();
  cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "eval",
             "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    issue(g, a, b, out, s);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  cuda_check(cudaStreamEndCapture(s, &graph), "eval", "cudaStreamEndCapture");
  return graph;
}

} // namespace kiln::detail

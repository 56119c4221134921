#pragma once
// GEMM through cuBLAS: one handle and workspace per stream, created once (at the device's start,
// or at the first GEMM when cuBLAS was off then: kiln::set_cublas). f32 without TF32
// unless allowed (kiln::set_allow_tf32 / KILN_ALLOW_TF32=1), f16/bf16 on tensor cores with
// f32 accumulation, f64. Row-major operands map to cuBLAS's column-major by computing
// C^T = B^T A^T; a transposed operand is an op flag, never a copy.
#include "ir/fused_kernel.h"
#include "runtime/cuda/ordered_stream.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace kiln::detail {

/// The cuBLAS type of a GEMM's operands of type t (f32, f64, f16 or bf16).
cudaDataType_t cublas_data_type(DType t);
/// The compute type of kiln's GEMMs of type t: TF32 for f32 only where allowed.
cublasComputeType_t cublas_compute_type(DType t);

class CudaGemm {
public:
  explicit CudaGemm(OrderedStream& stream);
  /// Issued after the queued launches (OrderedStream::after_queued).
  void run(const GemmStep& g, const void* a, const void* b, void* out);
  /// The same GEMM recorded as a CUDA graph (stream capture of the cuBLAS calls), for a
  /// replayed batch: cuBLAS takes its pointers by value, so a graph is recorded per set of
  /// operands. The caller owns the graph. An earlier queued launch's error is not reported
  /// here (it is not this capture's).
  cudaGraph_t capture(const GemmStep& g, const void* a, const void* b, void* out);

private:
  void ready(); // the handle and workspace, made at first use when not at construction
  void issue(const GemmStep& g, const void* a, const void* b, void* out, cudaStream_t s);

  OrderedStream& stream_;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  cudaStream_t bound_stream_ = nullptr; // the stream handle_ issues to, with workspace_
  bool bound_ = false;
};

} // namespace kiln::detail

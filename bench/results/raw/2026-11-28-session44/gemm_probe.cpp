// Session 44 probe (issue 19): the training sample's large GEMMs through kiln (its default:
// cuBLAS above 2^24 multiply-adds; with PROBE_TILE_LOG2=28 PROBE_DOT_MAX_K=4096 kiln's own
// GEMM-tile and dot kernels) against cuBLAS called directly. us per matmul: 8 independent
// matmuls per eval, 30 evals queued, then a sync; median of 7 batches. Each result is checked
// against the CPU backend (max abs difference printed).
#include "bench_util.h"

#include <kiln/kiln.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

using namespace kiln;

namespace {
struct Case {
  const char* name;
  int64_t m, k, n;
  bool a_t, b_t; // operand stored transposed (read through a transposed view)
};

double cublas_us(cublasHandle_t h, const Case& c) {
  float *a, *b, *o;
  cudaMalloc(&a, c.m * c.k * 4);
  cudaMalloc(&b, c.k * c.n * 4);
  cudaMalloc(&o, c.m * c.n * 4);
  cudaMemset(a, 0, c.m * c.k * 4);
  cudaMemset(b, 0, c.k * c.n * 4);
  float one = 1, zero = 0;
  // row-major C = A B as column-major C^T = B^T A^T; a stored-transposed operand flips its op.
  auto ob = c.b_t ? CUBLAS_OP_T : CUBLAS_OP_N, oa = c.a_t ? CUBLAS_OP_T : CUBLAS_OP_N;
  int64_t ldb = c.b_t ? c.k : c.n, lda = c.a_t ? c.m : c.k;
  double us = bench::time_us(
      [&] {
        for (int i = 0; i < 8; ++i)
          cublasGemmEx(h, ob, oa, c.n, c.m, c.k, &one, b, CUDA_R_32F, ldb, a, CUDA_R_32F, lda,
                       &zero, o, CUDA_R_32F, c.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      },
      [] { cudaDeviceSynchronize(); }, 30, 7);
  cudaFree(a);
  cudaFree(b);
  cudaFree(o);
  return us / 8;
}
} // namespace

int main(int argc, char** argv) {
  const Device gpu = Device::cuda(0);
  cublasHandle_t h;
  cublasCreate(&h);
  std::printf("| case | M x K x N | A^T | B^T | kiln us | cuBLAS direct us | kiln/cuBLAS | max |diff| vs CPU |\n|---|---|---|---|---:|---:|---:|---:|\n");
  std::vector<Case> cases;
  for (int i = 1; i < argc; ++i) { // M,K,N,a_t
    Case c{"arg", 0, 0, 0, false, false};
    int at = 0;
    std::sscanf(argv[i], "%lld,%lld,%lld,%d", (long long*)&c.m, (long long*)&c.k, (long long*)&c.n, &at);
    c.a_t = at != 0;
    cases.push_back(c);
  }
  if (cases.empty())
    cases = {Case{"weight grad", 1024, 512, 256, true, false},
                 Case{"weight grad", 1024, 512, 256, false, false},
                 Case{"weight grad", 256, 512, 1024, true, false},
                 Case{"gates fwd b32", 32, 256, 1024, false, false},
                 Case{"predict", 300, 256, 1024, false, false},
                 Case{"val b128", 128, 256, 1024, false, false},
                 Case{"head grad", 1, 2048, 256, false, false},
                 Case{"dh", 32, 1024, 256, false, true}};
  for (Case c : cases) {
    Tensor a = randn(c.a_t ? Shape{c.k, c.m} : Shape{c.m, c.k}, DType::f32, gpu);
    Tensor av = c.a_t ? transpose(a, 0, 1) : a;
    std::vector<Tensor> b(8), bv(8), o(8); // 8 distinct products: no common subexpression
    for (int i = 0; i < 8; ++i) {
      b[i] = randn(c.b_t ? Shape{c.n, c.k} : Shape{c.k, c.n}, DType::f32, gpu);
      bv[i] = c.b_t ? transpose(b[i], 0, 1) : b[i];
    }
    eval(a), eval(b);
    auto body = [&] {
      for (int i = 0; i < 8; ++i) o[i] = matmul(av, bv[i]) * 2.0f;
      eval(o);
    };
    double k_us = bench::time_us(body, [] { kiln::sync(); }, 30, 7) / 8;
    Tensor ref = matmul(av.to(Device::cpu()), bv[0].to(Device::cpu())) * 2.0f;
    float diff = max(abs(o[0].to(Device::cpu()) - ref)).item<float>();
    double c_us = cublas_us(h, c);
    std::printf("| %s | %lld x %lld x %lld | %d | %d | %.2f | %.2f | %.2f | %.2e |\n", c.name,
                (long long)c.m, (long long)c.k, (long long)c.n, c.a_t, c.b_t, k_us, c_us,
                k_us / c_us, diff);
  }
  std::printf("%s\n", ""), std::fflush(stdout);
  return 0;
}

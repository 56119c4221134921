// How long cuBLAS's first GEMMs take in a fresh process, and whether a tiny GEMM on another
// thread (its own handle and stream) beforehand removes it: argv[1] = cold | warm.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thread>

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

static double gemm(cublasHandle_t h, cudaStream_t s, cudaDataType_t dt, int m, int n, int k,
                   cublasOperation_t ta, void* a, void* b, void* c) {
  auto t = std::chrono::steady_clock::now();
  float one = 1, zero = 0;
  double oned = 1, zerod = 0;
  const bool d = dt == CUDA_R_64F;
  cublasComputeType_t ct = d ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  int lda = ta == CUBLAS_OP_N ? m : k;
  cublasStatus_t st =
      cublasGemmEx(h, ta, CUBLAS_OP_N, m, n, k, d ? (void*)&oned : (void*)&one, a, dt, lda, b, dt,
                   k, d ? (void*)&zerod : (void*)&zero, c, dt, m, ct, CUBLAS_GEMM_DEFAULT);
  cudaStreamSynchronize(s);
  if (st != CUBLAS_STATUS_SUCCESS) std::printf("gemm failed %d\n", (int)st);
  return ms_since(t);
}

int main(int argc, char** argv) {
  const bool warm = argc > 1 && !std::strcmp(argv[1], "warm");
  auto t0 = std::chrono::steady_clock::now();
  cudaFree(nullptr);
  void *a, *b, *c;
  cudaMalloc(&a, 64 << 20);
  cudaMalloc(&b, 64 << 20);
  cudaMalloc(&c, 64 << 20);
  std::printf("context+alloc %.1f ms\n", ms_since(t0));
  double warm_ms = 0;
  std::thread th;
  if (warm) {
    th = std::thread([&] {
      auto t = std::chrono::steady_clock::now();
      cudaSetDevice(0);
      cublasHandle_t h;
      cublasCreate(&h);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      cublasSetStream(h, s);
      gemm(h, s, CUDA_R_32F, 64, 64, 64, CUBLAS_OP_N, a, b, c);
      gemm(h, s, CUDA_R_16F, 64, 64, 64, CUBLAS_OP_N, a, b, c);
      cublasDestroy(h);
      cudaStreamDestroy(s);
      warm_ms = ms_since(t);
    });
    std::this_thread::sleep_for(
        std::chrono::milliseconds(300)); // the set-up a program does meanwhile
    th.join();
    std::printf("warm-up thread %.1f ms\n", warm_ms);
  }
  auto t = std::chrono::steady_clock::now();
  cublasHandle_t h;
  cublasCreate(&h);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cublasSetStream(h, s);
  std::printf("create %.1f ms\n", ms_since(t));
  std::printf("f32 256x1024x2048 first %.2f ms\n",
              gemm(h, s, CUDA_R_32F, 1024, 256, 2048, CUBLAS_OP_N, a, b, c));
  std::printf("f32 256x1024x2048 again %.2f ms\n",
              gemm(h, s, CUDA_R_32F, 1024, 256, 2048, CUBLAS_OP_N, a, b, c));
  std::printf("f32 2048x1024x256 T first %.2f ms\n",
              gemm(h, s, CUDA_R_32F, 1024, 2048, 256, CUBLAS_OP_T, a, b, c));
  std::printf("f32 32x1024x256 first %.2f ms\n",
              gemm(h, s, CUDA_R_32F, 1024, 32, 256, CUBLAS_OP_N, a, b, c));
  std::printf("f32 1x1024x256 first %.2f ms\n",
              gemm(h, s, CUDA_R_32F, 1024, 1, 256, CUBLAS_OP_T, a, b, c));
  std::printf("f16 256x1024x2048 first %.2f ms\n",
              gemm(h, s, CUDA_R_16F, 1024, 256, 2048, CUBLAS_OP_N, a, b, c));
  std::printf("f64 256x256x256 first %.2f ms\n",
              gemm(h, s, CUDA_R_64F, 256, 256, 256, CUBLAS_OP_N, a, b, c));
  return 0;
}

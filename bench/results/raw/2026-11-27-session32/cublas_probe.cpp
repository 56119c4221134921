// Session 32: where cuBLAS's first GEMM of a process goes, on the sample's own shapes (row-major
// (1024,512)@(512,256) weight gradient, (1,2048)@(2048,256) GEMV, (128,256)@(256,1024)).
//   argv[1]: cold | warm<ms> (a thread runs one 64^3 f32 GEMM on its own handle and stream
//   while main sleeps <ms>) | lt (cublasLt: create, heuristic and launch timed apart)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thread>

using Clock = std::chrono::steady_clock;
static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
static Clock::time_point T0;

// Row-major C(M,N) = A(M,K) @ B(K,N) as column-major C^T = B^T A^T.
static double gemm(cublasHandle_t h, cudaStream_t s, int M, int N, int K, void* a, void* b, void* c) {
  auto t = Clock::now();
  float one = 1, zero = 0;
  cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_32F, N, a,
                                   CUDA_R_32F, K, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT);
  cudaStreamSynchronize(s);
  if (st != CUBLAS_STATUS_SUCCESS) std::printf("gemm failed %d\n", (int)st);
  return ms_since(t);
}

static void sample_shapes(cublasHandle_t h, cudaStream_t s, void* a, void* b, void* c) {
  std::printf(" wgrad1024x512x256 %.2f again %.2f |", gemm(h, s, 1024, 256, 512, a, b, c),
              gemm(h, s, 1024, 256, 512, a, b, c));
  std::printf(" gemv1x2048x256 %.2f again %.2f |", gemm(h, s, 1, 256, 2048, a, b, c),
              gemm(h, s, 1, 256, 2048, a, b, c));
  std::printf(" val128x256x1024 %.2f again %.2f", gemm(h, s, 128, 1024, 256, a, b, c),
              gemm(h, s, 128, 1024, 256, a, b, c));
}

static void lt(void* a, void* b, void* c) {
  auto t = Clock::now();
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  std::printf(" ltcreate %.2f", ms_since(t));
  for (int rep = 0; rep < 2; ++rep) {
    const int M = rep ? 1 : 1024, N = 256, K = rep ? 2048 : 512;
    t = Clock::now();
    cublasLtMatmulDesc_t d;
    cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, N, K, N);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, K, M, K);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, N);
    cublasLtMatmulPreference_t p;
    cublasLtMatmulPreferenceCreate(&p);
    size_t ws = 32 << 20;
    cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    std::printf(" | %s desc %.2f", rep ? "gemv" : "wgrad", ms_since(t));
    t = Clock::now();
    cublasLtMatmulHeuristicResult_t r[4];
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, d, lb, la, lc, lc, p, 4, r, &found);
    std::printf(" heuristic %.2f (st %d, %d algos)", ms_since(t), (int)st, found);
    void* w;
    cudaMalloc(&w, ws);
    for (int k = 0; k < 2; ++k) {
      t = Clock::now();
      float one = 1, zero = 0;
      st = cublasLtMatmul(h, d, &one, b, lb, a, la, &zero, c, lc, c, lc, &r[0].algo, w, ws, 0);
      double launch = ms_since(t);
      cudaDeviceSynchronize();
      std::printf(" launch%d %.2f+sync %.2f (st %d)", k, launch, ms_since(t), (int)st);
    }
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "cold";
  T0 = Clock::now();
  cudaFree(nullptr);
  void *a, *b, *c;
  cudaMalloc(&a, 64 << 20);
  cudaMalloc(&b, 64 << 20);
  cudaMalloc(&c, 64 << 20);
  std::printf("%s: context %.1f |", mode, ms_since(T0));
  if (!std::strcmp(mode, "lt")) {
    lt(a, b, c);
    std::printf("\n");
    return 0;
  }
  std::thread th;
  double warm_done = 0, warm_took = 0;
  if (!std::strncmp(mode, "warm", 4)) {
    th = std::thread([&] {
      auto t = Clock::now();
      cublasHandle_t h;
      cublasCreate(&h);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      cublasSetStream(h, s);
      gemm(h, s, 64, 64, 64, a, b, c);
      warm_took = ms_since(t);
      warm_done = ms_since(T0);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(mode + 4)));
  }
  auto t = Clock::now();
  cublasHandle_t h;
  cublasCreate(&h);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cublasSetStream(h, s);
  std::printf(" create %.2f |", ms_since(t));
  auto t1 = Clock::now();
  sample_shapes(h, s, a, b, c);
  std::printf(" | all three %.1f", ms_since(t1));
  if (th.joinable()) th.join();
  if (warm_took) std::printf(" | warm-up took %.1f, done at %.1f", warm_took, warm_done);
  std::printf(" | main done at %.1f\n", ms_since(T0));
  return 0;
}

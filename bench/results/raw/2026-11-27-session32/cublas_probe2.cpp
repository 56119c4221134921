// Session 32 call 2: can cuBLAS's first-use set-up (its heuristic's, ~110 ms) run beside the
// CUDA context's creation, and does an algorithm stored by one process spare the next one it?
//   argv[1]: par1 | parset | parall (a thread runs cublasLt heuristics from t=0 while main creates
//   the context; then main's cublasGemmEx on the sample's shapes) | store | load (cublasLtMatmul
//   with an algorithm a previous process stored: no heuristic) | seq (no thread: baseline)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;
static Clock::time_point T0;
static double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

static double gemm(cublasHandle_t h, cudaStream_t s, int M, int N, int K, cublasOperation_t tb,
                   void* a, void* b, void* c, cudaDataType_t dt = CUDA_R_32F) {
  auto t = Clock::now();
  float one = 1, zero = 0;
  cublasStatus_t st = cublasGemmEx(h, tb, CUBLAS_OP_N, N, M, K, &one, b, dt, tb == CUBLAS_OP_N ? N : K,
                                   a, dt, K, &zero, c, dt, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cudaStreamSynchronize(s);
  if (st != CUBLAS_STATUS_SUCCESS) std::printf("gemm failed %d\n", (int)st);
  return ms_since(t);
}

struct Shape { int M, N, K; cublasOperation_t tb; cudaDataType_t dt; };

static double heuristic(cublasLtHandle_t h, const Shape& g, cublasLtMatmulAlgo_t* out = nullptr) {
  auto t = Clock::now();
  cublasLtMatmulDesc_t d;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &g.tb, sizeof g.tb);
  cublasLtMatrixLayout_t la, lb, lc;
  if (g.tb == CUBLAS_OP_N) cublasLtMatrixLayoutCreate(&lb, g.dt, g.N, g.K, g.N);
  else cublasLtMatrixLayoutCreate(&lb, g.dt, g.K, g.N, g.K);
  cublasLtMatrixLayoutCreate(&la, g.dt, g.K, g.M, g.K);
  cublasLtMatrixLayoutCreate(&lc, g.dt, g.N, g.M, g.N);
  cublasLtMatmulPreference_t p;
  cublasLtMatmulPreferenceCreate(&p);
  size_t ws = 32 << 20;
  cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t r[1];
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, d, lb, la, lc, lc, p, 1, r, &found);
  if (out) *out = r[0].algo;
  return ms_since(t);
}

static const Shape kSet[] = {
    {64, 64, 64, CUBLAS_OP_N, CUDA_R_32F},      {1024, 256, 512, CUBLAS_OP_N, CUDA_R_32F},
    {1, 256, 2048, CUBLAS_OP_N, CUDA_R_32F},    {1, 256, 2048, CUBLAS_OP_T, CUDA_R_32F},
    {512, 512, 512, CUBLAS_OP_T, CUDA_R_32F},   {128, 1024, 256, CUBLAS_OP_N, CUDA_R_32F},
    {2048, 2048, 2048, CUBLAS_OP_N, CUDA_R_32F}, {64, 64, 64, CUBLAS_OP_N, CUDA_R_16BF},
    {64, 64, 64, CUBLAS_OP_N, CUDA_R_16F}};

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "seq";
  T0 = Clock::now();
  std::thread th;
  double th_done = 0;
  std::vector<double> th_each;
  const int nwarm = !std::strcmp(mode, "par1") ? 1 : !std::strcmp(mode, "parset") ? 7
                    : !std::strcmp(mode, "parall") ? 9 : 0;
  if (nwarm) {
    th = std::thread([&] {
      cublasLtHandle_t h;
      cublasLtCreate(&h);
      th_each.push_back(ms_since(T0));
      for (int i = 0; i < nwarm; ++i) th_each.push_back(heuristic(h, kSet[i]));
      th_done = ms_since(T0);
    });
  }
  cudaFree(nullptr);
  void *a, *b, *c;
  cudaMalloc(&a, 64 << 20);
  cudaMalloc(&b, 64 << 20);
  cudaMalloc(&c, 64 << 20);
  std::printf("%s: context %.1f |", mode, ms_since(T0));
  if (!std::strcmp(mode, "store") || !std::strcmp(mode, "load")) {
    cublasLtHandle_t h;
    auto t = Clock::now();
    cublasLtCreate(&h);
    std::printf(" ltcreate %.2f |", ms_since(t));
    Shape g = kSet[1];
    cublasLtMatmulAlgo_t algo;
    if (mode[0] == 's') {
      std::printf(" heuristic %.2f |", heuristic(h, g, &algo));
      FILE* f = std::fopen("/tmp/algo.bin", "wb");
      std::fwrite(&algo, sizeof algo, 1, f);
      std::fclose(f);
    } else {
      FILE* f = std::fopen("/tmp/algo.bin", "rb");
      if (!f || std::fread(&algo, sizeof algo, 1, f) != 1) { std::printf("no algo\n"); return 1; }
      std::fclose(f);
    }
    for (int k = 0; k < 2; ++k) {
      t = Clock::now();
      cublasLtMatmulDesc_t d;
      cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      cublasLtMatrixLayout_t la, lb, lc;
      cublasLtMatrixLayoutCreate(&lb, g.dt, g.N, g.K, g.N);
      cublasLtMatrixLayoutCreate(&la, g.dt, g.K, g.M, g.K);
      cublasLtMatrixLayoutCreate(&lc, g.dt, g.N, g.M, g.N);
      float one = 1, zero = 0;
      void* w;
      cudaMalloc(&w, 32 << 20);
      cublasStatus_t st = cublasLtMatmul(h, d, &one, b, lb, a, la, &zero, c, lc, c, lc, &algo, w, 32 << 20, 0);
      cudaDeviceSynchronize();
      std::printf(" matmul%d %.2f (st %d)", k, ms_since(t), (int)st);
    }
    std::printf("\n");
    return 0;
  }
  auto t = Clock::now();
  if (th.joinable()) th.join();
  std::printf(" joined after %.1f (thread: ltcreate at %.1f, heuristics", ms_since(t), th_each.empty() ? 0 : th_each[0]);
  for (size_t i = 1; i < th_each.size(); ++i) std::printf(" %.1f", th_each[i]);
  std::printf(", done at %.1f) |", th_done);
  t = Clock::now();
  cublasHandle_t h;
  cublasCreate(&h);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cublasSetStream(h, s);
  std::printf(" create %.2f |", ms_since(t));
  const Shape tests[] = {kSet[1], kSet[2], kSet[5], {32, 1024, 256, CUBLAS_OP_T, CUDA_R_32F},
                         {2048, 512, 1024, CUBLAS_OP_N, CUDA_R_32F}, {256, 256, 256, CUBLAS_OP_N, CUDA_R_16BF}};
  const char* names[] = {"wgrad", "gemv", "val", "unseenT", "unseenBig", "bf16"};
  for (int i = 0; i < 6; ++i) {
    double first = gemm(h, s, tests[i].M, tests[i].N, tests[i].K, tests[i].tb, a, b, c, tests[i].dt);
    double again = gemm(h, s, tests[i].M, tests[i].N, tests[i].K, tests[i].tb, a, b, c, tests[i].dt);
    std::printf(" %s %.2f/%.2f", names[i], first, again);
  }
  std::printf(" | done at %.1f\n", ms_since(T0));
  return 0;
}

// kiln matmul against cuBLAS called directly, square and skinny shapes, f32 (no TF32), bf16.
// Both are timed the same way: N calls queued, one device sync, median over batches. Small
// matmuls (at most 4 rows, or tiled ones up to 2^24 multiply-adds: kiln computes them in a
// generated kernel) are also timed with set_small_matmul(blas), kiln's cuBLAS path, side by
// side.
#include "bench_util.h"

#include <kiln/kiln.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

void device_sync() {
  cudaDeviceSynchronize();
}
void kiln_sync() {
  kiln::sync();
}

// Standard normal values (as kiln::randn gives kiln), copied to the device.
void fill_random(void* dst, DType t, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> f(static_cast<size_t>(n));
  for (float& x : f) x = d(rng);
  if (t == DType::bf16) {
    std::vector<__nv_bfloat16> h(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = __float2bfloat16(f[i]);
    cudaMemcpy(dst, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  } else {
    cudaMemcpy(dst, f.data(), f.size() * 4, cudaMemcpyHostToDevice);
  }
}

// Direct cuBLAS: row-major C = A B as column-major C^T = B^T A^T.
double cublas_us(cublasHandle_t h, DType t, int64_t M, int64_t N, int64_t K) {
  size_t isz = itemsize(t);
  void *a, *b, *c;
  cudaMalloc(&a, M * K * isz);
  cudaMalloc(&b, K * N * isz);
  cudaMalloc(&c, M * N * isz);
  fill_random(a, t, M * K, 1); // the same kind of data kiln multiplies: never constants
  fill_random(b, t, K * N, 2);
  float one = 1, zero = 0;
  cudaDataType_t dt = t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  double us = bench::time_us(
      [&] {
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, dt, N, a, dt, K, &zero, c, dt,
                     N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      },
      device_sync);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return us;
}

} // namespace

int main(int argc, char** argv) {
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  bench::print_header("kiln matmul vs cuBLAS", argc, argv);
  cublasHandle_t h;
  cublasCreate(&h);
  std::printf("\n| dtype | M x K x N | cuBLAS us | kiln us | kiln / cuBLAS | kiln TFLOP/s | kiln "
              "cuBLAS path us | kiln GB/s |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  struct Case {
    int64_t m, k, n;
  };
  for (DType t : {DType::f32, DType::bf16})
    for (Case c :
         {Case{4096, 4096, 4096}, Case{8192, 8192, 8192}, Case{64, 64, 64},     Case{256, 256, 256},
          Case{16384, 4096, 64},  Case{64, 4096, 16384},  Case{1, 8192, 8192},  Case{1, 256, 1024},
          Case{1, 1024, 4096},    Case{1, 4096, 4096},    Case{4, 4096, 4096},  Case{2, 512, 512},
          Case{1, 4096, 256},     Case{1, 512, 2048},     Case{4, 256, 1024},   Case{128, 128, 128},
          Case{32, 256, 1024},    Case{512, 64, 512},     Case{1024, 16, 1024}, Case{256, 1024, 64},
          Case{512, 128, 256},    Case{32, 256, 1},       Case{256, 256, 1},    Case{1024, 256, 1},
          Case{1024, 1024, 1},    Case{128, 512, 4}}) {
      Tensor a = randn({c.m, c.k}, t, Device::cuda(0)), b = randn({c.k, c.n}, t, Device::cuda(0));
      eval(a, b);
      Tensor o;
      double k_us = bench::time_us([&] { eval(o = matmul(a, b)); }, kiln_sync);
      double c_us = cublas_us(h, t, c.m, c.n, c.k);
      std::string blas = "-";
      if (c.m * c.k * c.n <= (int64_t(1) << 24)) { // small or tiled: fused unless blas
        set_small_matmul(SmallMatmul::blas);
        blas = std::to_string(bench::time_us([&] { eval(o = matmul(a, b)); }, kiln_sync));
        blas.resize(blas.find('.') + 2);
        set_small_matmul(SmallMatmul::on_gpu);
      }
      const double bytes = double(c.m * c.k + c.k * c.n + c.m * c.n) * itemsize(t);
      std::printf("| %s | %lld x %lld x %lld | %.1f | %.1f | %.2f | %.1f | %s | %.0f |\n",
                  dtype_name(t), (long long)c.m, (long long)c.k, (long long)c.n, c_us, k_us,
                  k_us / c_us, 2.0 * c.m * c.n * c.k / (k_us * 1e6), blas.c_str(),
                  bytes / (k_us * 1e3));
    }
  return 0;
}

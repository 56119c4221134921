// How close can the 9-op chain's elementwise kernel get to copy bandwidth on this GPU? The
// kernel kiln generates (tests/cuda/golden/chain9_f32_vec.cu: a grid-stride loop of one
// 16-byte vector per operand, 256 threads, grid = 8 blocks per SM) against variants of its
// launch and loop, all computing the same bits (checked against the first).
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -o /tmp/chain_lab tools/elementwise-lab/chain_lab.cu
//   /tmp/chain_lab [elements=67108864] [reps=30]
#include <cuda_runtime.h>

#include "../../tests/cuda/golden/chain9_f32_vec.cu" // the kernel as kiln generates it

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "line %d: %s: %s\n", __LINE__, #x, cudaGetErrorString(e_));          \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

struct alignas(16) V4 { float v[4]; };

__device__ __forceinline__ float chain(float v0, float v1) { // as generated, op for op
  const float v4 = v0 * v1 + 1.0f; // two rounded ops: --fmad=false
  const float v5 = tanhf(v4);
  const float v6 = 1.0f / (1.0f + expf(-v5));
  const float v11 = v6 * v0 + (1.0f - v6) * v1;
  return v11 < 0 ? 0.0f : v11;
}

__device__ __forceinline__ V4 chain4(const V4& a, const V4& b) {
  V4 y;
#pragma unroll
  for (int e = 0; e < 4; ++e) y.v[e] = chain(a.v[e], b.v[e]);
  return y;
}

// U vectors per thread per iteration, all loaded before any is computed.
template <int U, int MinBlocks>
__global__ void __launch_bounds__(256, MinBlocks)
    chain_kernel(long long n_, const float* in0, const float* in1, float* out0) {
  const int n = (int)n_; // 32-bit indices, as generated for fewer than 2^31 elements
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  const int nv = n / 4;
  for (int c = tid; c < nv; c += U * stride) {
    V4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c + u * stride < nv) {
        a[u] = reinterpret_cast<const V4*>(in0)[c + u * stride];
        b[u] = reinterpret_cast<const V4*>(in1)[c + u * stride];
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c + u * stride < nv) reinterpret_cast<V4*>(out0)[c + u * stride] = chain4(a[u], b[u]);
  }
  for (int i = nv * 4 + tid; i < n; i += stride) out0[i] = chain(in0[i], in1[i]);
}

__global__ void __launch_bounds__(256) generated(long long n, const float* in0, const float* in1,
                                                 float* out0) {
  // (a wrapper would change its code: the generated kernel is launched itself, below)
}

struct Variant {
  const char* name;
  void (*kernel)(long long, const float*, const float*, float*);
  int blocks_per_sm; // grid = SMs x this; 0: one vector per thread (no loop)
};

void launch(const Variant& v, long long grid, long long n, const float* x, const float* y,
            float* out) {
  if (v.kernel == generated) {
    Params p{n, x, y, out, 1.0, 1.0};
    kiln_mul_add_tanh_sigmoid_etc_f32_v4_sm90_7e13f8<<<grid, 256>>>(p);
  } else {
    v.kernel<<<grid, 256>>>(n, x, y, out);
  }
}

int main(int argc, char** argv) {
  const long long n = argc > 1 ? std::atoll(argv[1]) : (1LL << 26);
  const int reps = argc > 2 ? std::atoi(argv[2]) : 30;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  float *x, *y, *o, *ref, *copy;
  CK(cudaMalloc(&x, n * 4));
  CK(cudaMalloc(&y, n * 4));
  CK(cudaMalloc(&o, n * 4));
  CK(cudaMalloc(&ref, n * 4));
  CK(cudaMalloc(&copy, n * 4));
  std::vector<float> h(n);
  srand(7);
  for (auto& v : h) v = (rand() / (float)RAND_MAX) * 6.0f - 3.0f;
  CK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
  for (auto& v : h) v = (rand() / (float)RAND_MAX) * 6.0f - 3.0f;
  CK(cudaMemcpy(y, h.data(), n * 4, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time_us = [&](auto&& launch) {
    std::vector<float> t;
    for (int r = 0; r < reps + 3; ++r) {
      CK(cudaEventRecord(e0));
      launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return std::vector<float>{t[t.size() / 2], t.front(), t.back()};
  };
  const std::vector<float> cp =
      time_us([&] { CK(cudaMemcpyAsync(copy, x, n * 4, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * n * 4 / (cp[0] * 1e3);
  std::printf("GPU %s, %d SMs; %lld elements; copy %.1f us = %.0f GB/s (read + write)\n\n",
              prop.name, sms, n, cp[0], copy_gbs);
  std::printf("| variant | regs | grid | median us | min-max | GB/s | %% of copy | bits as 0 |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
  const Variant vs[] = {
      {"0: the golden source (codegen v15), grid 8/SM", generated, 8},
      {"A: 1 vector/iter, grid 8/SM (the golden's loop)", chain_kernel<1, 1>, 8},
      {"B: A with __launch_bounds__(256, 8)", chain_kernel<1, 8>, 8},
      {"C: 2 vectors/iter", chain_kernel<2, 1>, 8},
      {"D: 4 vectors/iter", chain_kernel<4, 1>, 8},
      {"E: A, grid 16/SM", chain_kernel<1, 1>, 16},
      {"F: A, grid 4/SM", chain_kernel<1, 1>, 4},
      {"G: one vector per thread, no loop", chain_kernel<1, 1>, 0},
      {"H: 2 vectors/iter, __launch_bounds__(256, 8)", chain_kernel<2, 8>, 8},
  };
  std::vector<float> want(n), got(n);
  for (size_t i = 0; i < std::size(vs); ++i) {
    const Variant& v = vs[i];
    cudaFuncAttributes attr;
    if (v.kernel == generated)
      CK(cudaFuncGetAttributes(&attr, kiln_mul_add_tanh_sigmoid_etc_f32_v4_sm90_7e13f8));
    else
      CK(cudaFuncGetAttributes(&attr, v.kernel));
    const long long nv = n / 4;
    const long long grid =
        v.blocks_per_sm ? std::min<long long>((nv + 255) / 256, (long long)sms * v.blocks_per_sm)
                        : (nv + 255) / 256;
    float* out = i == 0 ? ref : o;
    CK(cudaMemset(out, 0xff, n * 4)); // poisoned: NaN
    launch(v, grid, n, x, y, out);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    bool same = true;
    if (i == 0) {
      CK(cudaMemcpy(want.data(), ref, n * 4, cudaMemcpyDeviceToHost));
    } else {
      CK(cudaMemcpy(got.data(), o, n * 4, cudaMemcpyDeviceToHost));
      same = std::memcmp(want.data(), got.data(), n * 4) == 0;
    }
    const std::vector<float> t = time_us([&] { launch(v, grid, n, x, y, out); });
    const double gbs = 3.0 * n * 4 / (t[0] * 1e3);
    std::printf("| %s | %d | %lld | %.1f | %.1f-%.1f | %.0f | %.0f%% | %s |\n", v.name,
                attr.numRegs, grid, t[0], t[1], t[2], gbs, 100 * gbs / copy_gbs,
                same ? "yes" : "NO");
  }
  std::printf("\nfirst outputs: %g %g %g %g\n", want[0], want[1], want[2], want[3]);
  return 0;
}

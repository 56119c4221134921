// Which grid should kiln's elementwise kernels launch? Two kernels of bench/cuda/chain_gpu.cpp
// written as kiln generates them (a grid-stride loop of one 16-byte vector per operand, 256
// threads), each launched with grids capped at k blocks per SM (kiln: 8) or with a block for
// every 256 x U vectors, and U vectors per thread per iteration, all loaded before any is
// computed:
//   chain: relu(s * x + (1 - s) * y), s = sigmoid(tanh(x * y + 1)), over 64M f32: two streams
//          in, one out, much arithmetic (tests/cuda/golden/chain9_f32_vec.cu runs beside it);
//   bcast: tanh(m + row) * col over 8192 x 8192 f32: one stream in, one out, the row vector
//          and the column's scalar from L2.
// Every variant of a kernel is checked bit for bit against its first (outputs poisoned).
// Session 41 (H200) measured the chain's golden source at 86% of copy bandwidth with kiln's grid,
// 105% with a block per 256 vectors; in chain_gpu the bcast went from 99% to 90% with that
// grid (bench/results/2026-11-28-h200-session41.md).
//   nvcc -O3 -std=c++17 -arch=sm_90 --fmad=false -o /tmp/chain_lab
//   tools/elementwise-lab/chain_lab.cu /tmp/chain_lab [reps=30]
#include <cuda_runtime.h>

#include "../../tests/cuda/golden/chain9_f32_vec.cu" // the chain as kiln generates it

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "line %d: %s: %s\n", __LINE__, #x, cudaGetErrorString(e_));             \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

struct alignas(16) V4 {
  float v[4];
};

struct Args {
  int n, cols;
  const float *in0, *in1, *in2;
  float* out;
};

struct Chain { // as generated, op for op (two rounded ops for x * y + 1: --fmad=false)
  static constexpr int kStreams = 3;
  struct Loaded {
    V4 x, y;
  };
  static __device__ __forceinline__ Loaded load(const Args& a, int c) {
    return {reinterpret_cast<const V4*>(a.in0)[c], reinterpret_cast<const V4*>(a.in1)[c]};
  }
  static __device__ __forceinline__ float one(float x, float y) {
    const float t = tanhf(x * y + 1.0f);
    const float s = 1.0f / (1.0f + expf(-t));
    const float r = s * x + (1.0f - s) * y;
    return r < 0 ? 0.0f : r;
  }
  static __device__ __forceinline__ void store(const Args& a, int c, const Loaded& l) {
    V4 o;
#pragma unroll
    for (int e = 0; e < 4; ++e) o.v[e] = one(l.x.v[e], l.y.v[e]);
    reinterpret_cast<V4*>(a.out)[c] = o;
  }
};

struct Bcast { // tanh(m + row) * col, m [rows, cols], row [cols], col [rows, 1]
  static constexpr int kStreams = 2;
  struct Loaded {
    V4 m, row;
    float col;
  };
  static __device__ __forceinline__ Loaded load(const Args& a, int c) {
    const int i0 = c * 4;
    return {reinterpret_cast<const V4*>(a.in0)[c],
            *reinterpret_cast<const V4*>(a.in1 + i0 % a.cols), a.in2[i0 / a.cols]};
  }
  static __device__ __forceinline__ void store(const Args& a, int c, const Loaded& l) {
    V4 o;
#pragma unroll
    for (int e = 0; e < 4; ++e) o.v[e] = tanhf(l.m.v[e] + l.row.v[e]) * l.col;
    reinterpret_cast<V4*>(a.out)[c] = o;
  }
};

// U vectors per thread per iteration, all loaded before any is computed. n is a multiple of 4.
template <class Op, int U> __global__ void __launch_bounds__(256) elementwise(const Args a) {
  k_wait_for_predecessors(); // as every generated kernel
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = gridDim.x * blockDim.x;
  const int nv = a.n / 4;
  for (int c = tid; c < nv; c += U * stride) {
    typename Op::Loaded l[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c + u * stride < nv) l[u] = Op::load(a, c + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c + u * stride < nv) Op::store(a, c + u * stride, l[u]);
  }
}

struct Variant {
  const char* name;
  void (*kernel)(Args); // null: the golden chain
  int blocks_per_sm;    // the grid's cap; 0: a block for every 256 x u vectors
  int u;
};

template <class Op> std::vector<Variant> variants() {
  return {
      {"kiln's grid: 8 blocks/SM, 1 vector/iter", elementwise<Op, 1>, 8, 1},
      {"8 blocks/SM, 2 vectors/iter", elementwise<Op, 2>, 8, 2},
      {"16 blocks/SM, 1 vector/iter", elementwise<Op, 1>, 16, 1},
      {"32 blocks/SM, 1 vector/iter", elementwise<Op, 1>, 32, 1},
      {"a block per 256 vectors (no loop)", elementwise<Op, 1>, 0, 1},
      {"a block per 512 vectors, 2 per thread", elementwise<Op, 2>, 0, 2},
      {"a block per 1024 vectors, 4 per thread", elementwise<Op, 4>, 0, 4},
  };
}

struct Lab {
  int sms;
  int reps;
  cudaEvent_t e0, e1;

  template <class F> std::vector<float> time_us(F&& launch) {
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
    return {t[t.size() / 2], t.front(), t.back()};
  }

  long long grid_of(const Variant& v, int n) const {
    const long long nv = n / 4;
    return v.blocks_per_sm ? std::min<long long>((nv + 255) / 256, (long long)sms * v.blocks_per_sm)
                           : (nv + 256LL * v.u - 1) / (256LL * v.u);
  }

  void launch(const Variant& v, const Args& a) const {
    const long long grid = grid_of(v, a.n);
    if (v.kernel) {
      v.kernel<<<grid, 256>>>(a);
    } else {
      Params p{a.n, a.in0, a.in1, a.out, 1.0, 1.0};
      kiln_mul_add_tanh_sigmoid_etc_f32_v4_sm90_7e13f8<<<grid, 256>>>(p);
    }
  }

  // Each variant's time against copy bandwidth; bits against the first variant.
  void run(const char* title, std::vector<Variant> vs, Args a, int streams, double copy_gbs) {
    std::printf("\n%s (%d elements, %d streams)\n\n", title, a.n, streams);
    std::printf("| variant | regs | grid | median us | min-max | GB/s | %% of copy | bits |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
    std::vector<float> want(a.n), got(a.n);
    for (size_t i = 0; i < vs.size(); ++i) {
      const Variant& v = vs[i];
      cudaFuncAttributes attr;
      if (v.kernel)
        CK(cudaFuncGetAttributes(&attr, v.kernel));
      else
        CK(cudaFuncGetAttributes(&attr, kiln_mul_add_tanh_sigmoid_etc_f32_v4_sm90_7e13f8));
      CK(cudaMemset(a.out, 0xff, size_t(a.n) * 4)); // poisoned: NaN
      launch(v, a);
      CK(cudaGetLastError());
      CK(cudaMemcpy((i == 0 ? want : got).data(), a.out, size_t(a.n) * 4, cudaMemcpyDeviceToHost));
      const bool same = i == 0 || std::memcmp(want.data(), got.data(), size_t(a.n) * 4) == 0;
      const std::vector<float> t = time_us([&] { launch(v, a); });
      const double gbs = double(streams) * a.n * 4 / (t[0] * 1e3);
      std::printf("| %s | %d | %lld | %.1f | %.1f-%.1f | %.0f | %.0f%% | %s |\n", v.name,
                  attr.numRegs, grid_of(v, a.n), t[0], t[1], t[2], gbs, 100 * gbs / copy_gbs,
                  i == 0 ? "reference"
                  : same ? "same"
                         : "DIFFER");
    }
  }
};

float* device_random(size_t n, unsigned seed) {
  std::vector<float> h(n);
  srand(seed);
  for (float& v : h) v = (rand() / (float)RAND_MAX) * 6.0f - 3.0f;
  float* d;
  CK(cudaMalloc(&d, n * 4));
  CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
  return d;
}

int main(int argc, char** argv) {
  Lab lab;
  lab.reps = argc > 1 ? std::atoi(argv[1]) : 30;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  lab.sms = prop.multiProcessorCount;
  CK(cudaEventCreate(&lab.e0));
  CK(cudaEventCreate(&lab.e1));
  const int n = 1 << 26, rows = 8192, cols = 8192;
  float *x = device_random(n, 7), *y = device_random(n, 8), *row = device_random(cols, 9);
  float *col = device_random(rows, 10), *out, *copy;
  CK(cudaMalloc(&out, size_t(n) * 4));
  CK(cudaMalloc(&copy, size_t(n) * 4));
  const std::vector<float> cp =
      lab.time_us([&] { CK(cudaMemcpyAsync(copy, x, size_t(n) * 4, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 2.0 * n * 4 / (cp[0] * 1e3);
  std::printf("GPU %s, %d SMs; copy of %d floats %.1f us = %.0f GB/s (read + write)\n", prop.name,
              lab.sms, n, cp[0], copy_gbs);

  std::vector<Variant> chain = variants<Chain>();
  chain.insert(chain.begin(),
               Variant{"the golden source (codegen v15), 8 blocks/SM", nullptr, 8, 1});
  chain.push_back({"the golden source, a block per 256 vectors", nullptr, 0, 1});
  lab.run("9-op chain", chain, Args{n, cols, x, y, nullptr, out}, Chain::kStreams, copy_gbs);
  lab.run("tanh(m + row) * col", variants<Bcast>(), Args{rows * cols, cols, x, row, col, out},
          Bcast::kStreams, copy_gbs);
  return 0;
}

// How low can a step of a small recurrent loop go on the GPU? Every step as its own kernel
// (a CUDA graph node per step, with programmatic dependent launch, as kiln replays it) against
// all steps in one persistent kernel that keeps the weights on chip.
//   seed d=64: x = sigmoid(tanh(x @ W + b) * 0.5 + x) - 0.5, x [64, 64]. Rows are independent
//     across steps: a block owning rows needs nothing from other blocks.
//   LSTM batch 1, in 256, hidden 256: every block needs all of h each step; the persistent
//     kernel is one cluster of 16 blocks, each holding its 64 gate rows' weights (128 KB) in
//     shared memory and broadcasting its 16 units of h through distributed shared memory.
// Hand-written, outside kiln: what the engine would have to generate. Checked against a CPU
// reference in double on fresh random inputs, outputs poisoned before the run.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace cg = cooperative_groups;

static void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "line %d: %s: %s\n", line, what, cudaGetErrorString(e));
    std::exit(1);
  }
}
#define CK(x) check((x), #x, __LINE__)

__device__ __forceinline__ void wait_prev() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ float sigm(float v) { return 1.f / (1.f + expf(-v)); }

// ---------------------------------------------------------------- seed, d = 64
constexpr int D = 64;

// One step: 16 blocks x 256 threads, block b owns rows 4b..4b+3, thread (row, col).
__global__ void __launch_bounds__(256) seed_step(const float* __restrict__ x, const float* W,
                                                 const float* b, float* xo) {
  wait_prev();
  const int row = blockIdx.x * 4 + threadIdx.x / D, col = threadIdx.x % D;
  float acc = 0.f;
#pragma unroll 16
  for (int k = 0; k < D; ++k) acc = fmaf(x[row * D + k], W[k * D + col], acc);
  const float y = tanhf(acc + b[col]) * 0.5f + x[row * D + col];
  xo[row * D + col] = sigm(y) - 0.5f;
}

// All steps: the same blocks, W's column in registers, the block's rows of x in shared memory.
__global__ void __launch_bounds__(256) seed_persistent(float* x, const float* W, const float* b,
                                                       int steps) {
  __shared__ __align__(16) float xs[4][D];
  const int r = threadIdx.x / D, col = threadIdx.x % D, row = blockIdx.x * 4 + r;
  float w[D];
#pragma unroll
  for (int k = 0; k < D; ++k) w[k] = W[k * D + col];
  const float bc = b[col];
  xs[r][col] = x[row * D + col];
  __syncthreads();
  for (int s = 0; s < steps; ++s) {
    float acc = 0.f;
    const float4* xr = reinterpret_cast<const float4*>(xs[r]);
#pragma unroll
    for (int k = 0; k < D / 4; ++k) {
      const float4 v = xr[k];
      acc = fmaf(v.x, w[4 * k], acc);
      acc = fmaf(v.y, w[4 * k + 1], acc);
      acc = fmaf(v.z, w[4 * k + 2], acc);
      acc = fmaf(v.w, w[4 * k + 3], acc);
    }
    const float y = tanhf(acc + bc) * 0.5f + xs[r][col];
    __syncthreads();
    xs[r][col] = sigm(y) - 0.5f;
    __syncthreads();
  }
  x[row * D + col] = xs[r][col];
}

// ---------------------------------------------------------------- LSTM, batch 1
constexpr int H = 256, IN = 256, K = IN + H, G = 4 * H; // gate rows G, dot length K
constexpr int UNITS = 16, ROWS = 4 * UNITS;             // per block: 16 units, 64 gate rows
constexpr int LBLOCKS = H / UNITS;                      // 16

// The gate rows of block j: gate q's rows for units 16j..16j+15, so a block's cell update needs
// only its own gates. wt: [G][K] (row = gate row, over [x; h]).
__device__ __forceinline__ int gate_row(int j, int lr) { return (lr / UNITS) * H + j * UNITS + lr % UNITS; }

// One step as one kernel: 16 blocks x 256 threads; warp w computes 8 of the block's 64 dots.
__global__ void __launch_bounds__(256) lstm_step(const float* __restrict__ xt, const float* h,
                                                 const float* __restrict__ wt,
                                                 const float* __restrict__ bias, float* c,
                                                 float* ho) {
  wait_prev();
  __shared__ float gates[ROWS];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, j = blockIdx.x;
  for (int q = 0; q < ROWS / 8; ++q) {
    const int lr = warp * (ROWS / 8) + q, gr = gate_row(j, lr);
    const float4* wr = reinterpret_cast<const float4*>(wt + (size_t)gr * K);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < K / 4 / 32; ++i) {
      const int e = (i * 32 + lane) * 4;
      const float4 wv = wr[i * 32 + lane];
      const float4 v = e < IN ? *reinterpret_cast<const float4*>(xt + e)
                              : *reinterpret_cast<const float4*>(h + e - IN);
      acc += wv.x * v.x + wv.y * v.y + wv.z * v.z + wv.w * v.w;
    }
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) gates[lr] = acc + bias[gr];
  }
  __syncthreads();
  if (threadIdx.x < UNITS) {
    const int u = threadIdx.x, unit = j * UNITS + u;
    const float ig = sigm(gates[u]), fg = sigm(gates[UNITS + u]), gg = tanhf(gates[2 * UNITS + u]),
                og = sigm(gates[3 * UNITS + u]);
    const float cn = fg * c[unit] + ig * gg;
    c[unit] = cn;
    ho[unit] = og * tanhf(cn);
  }
}

// All steps: one cluster of 16 blocks. Dynamic shared memory: the block's 64 weight rows
// (128 KB), then h twice (the step's and the next's, written by every block through DSMEM).
__global__ void __launch_bounds__(256) lstm_persistent(const float* __restrict__ seq, float* h,
                                                       const float* __restrict__ wt,
                                                       const float* __restrict__ bias, float* c,
                                                       int steps) {
  extern __shared__ __align__(16) float sm[];
  float* ws = sm;                  // [ROWS][K]
  float* hs = sm + ROWS * K;       // [2][H]
  __shared__ float gates[ROWS];
  __shared__ float hnew[UNITS];
  cg::cluster_group cluster = cg::this_cluster();
  const int j = (int)cluster.block_rank();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < ROWS * K / 4; i += blockDim.x) {
    const int lr = i / (K / 4), e = i % (K / 4);
    reinterpret_cast<float4*>(ws)[i] =
        reinterpret_cast<const float4*>(wt + (size_t)gate_row(j, lr) * K)[e];
  }
  for (int i = threadIdx.x; i < H; i += blockDim.x) hs[i] = h[i];
  float cu = 0.f, bq[ROWS / 8];
  if (threadIdx.x < UNITS) cu = c[j * UNITS + threadIdx.x];
  for (int q = 0; q < ROWS / 8; ++q) bq[q] = bias[gate_row(j, warp * (ROWS / 8) + q)];
  cluster.sync();
  for (int s = 0; s < steps; ++s) {
    const float* hc = hs + (s & 1) * H;
    float* hn = hs + ((s + 1) & 1) * H;
    const float* xt = seq + (size_t)s * IN;
    float4 v[K / 4 / 32]; // this lane's slice of [x_t; h]
#pragma unroll
    for (int i = 0; i < K / 4 / 32; ++i) {
      const int e = (i * 32 + lane) * 4;
      v[i] = e < IN ? *reinterpret_cast<const float4*>(xt + e)
                    : *reinterpret_cast<const float4*>(hc + e - IN);
    }
    for (int q = 0; q < ROWS / 8; ++q) {
      const int lr = warp * (ROWS / 8) + q;
      const float4* wr = reinterpret_cast<const float4*>(ws + lr * K);
      float acc = 0.f;
#pragma unroll
      for (int i = 0; i < K / 4 / 32; ++i) {
        const float4 wv = wr[i * 32 + lane];
        acc += wv.x * v[i].x + wv.y * v[i].y + wv.z * v[i].z + wv.w * v[i].w;
      }
      for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
      if (lane == 0) gates[lr] = acc + bq[q];
    }
    __syncthreads();
    if (threadIdx.x < UNITS) {
      const int u = threadIdx.x;
      const float ig = sigm(gates[u]), fg = sigm(gates[UNITS + u]),
                  gg = tanhf(gates[2 * UNITS + u]), og = sigm(gates[3 * UNITS + u]);
      cu = fg * cu + ig * gg;
      hnew[u] = og * tanhf(cu);
    }
    __syncthreads();
    { // thread t sends unit t % 16 to block t / 16
      const int dst = threadIdx.x / UNITS, u = threadIdx.x % UNITS;
      float* remote = cluster.map_shared_rank(hn, dst);
      remote[j * UNITS + u] = hnew[u];
    }
    cluster.sync();
  }
  if (threadIdx.x < UNITS) {
    c[j * UNITS + threadIdx.x] = cu;
    h[j * UNITS + threadIdx.x] = hnew[threadIdx.x];
  }
}

// ---------------------------------------------------------------- host side
struct Timing {
  double med, lo, hi;
};

template <class F> Timing time_us_per_step(F run, int steps, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  run(); // warm
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    run();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / steps);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

std::vector<float> randv(size_t n, float scale, std::mt19937& g) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g) * scale;
  return v;
}

float* dev(const std::vector<float>& v) {
  float* p;
  CK(cudaMalloc(&p, v.size() * sizeof(float)));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}
std::vector<float> host(const float* p, size_t n) {
  std::vector<float> v(n);
  CK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
void poison(float* p, size_t n) { CK(cudaMemset(p, 0xff, n * sizeof(float))); } // NaN

double max_err(const std::vector<float>& a, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(a[i] - ref[i]);
    if (!(e <= m)) m = std::isnan(e) ? INFINITY : e;
  }
  return m;
}

// A graph of `steps` launches, each dependent on the last through programmatic dependent launch.
template <class L> cudaGraphExec_t graph_of(int steps, L launch_step) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < steps; ++i) launch_step(s, i);
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(s));
  return e;
}

template <class... A, class... P>
void launch_pdl(cudaStream_t s, int grid, void (*k)(A...), P... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = 256;
  cfg.stream = s;
  cudaLaunchAttribute at{};
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, args...));
}

bool report(const char* name, Timing t, double err, double tol) {
  const bool ok = err <= tol;
  std::printf("| %s | %.3f | %.3f | %.3f | %.2e %s |\n", name, t.med, t.lo, t.hi, err,
              ok ? "ok" : "WRONG");
  return ok;
}

std::vector<double> seed_ref(std::vector<float> x0, const std::vector<float>& W,
                             const std::vector<float>& b, int steps) {
  std::vector<double> x(x0.begin(), x0.end()), y(x.size());
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < D; ++r)
      for (int c = 0; c < D; ++c) {
        double acc = 0;
        for (int k = 0; k < D; ++k) acc += x[r * D + k] * W[k * D + c];
        y[r * D + c] = 1 / (1 + std::exp(-(std::tanh(acc + b[c]) * 0.5 + x[r * D + c]))) - 0.5;
      }
    x.swap(y);
  }
  return x;
}

std::vector<double> lstm_ref(const std::vector<float>& seq, const std::vector<float>& wt,
                             const std::vector<float>& bias, int steps) {
  std::vector<double> h(H, 0.0), c(H, 0.0), g(G);
  auto sg = [](double v) { return 1 / (1 + std::exp(-v)); };
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < G; ++r) {
      double acc = bias[r];
      for (int k = 0; k < IN; ++k) acc += double(wt[(size_t)r * K + k]) * seq[(size_t)s * IN + k];
      for (int k = 0; k < H; ++k) acc += double(wt[(size_t)r * K + IN + k]) * h[k];
      g[r] = acc;
    }
    for (int u = 0; u < H; ++u) {
      c[u] = sg(g[H + u]) * c[u] + sg(g[u]) * std::tanh(g[2 * H + u]);
      h[u] = sg(g[3 * H + u]) * std::tanh(c[u]);
    }
  }
  return h;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int check_steps = 64;
  std::mt19937 gen(12345);
  bool ok = true;
  std::printf("| variant | us/step median | min | max | max abs error vs CPU after %d steps |\n"
              "|---|---|---|---|---|\n",
              check_steps);

  { // seed
    const std::vector<float> x0 = randv(D * D, 1.f, gen), W = randv(D * D, 1.f / 8, gen),
                             b = randv(D, 0.1f, gen);
    const std::vector<double> ref = seed_ref(x0, W, b, check_steps);
    float *x[2] = {dev(x0), dev(x0)}, *dW = dev(W), *db = dev(b);
    auto reset = [&] {
      CK(cudaMemcpy(x[0], x0.data(), D * D * 4, cudaMemcpyHostToDevice));
      poison(x[1], D * D);
    };
    auto step_graph = [&](int n) {
      return graph_of(n, [&](cudaStream_t s, int i) {
        launch_pdl(s, D / 4, seed_step, (const float*)x[i & 1], (const float*)dW,
                   (const float*)db, x[(i + 1) & 1]);
      });
    };
    cudaGraphExec_t gc = step_graph(check_steps), gt = step_graph(steps);
    reset();
    CK(cudaGraphLaunch(gc, 0));
    double err = max_err(host(x[0], D * D), ref); // 64 steps: even, back in x[0]
    reset();
    Timing t = time_us_per_step([&] { CK(cudaGraphLaunch(gt, 0)); }, steps, reps);
    ok &= report("seed d=64, a kernel per step (graph, PDL)", t, err, 1e-4);

    reset();
    seed_persistent<<<D / 4, 256>>>(x[0], dW, db, check_steps);
    CK(cudaGetLastError());
    err = max_err(host(x[0], D * D), ref);
    t = time_us_per_step([&] { seed_persistent<<<D / 4, 256>>>(x[0], dW, db, steps); }, steps,
                         reps);
    ok &= report("seed d=64, one persistent kernel (16 blocks)", t, err, 1e-4);
  }

  { // LSTM
    const float scale = 1.f / 16; // 1/sqrt(H)
    const std::vector<float> seq = randv((size_t)std::max(steps, check_steps) * IN, 1.f, gen),
                             wt = randv((size_t)G * K, scale, gen), bias = randv(G, scale, gen);
    const std::vector<double> ref = lstm_ref(seq, wt, bias, check_steps);
    float *dseq = dev(seq), *dwt = dev(wt), *db = dev(bias);
    float *h[2], *c;
    CK(cudaMalloc(&h[0], H * 4));
    CK(cudaMalloc(&h[1], H * 4));
    CK(cudaMalloc(&c, H * 4));
    auto reset = [&] {
      CK(cudaMemset(h[0], 0, H * 4));
      CK(cudaMemset(c, 0, H * 4));
      poison(h[1], H);
    };
    auto step_graph = [&](int n) {
      return graph_of(n, [&](cudaStream_t s, int i) {
        launch_pdl(s, LBLOCKS, lstm_step, (const float*)(dseq + (size_t)i * IN),
                   (const float*)h[i & 1], (const float*)dwt, (const float*)db, c,
                   h[(i + 1) & 1]);
      });
    };
    cudaGraphExec_t gc = step_graph(check_steps), gt = step_graph(steps);
    reset();
    CK(cudaGraphLaunch(gc, 0));
    double err = max_err(host(h[0], H), ref);
    reset();
    Timing t = time_us_per_step([&] { CK(cudaGraphLaunch(gt, 0)); }, steps, reps);
    ok &= report("LSTM b1 h256, a kernel per step (graph, PDL)", t, err, 1e-4);

    const size_t smem = (size_t)(ROWS * K + 2 * H) * 4;
    CK(cudaFuncSetAttribute(lstm_persistent, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)smem));
    CK(cudaFuncSetAttribute(lstm_persistent, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    auto launch_persistent = [&](int n) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = LBLOCKS;
      cfg.blockDim = 256;
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute at{};
      at.id = cudaLaunchAttributeClusterDimension;
      at.val.clusterDim.x = LBLOCKS;
      at.val.clusterDim.y = at.val.clusterDim.z = 1;
      cfg.attrs = &at;
      cfg.numAttrs = 1;
      CK(cudaLaunchKernelEx(&cfg, lstm_persistent, (const float*)dseq, h[0], (const float*)dwt,
                            (const float*)db, c, n));
    };
    reset();
    launch_persistent(check_steps);
    CK(cudaDeviceSynchronize());
    err = max_err(host(h[0], H), ref);
    reset();
    t = time_us_per_step([&] { launch_persistent(steps); }, steps, reps);
    ok &= report("LSTM b1 h256, one persistent cluster of 16 (weights in shared memory)", t, err,
                 1e-4);
  }
  std::printf("\n%s\n", ok ? "all variants match the CPU reference" : "SOME VARIANTS ARE WRONG");
  return ok ? 0 : 1;
}

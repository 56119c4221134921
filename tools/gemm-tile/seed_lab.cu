// seed_lab: the seed loop's step (x = sigmoid(tanh(x @ W + b) * 0.5 + x) - 0.5) and the same
// epilogue over other matmul shapes, written by hand in several tile layouts and timed back to
// back as kiln runs them (one kernel per step; for a square step x ping-pongs between two
// buffers), so that a layout is measured before the emitter learns it. Modes: direct launches
// and one single-kernel CUDA graph per step (kiln's replay); layouts marked pdl launch with
// programmatic dependent launch. Every layout's result is compared with a double-precision
// CPU reference (3 steps of the seed, or one step).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/gemm-tile/seed_lab.cu -o /tmp/seed_lab
//   /tmp/seed_lab STEPS MxKxN...      e.g. /tmp/seed_lab 3000 256x256x256 64x64x64
//
// The layouts (T: tile edge; R: register tile edge; C: blocks of a cluster splitting K; BK: the
// K chunk staged in shared memory, x NB buffers; G = 256 / (T/R)^2 groups of threads split
// each chunk's K inside a block):
//   T32 R2 C2 BK64x2 (G 1) is what kiln generated for the seed step at 256 in codegen v6;
//   R4 with G > 1 gives each thread a 4 x 4 register tile and each group a share of the chunk:
//   a quarter of the shared-memory wavefronts per multiply-add, for one more reduction.
// The lab assumes whole tiles (a layout whose T does not divide M and N is skipped); a short
// last chunk loads zeros. Results: bench/results/2026-11-22-h100-gemm-k-groups.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

struct P {
  const float* x; // A operand: [M, K], strides am, ak
  const float* r; // the epilogue's "+ x": [M, N] (x itself when N == K)
  const float* w; // B: [K, N], strides bk, bn
  const float* b; // [N]
  float* out;     // [M, N]
  long long M, N, K, am, ak, bk, bn;
  double c_half, c_sub;
};

__device__ __forceinline__ unsigned cl_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cl_sync() {
  asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ void cl_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::
                   : "memory");
}
__device__ __forceinline__ float cl_ld(const float* p, unsigned rank) {
  unsigned a, r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
  return v;
}
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;");
}

template <int N> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

// PDL: 0 none; 1 wait before the first load; 2 W's first chunk loads before the wait (W is
// not written by the step, so it may be read while the previous step runs).
template <int T, int R, int C, int BK, int NB, int PDL>
__global__ void __launch_bounds__(256) step(const __grid_constant__ P p) {
  constexpr int NT = 256, TR = T / R, G = NT / (TR * TR), KG = BK / G;
  constexpr int AS = T + R; // A is stored k-major (As[k][m]); +R keeps the vector reads aligned
  constexpr int BUF = BK * AS + BK * T, LA = T * BK / NT, E = T * T / (C * NT);
  static_assert(G * TR * TR == NT && KG * G == BK && LA * NT == T * BK && E * C * NT == T * T);
  __shared__ __align__(16) float sm[NB * BUF > G * T * T ? NB * BUF : G * T * T];
  if (PDL) pdl_trigger();
  const int tid = threadIdx.x, g = tid / (TR * TR), lt = tid % (TR * TR), tx = lt % TR,
            ty = lt / TR;
  const unsigned rank = C > 1 ? cl_rank() : 0;
  const int tn = blockIdx.x / C, tm = blockIdx.y;
  const int N = (int)p.N, K = (int)p.K;
  const int m0 = tm * T, n0 = tn * T;
  const int am = (int)p.am, ak = (int)p.ak, bk = (int)p.bk, bn = (int)p.bn;
  const int kspan = (K + C * BK - 1) / (C * BK) * BK;
  const int kb = rank * kspan, ke = min(K, kb + kspan);
  const float* A0 = p.x + m0 * am;
  const float* B0 = p.w + n0 * bn;
  float ra[LA], rb[LA];
  // Past ke (a short last chunk) the loads give zeros, which the full chunk's multiply-adds
  // then add harmlessly.
  auto load_a = [&](int kc) {
    const bool whole = kc + BK <= ke;
#pragma unroll
    for (int q = 0; q < LA; ++q) {
      const int e = tid + q * NT, ka = e % BK, ma = e / BK;
      ra[q] = whole || kc + ka < ke ? A0[ma * am + (kc + ka) * ak] : 0.f;
    }
  };
  auto load_b = [&](int kc) {
    const bool whole = kc + BK <= ke;
#pragma unroll
    for (int q = 0; q < LA; ++q) {
      const int e = tid + q * NT, nb = e % T, kq = e / T;
      rb[q] = whole || kc + kq < ke ? B0[(kc + kq) * bk + nb * bn] : 0.f;
    }
  };
  if (PDL == 2) load_b(kb);
  if (PDL) pdl_wait();
  load_a(kb);
  if (PDL != 2) load_b(kb);
  // The epilogue's inputs, prefetched.
  float px[E], pb[E];
#pragma unroll
  for (int j = 0; j < E; ++j) {
    const int e = (int)rank * (T * T / C) + tid + j * NT, mm = e / T, nn = e % T;
    px[j] = p.r[(m0 + mm) * N + n0 + nn];
    pb[j] = p.b[n0 + nn];
  }
  float acc[R][R] = {};
  int buf = 0;
  for (int k0 = kb; k0 < ke; k0 += BK) {
    float* As = sm + buf * BUF;
    float* Bs = As + BK * AS;
#pragma unroll
    for (int q = 0; q < LA; ++q) {
      const int e = tid + q * NT;
      As[(e % BK) * AS + e / BK] = ra[q];
      Bs[(e / T) * T + e % T] = rb[q];
    }
    __syncthreads();
    if (k0 + BK < ke) {
      load_a(k0 + BK);
      load_b(k0 + BK);
    }
#pragma unroll
    for (int kk = g * KG; kk < (g + 1) * KG; ++kk) {
      using V = typename Vec<R>::T;
      const V va = *reinterpret_cast<const V*>(&As[kk * AS + ty * R]);
      const V vb = *reinterpret_cast<const V*>(&Bs[kk * T + tx * R]);
      const float* a = reinterpret_cast<const float*>(&va);
      const float* b = reinterpret_cast<const float*>(&vb);
#pragma unroll
      for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < R; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    buf = (buf + 1) % NB;
    if (NB == 1) __syncthreads(); // the next chunk overwrites this one
  }
  __syncthreads();
  // This block's sums: the K groups' partial tiles added in group order, at sm[0, T*T).
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < R; ++j) sm[g * T * T + (ty * R + i) * T + tx * R + j] = acc[i][j];
  if (G > 1) {
    __syncthreads();
#pragma unroll
    for (int j = 0; j < T * T / NT; ++j) {
      const int e = tid + j * NT;
      float s = sm[e];
#pragma unroll
      for (int q = 1; q < G; ++q) s += sm[q * T * T + e];
      sm[e] = s;
    }
  }
  if (C > 1)
    cl_sync();
  else
    __syncthreads();
#pragma unroll
  for (int j = 0; j < E; ++j) {
    const int e = (int)rank * (T * T / C) + tid + j * NT, mm = e / T, nn = e % T;
    float s = 0;
#pragma unroll
    for (unsigned q = 0; q < (unsigned)C; ++q) s += q == rank ? sm[e] : cl_ld(&sm[e], q);
    const float v = tanhf(s + pb[j]) * (float)p.c_half + px[j];
    p.out[(m0 + mm) * N + n0 + nn] = 1.0f / (1.0f + expf(-v)) - (float)p.c_sub;
  }
  if (C > 1) cl_sync_relaxed();
}

struct Variant {
  std::string name;
  void (*fn)(P);
  int T, C;
  int pdl; // launch with programmatic stream serialization
};

#define V(T, R, C, BK, NB, PDL)                                                                    \
  Variant {                                                                                        \
    "T" #T " R" #R " C" #C " BK" #BK "x" #NB " pdl" #PDL, step<T, R, C, BK, NB, PDL>, T, C, PDL    \
  }

static void launch(const Variant& v, const P& p, cudaStream_t s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(p.N / v.T * v.C), unsigned(p.M / v.T), 1);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  int n = 0;
  if (v.C > 1) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = v.C;
    at[n].val.clusterDim.y = 1;
    at[n].val.clusterDim.z = 1;
    ++n;
  }
  if (v.pdl) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = at;
  cfg.numAttrs = n;
  CK(cudaLaunchKernelEx(&cfg, v.fn, p));
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// All layouts for one shape; a layout whose tile does not divide M and N is skipped.
static std::vector<Variant> variants() {
  return {V(16, 1, 1, 128, 2, 0), V(32, 2, 1, 64, 2, 0),  V(32, 2, 2, 64, 2, 0),
          V(32, 2, 4, 64, 2, 0),  V(64, 4, 1, 32, 2, 0),  V(64, 4, 2, 32, 2, 0),
          V(64, 4, 4, 32, 2, 0),  V(64, 4, 8, 32, 2, 0),  V(16, 4, 1, 64, 2, 0),
          V(16, 4, 1, 128, 2, 0), V(16, 2, 1, 128, 2, 0), V(32, 4, 1, 64, 2, 0),
          V(32, 4, 2, 64, 2, 0),  V(32, 4, 4, 64, 2, 0),  V(32, 4, 2, 128, 1, 0),
          V(16, 4, 1, 64, 2, 1),  V(32, 4, 2, 64, 2, 2)};
}

// One shape: M x K x N; the seed's step when N == K (x ping-pongs), else a fixed A and
// residual with the output in a third buffer.
static void run_shape(int M, int K, int N, int steps, cudaStream_t s) {
  const bool square = N == K;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> hx(size_t(M) * K), hr(size_t(M) * N), hw(size_t(K) * N), hb(N);
  for (float& v : hx) v = nd(rng);
  for (float& v : hr) v = nd(rng);
  for (float& v : hw) v = nd(rng) / std::sqrt(float(K));
  for (float& v : hb) v = 0.1f * nd(rng);
  if (square) hr = hx;
  // Reference in double: 3 steps of the seed, or one step.
  const int ref_steps = square ? 3 : 1;
  std::vector<double> rx(hx.begin(), hx.end()), rr(hr.begin(), hr.end()), ry(size_t(M) * N);
  for (int st = 0; st < ref_steps; ++st) {
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += rx[size_t(m) * K + k] * double(hw[size_t(k) * N + n]);
        const double v = std::tanh(acc + hb[n]) * 0.5 + rr[size_t(m) * N + n];
        ry[size_t(m) * N + n] = 1 / (1 + std::exp(-v)) - 0.5;
      }
    if (square) {
      rx = ry;
      rr = ry;
    }
  }
  float *x0, *x1, *r, *w, *b, *o;
  CK(cudaMalloc(&x0, hx.size() * 4));
  CK(cudaMalloc(&x1, hx.size() * 4));
  CK(cudaMalloc(&r, hr.size() * 4));
  CK(cudaMalloc(&o, hr.size() * 4));
  CK(cudaMalloc(&w, hw.size() * 4));
  CK(cudaMalloc(&b, N * 4));
  CK(cudaMemcpy(w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), N * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(r, hr.data(), hr.size() * 4, cudaMemcpyHostToDevice));
  auto params = [&](const float* in, float* out) {
    return P{in, square ? in : r, w, b, out, M, N, K, K, 1, N, 1, 0.5, 0.5};
  };
  const P pa = square ? params(x0, x1) : params(x0, o), pb = square ? params(x1, x0) : pa;
  float* result = square && ref_steps % 2 == 0 ? x0 : square ? x1 : o;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::printf("\n%d x %d x %d (%s), %d steps per timed loop, median of 5 loops\n\n", M, K, N,
              square ? "seed step, x ping-pongs" : "fixed operands", steps);
  std::printf("| layout | blocks | max err vs CPU | direct us/step | graph us/step |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const Variant& v : variants()) {
    if (M % v.T || N % v.T) continue;
    CK(cudaMemcpy(x0, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(x1, 0xff, hx.size() * 4));
    CK(cudaMemset(o, 0xff, hr.size() * 4));
    for (int i = 0; i < ref_steps; ++i) launch(v, i % 2 ? pb : pa, s);
    CK(cudaStreamSynchronize(s));
    std::vector<float> got(ry.size());
    CK(cudaMemcpy(got.data(), result, got.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i)
      err = std::max(err, std::isnan(got[i]) ? 1e9 : std::fabs(double(got[i]) - ry[i]));
    std::vector<double> direct, graph;
    for (int rep = 0; rep < 6; ++rep) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < steps; ++i) launch(v, i % 2 ? pb : pa, s);
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep) direct.push_back(ms * 1000 / steps);
    }
    // One single-kernel graph per step, two executables (the ping-pong), as kiln replays.
    cudaGraphExec_t ge[2];
    for (int k = 0; k < 2; ++k) {
      cudaGraph_t gr;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      launch(v, k ? pb : pa, s);
      CK(cudaStreamEndCapture(s, &gr));
      CK(cudaGraphInstantiate(&ge[k], gr, 0));
      CK(cudaGraphDestroy(gr));
    }
    for (int rep = 0; rep < 6; ++rep) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < steps; ++i) CK(cudaGraphLaunch(ge[i % 2], s));
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep) graph.push_back(ms * 1000 / steps);
    }
    for (auto& g : ge) CK(cudaGraphExecDestroy(g));
    std::printf("| %s | %d | %.1e | %.2f | %.2f |\n", v.name.c_str(), M / v.T * (N / v.T) * v.C,
                err, median(direct), median(graph));
    std::fflush(stdout);
  }
  for (float* q : {x0, x1, r, o, w, b}) CK(cudaFree(q));
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 4000;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 2; i < argc; ++i) {
    int M, K, N;
    if (std::sscanf(argv[i], "%dx%dx%d", &M, &K, &N) != 3) {
      std::fprintf(stderr, "shape %s: want MxKxN\n", argv[i]);
      return 2;
    }
    run_shape(M, K, N, steps, s);
  }
  return 0;
}

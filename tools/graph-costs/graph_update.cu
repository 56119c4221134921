// Host cost per step of the ways to feed a CUDA graph an input at a new address every step
// (issue 5: an LSTM reading x[t] of a sequence). Standalone:
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/graph-costs/graph_update.cu -o /tmp/gu && /tmp/gu
// Results: bench/results/2026-11-22-h100-batched-dispatch.md, "Feeding a graph a moving input".
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>
#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
__global__ void k(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] * 2.f + 1.f;
}
// The shape of kiln's LSTM cell kernel: thread-block clusters of 8 (compiled in) and a Params
// struct of ~1 KB passed by value. Does repointing such a node cost more than a plain one?
struct Big {
  const float* a;
  float* b;
  int n;
  long long pad[120];
};
__global__ void __cluster_dims__(8, 1, 1) kc(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i] * 2.f + 1.f;
}
__global__ void kbig(Big p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.b[i] = p.a[i] * 2.f + 1.f;
}
// Host and total us per step of `steps` launches of a one-node graph running `fn` on `grid`
// blocks, repointing its input to a new slice of `seq` first when `repoint` is set. `make`
// fills a kernel argument array for an input pointer.
template <class Make>
int time_node(const char* what, void* fn, int grid, float* seq, int n, int seqlen, int steps,
              bool repoint, Make make, cudaStream_t s) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaKernelNodeParams kp = {};
  kp.func = fn;
  kp.gridDim = dim3(grid);
  kp.blockDim = dim3(256);
  auto args = make(seq);
  kp.kernelParams = args.ptrs;
  cudaGraphNode_t node;
  CK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp));
  cudaGraphExec_t ex;
  CK(cudaGraphInstantiate(&ex, g, 0));
  CK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (repoint) {
      auto a2 = make(seq + (i % seqlen) * n);
      cudaKernelNodeParams p2 = kp;
      p2.kernelParams = a2.ptrs;
      CK(cudaGraphExecKernelNodeSetParams(ex, node, &p2));
    }
    CK(cudaGraphLaunch(ex, s));
  }
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaStreamSynchronize(s));
  auto t2 = std::chrono::steady_clock::now();
  auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  printf("%-40s host %.2f us/step, total %.2f\n", what, us(t0, t1) / steps, us(t0, t2) / steps);
  cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  return 0;
}
int main() {
  const int n = 256, steps = 20000, seqlen = 512;
  float *seq, *stage, *out;
  CK(cudaMalloc(&seq, sizeof(float) * n * seqlen));
  CK(cudaMalloc(&stage, sizeof(float) * n));
  CK(cudaMalloc(&out, sizeof(float) * n));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  // graph A: memcpy node (seq slice -> stage) + kernel node
  cudaGraph_t gA;
  CK(cudaGraphCreate(&gA, 0));
  cudaGraphNode_t cp, kn;
  CK(cudaGraphAddMemcpyNode1D(&cp, gA, nullptr, 0, stage, seq, sizeof(float) * n,
                              cudaMemcpyDeviceToDevice));
  int nn = n;
  void* args[] = {&stage, &out, &nn};
  cudaKernelNodeParams kp = {};
  kp.func = (void*)k;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  CK(cudaGraphAddKernelNode(&kn, gA, &cp, 1, &kp));
  cudaGraphExec_t eA;
  CK(cudaGraphInstantiate(&eA, gA, 0));
  // graph B: the kernel only (reads stage)
  cudaGraph_t gB;
  CK(cudaGraphCreate(&gB, 0));
  cudaGraphNode_t kb;
  CK(cudaGraphAddKernelNode(&kb, gB, nullptr, 0, &kp));
  cudaGraphExec_t eB;
  CK(cudaGraphInstantiate(&eB, gB, 0));
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  for (int rep = 0; rep < 3; ++rep) {
    // 1: SetParams1D on the memcpy node + launch
    CK(cudaStreamSynchronize(s));
    auto t0 = now();
    for (int i = 0; i < steps; ++i) {
      CK(cudaGraphExecMemcpyNodeSetParams1D(eA, cp, stage, seq + (i % seqlen) * n,
                                            sizeof(float) * n, cudaMemcpyDeviceToDevice));
      CK(cudaGraphLaunch(eA, s));
    }
    auto t1 = now();
    CK(cudaStreamSynchronize(s));
    auto t2 = now();
    printf("memcpy node repointed + launch: host %.2f us/step, total %.2f\n", us(t0, t1) / steps,
           us(t0, t2) / steps);
    // 2: cudaMemcpyAsync outside + launch of the kernel-only graph
    t0 = now();
    for (int i = 0; i < steps; ++i) {
      CK(cudaMemcpyAsync(stage, seq + (i % seqlen) * n, sizeof(float) * n, cudaMemcpyDeviceToDevice,
                         s));
      CK(cudaGraphLaunch(eB, s));
    }
    t1 = now();
    CK(cudaStreamSynchronize(s));
    t2 = now();
    printf("memcpyAsync outside + launch:   host %.2f us/step, total %.2f\n", us(t0, t1) / steps,
           us(t0, t2) / steps);
    // 3: kernel node repointed (no copy) + launch
    t0 = now();
    for (int i = 0; i < steps; ++i) {
      float* src = seq + (i % seqlen) * n;
      void* a2[] = {&src, &out, &nn};
      cudaKernelNodeParams p2 = kp;
      p2.kernelParams = a2;
      CK(cudaGraphExecKernelNodeSetParams(eB, kb, &p2));
      CK(cudaGraphLaunch(eB, s));
    }
    t1 = now();
    CK(cudaStreamSynchronize(s));
    t2 = now();
    printf("kernel node repointed + launch: host %.2f us/step, total %.2f\n", us(t0, t1) / steps,
           us(t0, t2) / steps);
    // 4: launch only
    t0 = now();
    for (int i = 0; i < steps; ++i) CK(cudaGraphLaunch(eB, s));
    t1 = now();
    CK(cudaStreamSynchronize(s));
    t2 = now();
    printf("launch only:                    host %.2f us/step, total %.2f\n", us(t0, t1) / steps,
           us(t0, t2) / steps);
    // 5-8: a cluster kernel on 256 blocks, and a kernel with 1 KB of parameters
    struct SmallArgs {
      float *a, *b;
      int n;
      void* ptrs[3];
      SmallArgs(float* a_, float* b_, int n_) : a(a_), b(b_), n(n_), ptrs{&a, &b, &n} {}
      SmallArgs(const SmallArgs& o) : SmallArgs(o.a, o.b, o.n) {}
    };
    auto make_small = [&](float* a) { return SmallArgs(a, out, n); };
    struct BigArgs {
      Big p;
      void* ptrs[1];
      BigArgs(float* a, float* b, int n) : p{}, ptrs{&p} { p.a = a, p.b = b, p.n = n; }
      BigArgs(const BigArgs& o) : BigArgs(const_cast<float*>(o.p.a), o.p.b, o.p.n) {}
    };
    auto make_big = [&](float* a) { return BigArgs(a, out, n); };
    for (bool rp : {false, true}) {
      if (time_node(rp ? "cluster-8 kernel repointed + launch:" : "cluster-8 kernel launch only:",
                    (void*)kc, 256, seq, n, seqlen, steps, rp, make_small, s))
        return 1;
      if (time_node(rp ? "1 KB-params kernel repointed + launch:"
                       : "1 KB-params kernel launch only:",
                    (void*)kbig, 1, seq, n, seqlen, steps, rp, make_big, s))
        return 1;
    }
  }
  return 0;
}

// Host cost per step of the ways to feed a CUDA graph an input at a new address every step
// (issue 5: an LSTM reading x[t] of a sequence). Standalone:
//   nvcc -O2 -std=c++17 tools/graph-costs/graph_update.cu -o /tmp/gu && /tmp/gu
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
  }
  return 0;
}

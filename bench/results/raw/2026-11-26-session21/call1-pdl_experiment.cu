// Experiment: graph of a chain of N small dependent kernels; normal edges vs programmatic
// (PDL) edges. Prints us per kernel (median of replays) and checks the result.
#include <algorithm>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

template <int Mode> // 0 plain, 1 wait then trigger, 2 trigger then wait, 3 wait only
__global__ void step(const float* in, float* out, int n) {
  if (Mode == 1) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  }
  if (Mode == 2) {
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  if (Mode == 3) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = in[i];
    out[i] = tanhf(v) * 0.5f + v * 0.25f + 1.0f;
  }
}

template <int Mode>
float run(int chain, int n, float** bufs, bool programmatic, unsigned char port, int reps) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t prev = nullptr;
  std::vector<void*> argstore(chain * 3);
  for (int k = 0; k < chain; ++k) {
    cudaKernelNodeParams p{};
    p.func = (void*)step<Mode>;
    p.gridDim = dim3((n + 255) / 256);
    p.blockDim = dim3(256);
    const float* in = bufs[k % 2];
    float* out = bufs[(k + 1) % 2];
    static thread_local std::vector<std::vector<void*>> keep;
    keep.push_back({(void*)new const float*(in), (void*)new float*(out), (void*)new int(n)});
    p.kernelParams = keep.back().data();
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
    if (prev) {
      cudaGraphEdgeData ed{};
      if (programmatic) {
        ed.from_port = port;
        ed.type = cudaGraphDependencyTypeProgrammatic;
      }
      CK(cudaGraphAddDependencies(g, &prev, &node, &ed, 1));
    }
    prev = node;
  }
  cudaGraphExec_t ex;
  CK(cudaGraphInstantiate(&ex, g, 0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < reps + 3; ++r) {
    CK(cudaMemset(bufs[0], 0, n * 4));
    CK(cudaDeviceSynchronize());
    cudaEventRecord(a, s);
    CK(cudaGraphLaunch(ex, s));
    cudaEventRecord(b, s);
    CK(cudaStreamSynchronize(s));
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (r >= 3) t.push_back(ms * 1000.f / chain);
  }
  // check: iterate on the host
  std::vector<float> h(n), ref(n, 0.f);
  for (int k = 0; k < chain; ++k)
    for (auto& v : ref) v = tanhf(v) * 0.5f + v * 0.25f + 1.0f;
  CK(cudaMemcpy(h.data(), bufs[chain % 2], n * 4, cudaMemcpyDeviceToHost));
  float err = 0;
  for (int i = 0; i < n; ++i) err = std::max(err, std::abs(h[i] - ref[i]));
  std::sort(t.begin(), t.end());
  printf("  median %.3f us/kernel (min %.3f max %.3f), max err %.2e\n", t[t.size() / 2], t[0],
         t.back(), err);
  cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  return t[t.size() / 2];
}

int main() {
  const int chain = 500;
  for (int n : {32 * 256, 32 * 1024, 1 << 20}) {
    float* bufs[2];
    CK(cudaMalloc(&bufs[0], n * 4));
    CK(cudaMalloc(&bufs[1], n * 4));
    printf("n = %d (%d blocks)\n", n, (n + 255) / 256);
    printf(" plain kernel, normal edges:");
    run<0>(chain, n, bufs, false, 0, 20);
    printf(" wait+trigger kernel, normal edges:");
    run<1>(chain, n, bufs, false, 0, 20);
    printf(" wait+trigger, programmatic port:");
    run<1>(chain, n, bufs, true, cudaGraphKernelNodePortProgrammatic, 20);
    printf(" trigger+wait, programmatic port:");
    run<2>(chain, n, bufs, true, cudaGraphKernelNodePortProgrammatic, 20);
    printf(" wait only, programmatic port:");
    run<3>(chain, n, bufs, true, cudaGraphKernelNodePortProgrammatic, 20);
    printf(" wait only, launch-completion port:");
    run<3>(chain, n, bufs, true, cudaGraphKernelNodePortLaunchCompletion, 20);
    cudaFree(bufs[0]);
    cudaFree(bufs[1]);
  }
}

// Host cost per step of repointing one kernel node of a replayed CUDA graph, the ways kiln
// could do it, for kernels shaped like kiln's (loaded from an NVRTC image as a cudaKernel_t,
// Params passed as one struct by value), with and without thread-block clusters and for small
// and LSTM-sized Params (issue 5: an LSTM step reading x[t] repoints its cell kernel each step).
// Standalone:
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/graph-costs/set_params.cu -o /tmp/sp -lnvrtc -lcuda
//   /tmp/sp
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <nvrtc.h>
#include <string>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    auto e = (x);                                                                                  \
    if (e != 0) {                                                                                  \
      printf("%s failed (%d) at line %d\n", #x, int(e), __LINE__);                                 \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

// A kernel of `bytes` bytes of Params (a struct: input, output, n, padding), optionally with
// clusters of 8 compiled in, as kiln's generated kernels declare them.
struct Kernel {
  cudaKernel_t rt = nullptr;
  CUfunction fn = nullptr;
  size_t bytes = 0;
  bool cluster = false;
};

Kernel compile(size_t bytes, bool cluster) {
  const size_t pad = (bytes - 24) / 8;
  std::string src = "struct P { const float* a; float* b; long long n; long long pad[" +
                    std::to_string(pad) + "]; };\nextern \"C\" __global__ void " +
                    std::string(cluster ? "__cluster_dims__(8, 1, 1) " : "") +
                    "k(const P p) {\n  long long i = blockIdx.x * (long long)blockDim.x + "
                    "threadIdx.x;\n  if (i < p.n) p.b[i] = p.a[i] * 2.f + 1.f;\n}\n";
  nvrtcProgram prog;
  CK(nvrtcCreateProgram(&prog, src.c_str(), "k.cu", 0, nullptr, nullptr));
  const char* opts[] = {"-arch=sm_90", "-std=c++17"};
  if (nvrtcCompileProgram(prog, 2, opts) != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    printf("%s\n", log.c_str());
    std::exit(1);
  }
  size_t n = 0;
  CK(nvrtcGetCUBINSize(prog, &n));
  std::vector<char> image(n);
  CK(nvrtcGetCUBIN(prog, image.data()));
  nvrtcDestroyProgram(&prog);
  Kernel k;
  cudaLibrary_t lib;
  CK(cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CK(cudaLibraryGetKernel(&k.rt, lib, "k"));
  CK(cuKernelGetFunction(&k.fn, reinterpret_cast<CUkernel>(k.rt)));
  k.bytes = bytes;
  k.cluster = cluster;
  return k;
}

double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

enum class Way { launch_only, runtime_set, driver_set_fn, driver_set_kernel, direct_rt, direct_drv };
const char* name(Way w) {
  switch (w) {
  case Way::launch_only: return "graph launch only (fixed input)";
  case Way::runtime_set: return "cudaGraphExecKernelNodeSetParams + launch";
  case Way::driver_set_fn: return "cuGraphExecKernelNodeSetParams (CUfunction) + launch";
  case Way::driver_set_kernel: return "cuGraphExecKernelNodeSetParams (CUkernel) + launch";
  case Way::direct_rt: return "cudaLaunchKernel, no graph";
  case Way::direct_drv: return "cuLaunchKernel, no graph";
  }
  return "";
}

// Host us per step over `steps` steps, each feeding the kernel a new slice of `seq`.
double time_way(const Kernel& k, Way w, float* seq, float* out, int n, int seqlen, int steps,
                cudaStream_t s) {
  std::vector<std::byte> params(k.bytes);
  auto fill = [&](const float* a) {
    long long nn = n;
    std::memcpy(params.data(), &a, 8);
    std::memcpy(params.data() + 8, &out, 8);
    std::memcpy(params.data() + 16, &nn, 8);
  };
  fill(seq);
  void* args[] = {params.data()};
  const int grid = 256, block = 128;
  cudaKernelNodeParams kp{};
  kp.func = reinterpret_cast<void*>(k.rt);
  kp.gridDim = dim3(grid);
  kp.blockDim = dim3(block);
  kp.kernelParams = args;
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t node;
  CK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kp));
  cudaGraphExec_t ex;
  CK(cudaGraphInstantiate(&ex, g, 0));
  CUDA_KERNEL_NODE_PARAMS dp{};
  dp.func = k.fn;
  dp.gridDimX = grid, dp.gridDimY = dp.gridDimZ = 1;
  dp.blockDimX = block, dp.blockDimY = dp.blockDimZ = 1;
  dp.kernelParams = args;
  CUDA_KERNEL_NODE_PARAMS dk = dp;
  dk.func = nullptr;
  dk.kern = reinterpret_cast<CUkernel>(k.rt);
  CK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (w != Way::launch_only) fill(seq + (i % seqlen) * n);
    switch (w) {
    case Way::launch_only: CK(cudaGraphLaunch(ex, s)); break;
    case Way::runtime_set:
      CK(cudaGraphExecKernelNodeSetParams(ex, node, &kp));
      CK(cudaGraphLaunch(ex, s));
      break;
    case Way::driver_set_fn:
      CK(cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(ex),
                                        reinterpret_cast<CUgraphNode>(node), &dp));
      CK(cudaGraphLaunch(ex, s));
      break;
    case Way::driver_set_kernel:
      CK(cuGraphExecKernelNodeSetParams(reinterpret_cast<CUgraphExec>(ex),
                                        reinterpret_cast<CUgraphNode>(node), &dk));
      CK(cudaGraphLaunch(ex, s));
      break;
    case Way::direct_rt:
      CK(cudaLaunchKernel(reinterpret_cast<const void*>(k.rt), dim3(grid), dim3(block), args, 0,
                          s));
      break;
    case Way::direct_drv:
      CK(cuLaunchKernel(k.fn, grid, 1, 1, block, 1, 1, 0, reinterpret_cast<CUstream>(s), args,
                        nullptr));
      break;
    }
  }
  const double host = us_since(t0) / steps;
  CK(cudaStreamSynchronize(s));
  // Check the last step's result: out = seq[last slice] * 2 + 1.
  std::vector<float> got(n), in(n);
  const int last = w == Way::launch_only ? 0 : (steps - 1) % seqlen;
  CK(cudaMemcpy(got.data(), out, n * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(in.data(), seq + last * n, n * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i)
    if (got[i] != in[i] * 2.f + 1.f) {
      printf("wrong result for %s at %d\n", name(w), i);
      std::exit(1);
    }
  cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  return host;
}

} // namespace

int main() {
  const int n = 256 * 128, steps = 20000, seqlen = 64;
  CK(cudaFree(nullptr));
  float *seq, *out;
  CK(cudaMalloc(&seq, sizeof(float) * n * seqlen));
  CK(cudaMalloc(&out, sizeof(float) * n));
  std::vector<float> h(size_t(n) * seqlen);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(i % 1000) * 0.25f;
  CK(cudaMemcpy(seq, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const Kernel kernels[] = {compile(32, false), compile(32, true), compile(328, false),
                            compile(328, true), compile(1024, true)};
  const Way ways[] = {Way::launch_only,   Way::runtime_set, Way::driver_set_fn,
                      Way::driver_set_kernel, Way::direct_rt,   Way::direct_drv};
  double best[5][6];
  for (auto& r : best)
    for (double& x : r) x = 1e30;
  for (int round = 0; round < 3; ++round)
    for (int ki = 0; ki < 5; ++ki)
      for (int wi = 0; wi < 6; ++wi) {
        const double t = time_way(kernels[ki], ways[wi], seq, out, n, seqlen, steps, s);
        if (t < best[ki][wi]) best[ki][wi] = t;
      }
  printf("host us per step, best of 3 rounds of %d steps (a new input slice every step)\n\n",
         steps);
  printf("| way |");
  for (const Kernel& k : kernels) printf(" %zu B%s |", k.bytes, k.cluster ? ", cluster 8" : "");
  printf("\n|---|");
  for (int ki = 0; ki < 5; ++ki) printf("---:|");
  printf("\n");
  for (int wi = 0; wi < 6; ++wi) {
    printf("| %s |", name(ways[wi]));
    for (int ki = 0; ki < 5; ++ki) printf(" %.2f |", best[ki][wi]);
    printf("\n");
  }
  return 0;
}

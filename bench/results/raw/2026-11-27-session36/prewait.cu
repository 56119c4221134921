// Experiment (session 36): an LSTM cell at batch 1 (hidden 256, input 256) as a chain of
// dependent kernels in a CUDA graph with programmatic (PDL) edges, as kiln replays a loop
// without eval. Does loading the loop-invariant operands (the weights, x_t, the bias) and doing
// the input half of the dots *before* griddepcontrol.wait, with an early trigger so the next
// kernel's blocks are resident while this one runs, shorten a step?
//   nvcc -O3 -arch=sm_90 prewait.cu -o prewait && ./prewait
// Modes: 0 wait first (kiln today); 1 invariant loads and the x half before the wait;
// 2 = 1 + early trigger; 3 early trigger, then wait first (no pre-wait work).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

constexpr int H = 256, I = 256, G = 4 * H;

struct Args {
  const float *wx, *wh, *bias, *xs; // wx [I, G], wh [H, G] row-major; bias [G]; xs [T, I]
  const float *h_in, *c_in;
  float *h_out, *c_out;
  int t;
};

__device__ float sigm(float v) { return 1.f / (1.f + expf(-v)); }

// COLS hidden units a block, KL = 256 / COLS lanes along K; each lane sums K / KL terms of each
// of the 8 dots (4 gates x {x, h}).
template <int Mode, int COLS> __global__ void __launch_bounds__(256) cell(Args a) {
  constexpr int KL = 256 / COLS, KPER = I / KL;
  const int tx = threadIdx.x % COLS, ty = threadIdx.x / COLS;
  const int j = blockIdx.x * COLS + tx; // hidden unit
  if (Mode == 2 || Mode == 3) asm volatile("griddepcontrol.launch_dependents;");
  if (Mode == 0 || Mode == 3) asm volatile("griddepcontrol.wait;" ::: "memory");
  float wh[4][KPER];
  float acc[4] = {0, 0, 0, 0};
  // The x half and the h weights (invariant within the chain).
  {
    const float* x = a.xs + (size_t)a.t * I;
    float wx[4][KPER], xv[KPER];
#pragma unroll
    for (int q = 0; q < KPER; ++q) {
      const int k = ty + q * KL;
      xv[q] = x[k];
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        wx[g][q] = a.wx[(size_t)k * G + g * H + j];
        wh[g][q] = a.wh[(size_t)k * G + g * H + j];
      }
    }
#pragma unroll
    for (int q = 0; q < KPER; ++q)
#pragma unroll
      for (int g = 0; g < 4; ++g) acc[g] = fmaf(xv[q], wx[g][q], acc[g]);
  }
  float bias[4] = {0, 0, 0, 0};
  if (ty == 0)
#pragma unroll
    for (int g = 0; g < 4; ++g) bias[g] = a.bias[g * H + j];
  if (Mode == 1 || Mode == 2) asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll
  for (int q = 0; q < KPER; ++q) {
    const float hv = a.h_in[ty + q * KL];
#pragma unroll
    for (int g = 0; g < 4; ++g) acc[g] = fmaf(hv, wh[g][q], acc[g]);
  }
  __shared__ float part[4][KL][COLS];
#pragma unroll
  for (int g = 0; g < 4; ++g) part[g][ty][tx] = acc[g];
  __syncthreads();
  if (ty == 0) {
    float s[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      s[g] = bias[g];
      for (int l = 0; l < KL; ++l) s[g] += part[g][l][tx];
    }
    const float c = sigm(s[1]) * a.c_in[j] + sigm(s[0]) * tanhf(s[2]);
    a.c_out[j] = c;
    a.h_out[j] = sigm(s[3]) * tanhf(c);
  }
}

// One graph of `chain` steps from step t0; the state ping-pongs between two buffers.
template <int Mode, int COLS>
cudaGraphExec_t build(int chain, int t0, const Args& base, float* hb[2], float* cb[2]) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t prev = nullptr;
  static std::vector<Args*> keep;
  for (int k = 0; k < chain; ++k) {
    Args* a = new Args(base);
    keep.push_back(a);
    a->t = t0 + k;
    a->h_in = hb[k % 2];
    a->c_in = cb[k % 2];
    a->h_out = hb[(k + 1) % 2];
    a->c_out = cb[(k + 1) % 2];
    void** params = new void*[1]{a};
    cudaKernelNodeParams p{};
    p.func = (void*)cell<Mode, COLS>;
    p.gridDim = dim3(H / COLS);
    p.blockDim = dim3(256);
    p.kernelParams = params;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
    if (prev) {
      cudaGraphEdgeData ed{};
      ed.from_port = cudaGraphKernelNodePortProgrammatic;
      ed.type = cudaGraphDependencyTypeProgrammatic;
      CK(cudaGraphAddDependencies(g, &prev, &node, &ed, 1));
    }
    prev = node;
  }
  cudaGraphExec_t ex;
  CK(cudaGraphInstantiate(&ex, g, 0));
  cudaGraphDestroy(g);
  return ex;
}

std::vector<float> host_ref(const std::vector<float>& wx, const std::vector<float>& wh,
                            const std::vector<float>& bias, const std::vector<float>& xs,
                            int steps) {
  std::vector<double> h(H, 0), c(H, 0);
  for (int t = 0; t < steps; ++t) {
    std::vector<double> hn(H), cn(H);
    for (int j = 0; j < H; ++j) {
      double s[4];
      for (int g = 0; g < 4; ++g) {
        s[g] = bias[g * H + j];
        for (int k = 0; k < I; ++k) s[g] += (double)xs[(size_t)t * I + k] * wx[(size_t)k * G + g * H + j];
        for (int k = 0; k < H; ++k) s[g] += h[k] * wh[(size_t)k * G + g * H + j];
      }
      auto sg = [](double v) { return 1 / (1 + std::exp(-v)); };
      cn[j] = sg(s[1]) * c[j] + sg(s[0]) * std::tanh(s[2]);
      hn[j] = sg(s[3]) * std::tanh(cn[j]);
    }
    h = hn, c = cn;
  }
  return std::vector<float>(h.begin(), h.end());
}

// `graphs` replays of graphs of `chain` steps back to back (graph g runs steps g*chain...):
// us per step, median of 15 repetitions; checks h against the host.
template <int Mode, int COLS> void run(const char* name, int chain, int graphs, Args base,
                                      float* hb[2], float* cb[2], const std::vector<float>& ref) {
  std::vector<cudaGraphExec_t> ex;
  for (int gi = 0; gi < graphs; ++gi) ex.push_back(build<Mode, COLS>(chain, gi * chain, base, hb, cb));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  std::vector<float> h(H);
  float err = 0;
  for (int r = 0; r < 18; ++r) {
    CK(cudaMemset(hb[0], 0, H * 4));
    CK(cudaMemset(cb[0], 0, H * 4));
    CK(cudaMemset(hb[1], 0xff, H * 4)); // poison
    CK(cudaMemset(cb[1], 0xff, H * 4));
    CK(cudaDeviceSynchronize());
    cudaEventRecord(e0, s);
    for (auto& x : ex) CK(cudaGraphLaunch(x, s));
    cudaEventRecord(e1, s);
    CK(cudaStreamSynchronize(s));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r >= 3) t.push_back(ms * 1000.f / (chain * graphs));
    CK(cudaMemcpy(h.data(), hb[(chain * graphs) % 2], H * 4, cudaMemcpyDeviceToHost));
    for (int j = 0; j < H; ++j) err = std::max(err, std::abs(h[j] - ref[j]));
  }
  std::sort(t.begin(), t.end());
  printf("%-40s chain %3d x %2d graphs: %.3f us/step (%.3f-%.3f), max err vs host %.1e\n", name,
         chain, graphs, t[t.size() / 2], t[0], t.back(), err);
  for (auto& x : ex) cudaGraphExecDestroy(x);
}

int main() {
  const int steps = 512;
  std::vector<float> wx((size_t)I * G), wh((size_t)H * G), bias(G), xs((size_t)steps * I);
  unsigned x = 1;
  auto rnd = [&] { x = x * 1664525u + 1013904223u; return ((x >> 8) / 16777216.f - 0.5f); };
  for (auto& v : wx) v = rnd() * 0.125f;
  for (auto& v : wh) v = rnd() * 0.125f;
  for (auto& v : bias) v = rnd() * 0.2f;
  for (auto& v : xs) v = rnd() * 2;
  auto up = [](const std::vector<float>& v) {
    float* d;
    CK(cudaMalloc(&d, v.size() * 4));
    CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
  };
  Args base{up(wx), up(wh), up(bias), up(xs), nullptr, nullptr, nullptr, nullptr, 0};
  float *hb[2], *cb[2];
  for (int i = 0; i < 2; ++i) {
    CK(cudaMalloc(&hb[i], H * 4));
    CK(cudaMalloc(&cb[i], H * 4));
  }
  for (int cfg = 0; cfg < 2; ++cfg) {
    const int chain = cfg == 0 ? 64 : 8, graphs = cfg == 0 ? 8 : 64;
    const std::vector<float> ref = host_ref(wx, wh, bias, xs, chain * graphs);
    run<0, 8>("32 blocks: wait first", chain, graphs, base, hb, cb, ref);
    run<1, 8>("32 blocks: invariant work before wait", chain, graphs, base, hb, cb, ref);
    run<2, 8>("32 blocks: + early trigger", chain, graphs, base, hb, cb, ref);
    run<3, 8>("32 blocks: early trigger, wait first", chain, graphs, base, hb, cb, ref);
    run<0, 2>("128 blocks: wait first", chain, graphs, base, hb, cb, ref);
    run<1, 2>("128 blocks: invariant work before wait", chain, graphs, base, hb, cb, ref);
    run<2, 2>("128 blocks: + early trigger", chain, graphs, base, hb, cb, ref);
    run<3, 2>("128 blocks: early trigger, wait first", chain, graphs, base, hb, cb, ref);
  }
}

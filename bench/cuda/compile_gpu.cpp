// JIT costs (issue 3): the first NVRTC compile in a process, later compiles, a disk-cache hit
// (read + module load) and a memory hit (key + lookup + launch), with a fresh cache directory;
// and the first evaluation of a plan with 8 new kernels. (Compiling them on parallel threads
// was tried and measured slower on the H100 host: NVRTC serializes concurrent compiles, each
// then took 80-95 ms instead of 13-20.)
#include "bench_util.h"

#include "engine/kernel_observer.h"
#include "runtime/cuda/kernel_cache.h"

#include <kiln/kiln.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/mman.h>

using namespace kiln;

namespace {

// One tiny evaluation of a chain that is structurally new for each `variant`.
double eval_ms(int variant, int reps = 1) {
  Tensor x = ones({8}, DType::f32, Device::cuda(0));
  eval(x);
  kiln::sync();
  double t0 = bench::now_ns();
  for (int r = 0; r < reps; ++r) {
    Tensor y = x;
    for (int i = 0; i <= variant % 7; ++i) y = tanh(y * 1.5f + 0.5f);
    if (variant >= 7) y = exp(y) - sigmoid(y);
    eval(y);
  }
  kiln::sync();
  return (bench::now_ns() - t0) / 1e6 / reps;
}

// A fixed single-threaded integer workload: NVRTC is host-bound, so a slow compile row next to
// a slow probe is the host (on the device VM both run 4-7x slower for ~20 s after heavy CPU
// work), not kiln.
double host_probe_ms() {
  double t0 = bench::now_ns();
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000000; ++i) h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull + i;
  double ms = (bench::now_ns() - t0) / 1e6;
  if (h == 42) std::printf("(unlikely)\n"); // keeps the loop
  return ms;
}

// Fresh memory: map 256 MiB, touch every page, unmap. Compiles allocate and touch much
// memory; this shows whether page faults are what is slow.
double fresh_memory_probe_ms() {
  const size_t bytes = size_t(256) << 20;
  double t0 = bench::now_ns();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  for (size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
  munmap(p, bytes);
  return (bench::now_ns() - t0) / 1e6;
}

} // namespace

int main(int argc, char** argv) {
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  bool child = argc > 1 && std::string(argv[1]) == "--child";
  if (!child) bench::print_header("JIT compile and kernel-cache costs", argc, argv);
  using detail::cuda_kernel_cache_stats;
  if (child) { // a second process over the same cache dir: every kernel is a disk hit
    eval_ms(0);
    auto before = cuda_kernel_cache_stats();
    double t = eval_ms(1);
    auto after = cuda_kernel_cache_stats();
    std::printf("| disk hit (2nd process): read + load + first launch | %.3f ms | disk hits %lld, "
                "compiles %lld, load %.3f ms |\n",
                t, (long long)(after.disk_hits - before.disk_hits),
                (long long)(after.compiles - before.compiles), after.load_ms - before.load_ms);
    return 0;
  }
  std::printf("\n| what | time | detail |\n|---|---:|---|\n");
  std::printf("| host speed probe before (fixed integer loop, one thread) | %.1f ms | |\n",
              host_probe_ms());
  std::printf("| fresh memory probe before (map, touch, unmap 256 MiB) | %.1f ms | |\n",
              fresh_memory_probe_ms());
  double first = eval_ms(0);
  auto s0 = cuda_kernel_cache_stats();
  std::printf(
      "| first NVRTC compile in the process (+ load, launch) | %.1f ms | compile %.1f ms |\n",
      first, s0.compile_ms);
  std::vector<double> later;
  for (int v = 1; v < 9; ++v) later.push_back(eval_ms(v));
  auto s1 = cuda_kernel_cache_stats();
  std::printf("| later compiles (median of 8 new kernels) | %.1f ms | compile %.1f ms each |\n",
              bench::median(later), (s1.compile_ms - s0.compile_ms) / (s1.compiles - s0.compiles));
  { // a plan of 8 new kernels: their first evaluation compiles each of them
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < 8; ++i) xs.push_back(ones({16 + i}, DType::f32, Device::cuda(0)));
    eval(xs);
    kiln::sync();
    for (int i = 0; i < 8; ++i) {
      Tensor y = xs[i];
      for (int j = 0; j <= i; ++j) y = sin(y) * 0.75f; // a structure of its own per output
      ys.push_back(y - 0.5f);
    }
    auto c0 = cuda_kernel_cache_stats();
    double t0 = bench::now_ns();
    eval(ys);
    kiln::sync();
    double ms = (bench::now_ns() - t0) / 1e6;
    auto c1 = cuda_kernel_cache_stats();
    std::printf(
        "| first evaluation of a plan with 8 new kernels | %.1f ms | compiles %lld, %.1f ms "
        "of NVRTC in all |\n",
        ms, (long long)(c1.compiles - c0.compiles), c1.compile_ms - c0.compile_ms);
  }
  { // a minimal kernel (one add), for comparison with the design card's "small kernel" figure
    auto c0 = cuda_kernel_cache_stats();
    Tensor x = ones({8}, DType::i32, Device::cuda(0));
    eval(x + 1);
    kiln::sync();
    auto c1 = cuda_kernel_cache_stats();
    std::printf("| smallest kernel (one i32 add), warm NVRTC | %.1f ms | compiles %lld |\n",
                c1.compile_ms - c0.compile_ms, (long long)(c1.compiles - c0.compiles));
  }
  { // the memory hit itself: signature + lookup of a kernel the chain above loaded
    detail::FusedKernel captured;
    auto prev = detail::set_kernel_observer([&](const detail::FusedKernel& k) { captured = k; });
    eval_ms(3);
    detail::set_kernel_observer(prev);
    const detail::CudaKernelCache* cache = detail::cuda_kernel_cache(0);
    std::vector<void*> bases(16, nullptr);
    detail::CudaVariant v = detail::choose_variant(captured, bases, cache->target());
    const int reps = 200000;
    int found = 0;
    double t0 = bench::now_ns();
    for (int i = 0; i < reps; ++i) found += cache->find(captured, v) != nullptr;
    double ns = (bench::now_ns() - t0) / reps;
    std::printf("| memory hit: signature + lookup of a loaded %zu-instruction kernel | %.0f ns | "
                "found %d of %d |\n",
                captured.tape.size(), ns, found, reps);
  }
  double hit = eval_ms(3, 2000);
  std::printf("| memory hit: whole eval of a cached 4-op kernel (plan + key + launch) | %.1f us "
              "| |\n",
              hit * 1e3);
  std::printf("| host speed probe after | %.1f ms | |\n", host_probe_ms());
  std::printf("| fresh memory probe after | %.1f ms | |\n", fresh_memory_probe_ms());
  std::fflush(stdout);
  std::string cmd = std::string(argv[0]) + " --child";
  return std::system(cmd.c_str());
}

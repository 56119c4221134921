// A program that ends while NVRTC compiles its kernels in the background (a few steps of a new
// kernel, run by the stand-in interpreter) must exit cleanly: kiln stops and joins the compile
// thread before the state it uses is destroyed (runtime/cuda/background_builds.h). Run by ctest
// as its own process, with a cache directory of its own so that the kernels are new; exit code
// 77 (counted as skipped) without a GPU.
#include "runtime/cuda/kernel_cache.h"

#include <kiln/kiln.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

int main() {
  const kiln::Device gpu = kiln::Device::cuda(0);
  if (!kiln::is_available(gpu)) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  char dir[] = "/tmp/kiln-exit-check-XXXXXX"; // an empty cache: every kernel is new
  if (!::mkdtemp(dir) || ::setenv("KILN_CACHE_DIR", dir, 1) != 0 ||
      ::setenv("KILN_COMPILE", "background", 1) != 0)
    return 1;
  kiln::set_default_device(gpu);
  const auto t0 = std::chrono::steady_clock::now();
  kiln::Tensor w = kiln::randn({64, 64}) * 0.2f, h = kiln::zeros({64});
  const float c = 0.5f + float(std::random_device{}() % 1000) / 4000.0f; // a value, not a key
  for (int t = 0; t < 5; ++t) h = kiln::tanh(kiln::matmul(w, h) + c);
  const float v = h.to_vector<float>()[0];
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (std::string why = kiln::detail::cuda_standin_unavailable_reason(0); !why.empty()) {
    std::printf("no stand-in here (%s): skipped\n", why.c_str());
    return 77;
  }
  const kiln::detail::KernelCacheStats k = kiln::detail::cuda_kernel_cache_stats();
  const int64_t compiling = kiln::detail::cuda_background_builds_outstanding();
  std::printf("5 steps in %.2f ms, h[0] = %g, background compiles %lld (%lld not taken up yet), "
              "stand-in launches %lld (cache %s)\n",
              ms, double(v), static_cast<long long>(k.background_builds),
              static_cast<long long>(compiling), static_cast<long long>(k.standin_launches), dir);
  if (k.background_builds == 0) {
    std::printf("no kernel the stand-in covers ran (KILN_REPRODUCIBLE?): skipped\n");
    return 77;
  }
  // Exits with compiles not taken up (NVRTC takes over 13 ms a kernel, the 5 steps about 1 ms
  // after the device's start), most of them still running.
  return compiling > 0 && k.standin_launches > 0 ? 0 : 1;
}

// A program that ends while NVRTC compiles its kernels in the background (a few steps of a new
// kernel, run by the stand-in interpreter) must exit cleanly: kiln stops and joins the compile
// thread before the state it uses is destroyed (runtime/cuda/background_builds.h). Run by ctest
// as its own process, with a cache directory of its own so that the kernels are new; exit code
// 77 (counted as skipped) without a GPU.
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
  if (!::mkdtemp(dir) || ::setenv("KILN_CACHE_DIR", dir, 1) != 0) return 1;
  kiln::set_default_device(gpu);
  const auto t0 = std::chrono::steady_clock::now();
  kiln::Tensor w = kiln::randn({64, 64}) * 0.2f, h = kiln::zeros({64});
  const float c = 0.5f + float(std::random_device{}() % 1000) / 4000.0f; // a value, not a key
  for (int t = 0; t < 5; ++t) h = kiln::tanh(kiln::matmul(w, h) + c);
  const float v = h.to_vector<float>()[0];
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const kiln::Stats s = kiln::stats();
  std::printf("5 steps in %.2f ms, h[0] = %g, kernels run %lld (cache %s)\n", ms, double(v),
              static_cast<long long>(s.kernels_run), dir);
  return 0; // returns while the kernels compile
}

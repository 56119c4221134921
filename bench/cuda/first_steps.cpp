// Cold start (issue 19): how long a new user's first steps take. Meant for a fresh process with
// an empty kernel cache (KILN_CACHE_DIR pointing at a new directory; bench/cuda/cold_start.sh
// runs it so). The device is initialised first (one tiny kernel and a sync, timed apart), then
// the seeds' loop (d = 64, an eval per step, as rnn_gpu's seed loop) runs, each step's result
// read as soon as it is queued would be (a sync after every step), until 1 s of wall time has
// passed. Printed: the device's initialisation, the first step, the first 5 steps, when the
// loop reached full speed (the first 10-step window within 1.5x of the last 100 steps' median),
// and how many launches ran on the stand-in interpreter while NVRTC compiled (KILN_COMPILE).
// bench/torch/first_steps_torch.py runs the same loop in PyTorch eager in a fresh process.
//
//   first_steps [d, default 64]
#include "bench_util.h"
#include "rnn_cells.h"
#include "runtime/cuda/kernel_cache.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace kiln;

int main(int argc, char** argv) {
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  const int64_t d = argc > 1 ? std::atoll(argv[1]) : 64;
  const double start = bench::now_ns();
  Tensor z = ones({1}, DType::f32, Device::cuda(0));
  eval(z);
  kiln::sync();
  const double init_ms = (bench::now_ns() - start) / 1e6;
  bench::Seed s = bench::Seed::random(d, 1).on(Device::cuda(0));
  kiln::sync();
  const double t0 = bench::now_ns();
  std::vector<double> step_us;
  for (double t = t0; t - t0 < 1e9;) {
    s.step();
    kiln::sync();
    const double now = bench::now_ns();
    step_us.push_back((now - t) / 1e3);
    t = now;
  }
  const size_t n = step_us.size();
  const double steady =
      bench::median(std::vector<double>(step_us.end() - std::min<size_t>(100, n), step_us.end()));
  size_t full = n;
  double elapsed_ms = 0, full_ms = 0;
  for (size_t i = 0; i + 10 <= n; ++i) {
    const double window = bench::median(
        std::vector<double>(step_us.begin() + long(i), step_us.begin() + long(i + 10)));
    if (window <= 1.5 * steady) {
      full = i;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (i == full) full_ms = elapsed_ms;
    elapsed_ms += step_us[i] / 1e3;
  }
  double first5_ms = 0;
  for (size_t i = 0; i < std::min<size_t>(5, n); ++i) first5_ms += step_us[i] / 1e3;
  const detail::KernelCacheStats kc = detail::cuda_kernel_cache_stats();
  bench::print_header("first steps in a fresh process (kiln)", argc, argv);
  std::printf("| d | device init ms | first step ms | first 5 steps ms | full speed after ms "
              "(steps) | steady us/step | kernels compiled (ms of NVRTC), from disk | "
              "stand-in launches |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %lld | %.1f | %.2f | %.2f | %.1f (%zu) | %.1f | %lld (%.0f), %lld | %lld |\n",
              static_cast<long long>(d), init_ms, step_us[0] / 1e3, first5_ms, full_ms, full,
              steady, static_cast<long long>(kc.compiles), kc.compile_ms,
              static_cast<long long>(kc.disk_hits), static_cast<long long>(kc.standin_launches));
  return 0;
}

// A program that ends with CUDA graph replays still queued on the launch thread (a loop that
// never syncs) must exit cleanly: kiln issues them before the CUDA runtime is torn down
// (runtime/cuda/launch_thread.cpp). Run by ctest as its own process; exit code 77 (counted as
// skipped) without a GPU.
#include <kiln/kiln.h>

#include <cstdio>

int main() {
  const kiln::Device gpu = kiln::Device::cuda(0);
  if (!kiln::is_available(gpu)) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  kiln::set_default_device(gpu);
  kiln::Tensor x = kiln::randn({1024}), g = kiln::randn({1024});
  kiln::eval(x, g);
  for (int i = 0; i < 2000; ++i) {
    x = kiln::tanh(x * 0.5f + g);
    kiln::eval(x); // replayed from the third step on, queued to the launch thread
  }
  const kiln::Stats s = kiln::stats();
  std::printf("replays %lld, queued to the launch thread %lld\n",
              static_cast<long long>(s.graph_replays), static_cast<long long>(s.launches_queued));
  return s.graph_replays > 0 ? 0 : 1; // returns without kiln::sync()
}

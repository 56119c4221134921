// A loop with two evaluations a step (the state, then a value read from it): its plans alternate.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <kiln/kiln.h>
using namespace kiln;
int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20000;
  set_default_device(Device::cpu());
  manual_seed(9);
  Tensor h = randn({1, 4});
  Tensor w = randn({4, 4});
  Tensor b = randn({4});
  eval(h, w, b);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    Tensor g = matmul(h, w) + b;
    h = tanh(g) * 0.5f + sigmoid(g) * h;
    eval(h);
    Tensor s = sum(h * h) + 1.0f;
    eval(s);
  }
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  Stats st = stats();
  std::printf("%.3f us/step hits %lld misses %lld\n", us / steps, (long long)st.plan_hits,
              (long long)st.plan_misses);
}

// The loop of kiln_fuzz --mode loops --seed 103599 (no eval in the loop, no early flushes),
// evaluated once at the end: planning time and stats by the number of steps.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <kiln/kiln.h>
using namespace kiln;
int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 171;
  set_idle_flush(0);
  manual_seed(1);
  const int64_t cols = 8;
  Tensor w = randn({cols, cols}) * 0.125f, w2 = randn({cols, 2 * cols}) * 0.125f, b2 = randn({2 * cols}) * 0.1f;
  Tensor wt = transpose(w, 0, 1), wide = randn({1, cols}, DType::f64);
  Tensor s0 = randn({1, cols}), s1 = randn({1, cols}), acc = zeros({1, cols}, DType::f64);
  std::vector<Tensor> held(3, zeros({1, cols}));
  eval(w, w2, b2, wt, wide, s0, s1, acc, held[0]);
  reset_stats();
  for (int t = 0; t < steps; ++t) {
    const bool odd = t % 30 == 29;
    acc = acc * 0.5 + (odd ? wide : cast(s1, DType::f64)) * s1;
    { Tensor gates = matmul(s0, w2) + b2; auto g = chunk(gates, 2, 1); s0 = sigmoid(g[0]) * tanh(odd ? slice(gates, 1, 1, cols + 1) : g[1]); }
    s1 = tanh(matmul(s0, odd ? wt : w));
    s1 = softmax(s1, odd ? 0 : 1) - 0.25f;
    held[t % 3] = s0 * 0.25f + (odd ? 2 : 1.0f);
    s1 = softmax(s1, odd ? 0 : 1) - 0.25f;
  }
  auto t0 = std::chrono::steady_clock::now();
  eval(s0, s1, acc, held[0], held[1], held[2]);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Stats s = stats();
  std::printf("steps %d: eval %.1f ms, flushes %lld, plan misses %lld, retries %lld, kernels %lld, auto flushes %lld\n", steps, ms,
              (long long)s.flushes, (long long)s.plan_misses, (long long)s.plan_retries, (long long)s.kernels_run, (long long)s.auto_flushes);
}

// Probe (CPU backend): a small loop's step time before and after one loop recorded without
// eval and flushed at the 10,000-node limit. Before the fix in engine/cse.cpp, the CSE table
// kept the bucket count that flush grew it to, and every later evaluation reset all of them:
// the seed step at d = 4 went from 2.9 to 9.5 us and stayed there
// (bench/results/2026-11-22-host-after-large-flushes.md).
//   g++ -std=c++20 -O2 -Iinclude -Ibench tools/host-probe/cpu_after.cpp -Lbuild -lkiln \
//     -Wl,-rpath,$PWD/build -o /tmp/cpu_after && /tmp/cpu_after
#include "bench_util.h"
#include "rnn_cells.h"

#include <cstdio>

using namespace kiln;

namespace {

template <class Cell> void steps(Cell& c, int n, bool eval_each) {
  for (int i = 0; i < n; ++i) {
    c.record();
    if (eval_each) eval(c.state());
  }
}

template <class Cell> double us_per_step(Cell cell, bool eval_each = true, int n = 20000) {
  steps(cell, 2000, eval_each);
  kiln::sync();
  const double t0 = bench::now_ns();
  steps(cell, n, eval_each);
  kiln::sync();
  return (bench::now_ns() - t0) / 1e3 / n;
}

} // namespace

int main() {
  const bench::Seed seed = bench::Seed::random(4, 1);
  std::printf("seed d=4, eval every step: %.2f us/step\n", us_per_step(seed));
  std::printf("seed d=4, again:           %.2f us/step\n", us_per_step(seed));
  set_idle_flush(0); // no early flushes: the loop below flushes at the 10,000-node limit
  std::printf("LSTM hidden 8, no eval:    %.2f us/step\n",
              us_per_step(bench::Lstm::random(1, 8, 8, 100, 3), false));
  set_idle_flush(64);
  std::printf("seed d=4, after it:        %.2f us/step\n", us_per_step(seed));
  std::printf("seed d=4, again:           %.2f us/step\n", us_per_step(seed));
  return 0;
}

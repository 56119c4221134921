// Probe (GPU): the seed loop (d = 64, eval every step) timed fresh, and again after what
// bench/cuda/batching_gpu runs before it (a correctness copy kept alive, the LSTM loops without
// eval at every idle-check interval, CPU-backend work, idle time), to find why batching_gpu's
// "eval every step" seed loop read 11-13 us per step where rnn_gpu's read 3. It found the CSE
// table kept at the size a 10,000-node flush grew it to (engine/cse.cpp; 3.0 -> 15 us per
// step after such flushes, 3.0-3.3 with the fix). Prints us per step (wall, and host before
// the final sync) and the counters per step that would show other causes (graph updates,
// instantiations, plan misses). Results: bench/results/2026-11-22-host-after-large-flushes.md.
//   g++ -std=c++20 -O2 -Iinclude -Ibench tools/host-probe/seed_after.cpp -Lbuild-gpu -lkiln \
//     -Wl,-rpath,$PWD/build-gpu -o /tmp/seed_after && /tmp/seed_after
#include "bench_util.h"
#include "rnn_cells.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

using namespace kiln;

namespace {

template <class Cell> void steps(Cell& c, int n, bool eval_each) {
  for (int i = 0; i < n; ++i) {
    c.record();
    if (eval_each) eval(c.state());
  }
}

template <class Cell> void timed(const char* name, Cell cell, bool eval_each = true) {
  const int n = 4000;
  steps(cell, n, eval_each); // warm-up
  kiln::sync();
  reset_stats();
  std::vector<double> wall, host;
  for (int r = 0; r < 3; ++r) {
    const double t0 = bench::now_ns();
    steps(cell, n, eval_each);
    const double t1 = bench::now_ns();
    kiln::sync();
    const double t2 = bench::now_ns();
    host.push_back((t1 - t0) / 1e3 / n);
    wall.push_back((t2 - t0) / 1e3 / n);
  }
  const Stats s = stats();
  const double k = 3.0 * n;
  std::printf("| %s | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", name,
              bench::median(wall), bench::median(host), s.plan_misses / k, s.graph_replays / k,
              s.graph_updates / k, s.graph_instantiations / k, s.graph_misses / k,
              s.launches_queued / k, s.buffers_reused / k);
  std::fflush(stdout);
}

} // namespace

int main() {
  const Device gpu = Device::cuda(0);
  std::printf("| case | us/step | host us/step | plan misses | replays | updates | "
              "instantiations | direct | queued | in place |\n|---|---:|---:|---:|---:|---:|---:|"
              "---:|---:|---:|\n");
  const bench::Seed seed = bench::Seed::random(64, 1).on(gpu);
  timed("seed 64, fresh", seed);
  timed("seed 64, fresh again", seed);
  {
    bench::Seed check = seed; // batching_gpu keeps its correctness run's state alive
    steps(check, 300, true);
    timed("seed 64, a checked copy alive", seed);
  }
  set_idle_flush(0);
  timed("seed 64, idle flush off", seed);
  set_idle_flush(64);
  const bench::Lstm l1 = bench::Lstm::random(1, 256, 256, 4000, 3).on(gpu);
  const bench::Lstm l32 = bench::Lstm::random(32, 256, 256, 4000, 3).on(gpu);
  timed("LSTM b1, no eval", l1, false);
  timed("LSTM b32, no eval", l32, false);
  kiln::sync();
  timed("seed 64, after the LSTM loops without eval", seed);
  // batching_gpu's order: every idle-check interval for both LSTM batches, then the seed.
  for (int64_t every : {0, 16, 32, 64, 128, 256}) {
    set_idle_flush(every);
    timed("LSTM b1, no eval, another idle interval", l1, false);
    timed("LSTM b32, no eval, another idle interval", l32, false);
    set_idle_flush(64);
    kiln::sync();
    char name[96];
    std::snprintf(name, sizeof name, "seed 64, after idle interval %lld (bytes in use %lld)",
                  (long long)every, (long long)stats().bytes_in_use);
    timed(name, seed);
  }
  // batching_gpu runs its CPU-backend reference (BLAS matmuls) right before the timed GPU loop.
  {
    bench::Seed ref = bench::Seed::random(64, 1);
    steps(ref, 300, true);
    kiln::sync();
  }
  timed("seed 64, right after 300 CPU-backend steps (BLAS)", seed);
  {
    bench::Seed ref = bench::Seed::random(64, 1);
    steps(ref, 300, true);
    kiln::sync();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  timed("seed 64, 0.5 s after 300 CPU-backend steps", seed);
  timed("seed 64, once more", seed);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  timed("seed 64, after 0.5 s idle (no CPU-backend work)", seed);
  timed("seed 64, once more", seed);
  set_plan_cache_limit(0);
  set_plan_cache_limit(256); // the default
  timed("seed 64, after clearing the plan cache", seed);
  return 0;
}

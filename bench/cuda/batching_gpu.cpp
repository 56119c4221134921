// Adaptive batching (issue 5): loops that record many steps and read only at the end, where
// nothing but the pending-graph limits and the adaptive policy decides when the GPU starts.
// Each case runs its steps without `eval`, then one `kiln::sync()`; the modes differ only in
// `set_idle_flush`: off (the GPU starts when 10,000 nodes are pending, planned afresh at
// every such flush since each cuts the loop at another phase), and checks every 16 to 256
// nodes. For reference, the same steps with `eval` after each (rnn_gpu's loop).
// Cases: the LSTM cell at batch 1 (host-bound: the GPU is idle at most checks) and at batch 32
// (the cuBLAS GEMMs make it GPU-bound: checks find the GPU busy and work piles up), and the seed
// loop at d=64.
//
// Timing: after warm-up (compiles, plans, graphs), `steps` steps and the final sync are timed
// with the wall clock; median of `reps` loops. Counters per step come from kiln::stats() over
// the timed loops. Correctness: every mode's state after 300 steps against the CPU backend's
// (exit 1 beyond 1e-4).
//
// Usage: batching_gpu [steps, default 4000] [reps, default 3]
#include "bench_util.h"
#include "rnn_cells.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr int kCheckSteps = 300;
constexpr double kTolerance = 1e-4;

struct Mode {
  const char* name;
  int64_t idle_flush; // set_idle_flush
  bool eval_each_step = false;
};
const Mode kModes[] = {
    {"eval every step (reference)", 64, true},
    {"no eval, adaptive off (flush at 10,000 nodes)", 0},
    {"no eval, idle check every 16 nodes", 16},
    {"no eval, idle check every 32 nodes", 32},
    {"no eval, idle check every 64 nodes (default)", 64},
    {"no eval, idle check every 128 nodes", 128},
    {"no eval, idle check every 256 nodes", 256},
};

template <class Cell> void run_steps(Cell& cell, int steps, bool eval_each_step) {
  for (int i = 0; i < steps; ++i) {
    cell.record();
    if (eval_each_step) kiln::eval(cell.state());
  }
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    double d = std::fabs(double(va[i]) - double(vb[i]));
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

template <class Cell>
void run_case(const char* name, const Cell& cpu_base, int steps, int reps, bool& ok) {
  const Cell gpu_base = cpu_base.on(Device::cuda(0));
  // The reference: the CPU backend (synchronous: never flushed early), evaluated every step.
  Cell ref = cpu_base;
  set_idle_flush(0);
  run_steps(ref, kCheckSteps, true);
  const std::vector<Tensor> want = ref.state();

  for (const Mode& m : kModes) {
    kiln::sync();
    set_idle_flush(m.idle_flush);
    // Correctness first, from the same data.
    Cell check = gpu_base;
    run_steps(check, kCheckSteps, m.eval_each_step);
    double diff = 0;
    const std::vector<Tensor> got = check.state();
    for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, max_abs_diff(got[i], want[i]));
    ok = ok && diff <= kTolerance;

    Cell cell = gpu_base;
    run_steps(cell, steps, m.eval_each_step); // warm-up: every phase's plan and graph
    kiln::sync();
    reset_stats();
    std::vector<double> total, host;
    for (int r = 0; r < reps; ++r) {
      const double t0 = bench::now_ns();
      run_steps(cell, steps, m.eval_each_step);
      const double t1 = bench::now_ns();
      kiln::sync();
      const double t2 = bench::now_ns();
      host.push_back((t1 - t0) / 1e3 / steps);
      total.push_back((t2 - t0) / 1e3 / steps);
    }
    const Stats s = stats();
    const double n = double(steps) * reps;
    std::printf("| %s | %s | %.2f | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2g "
                "| %s |\n",
                name, m.name, bench::median(total), bench::median(host), s.flushes / n,
                s.idle_flushes / n, s.auto_flushes / n, s.busy_checks / n, s.plan_misses / n,
                s.graph_replays / n, s.kernels_run / n, diff, diff <= kTolerance ? "yes" : "NO");
    std::fflush(stdout);
  }
  set_idle_flush(64);
}

} // namespace

int main(int argc, char** argv) try {
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  bench::time_compiled_kernels(); // the check's few steps run the kernels that are timed
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 4000;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  bench::print_header("batching_gpu: loops that read only at the end (adaptive batching)", argc,
                      argv);
  std::printf("- %d steps per timed loop, median of %d loops after one warm-up loop; wall clock "
              "including the final kiln::sync(); `host us/step`: the same loop before its sync\n",
              steps, reps);
  std::printf("- LSTM cell: in = hidden = 256, x a row slice at a new offset every step "
              "(bench/rnn_cells.h); seed loop: d x d matmul and six pointwise ops\n");
  std::printf("- counters per step from kiln::stats(); `max abs diff`: state after %d steps "
              "against the CPU backend\n\n",
              kCheckSteps);
  std::printf("| case | mode | us/step | host us/step | flushes | idle flushes | limit flushes "
              "| busy checks | plan misses | graph replays | kernels | max abs diff | ok |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool ok = true;
  run_case("LSTM batch 1", bench::Lstm::random(1, 256, 256, steps, 3), steps, reps, ok);
  run_case("LSTM batch 32", bench::Lstm::random(32, 256, 256, steps, 4), steps, reps, ok);
  run_case("seed d=64", bench::Seed::random(64, 1), steps, reps, ok);
  if (!ok) std::printf("\nERROR: a mode differs from the CPU backend beyond the tolerance\n");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "batching_gpu: %s\n", e.what());
  return 2;
}

// Host cost of a loop of small steps (issue 5): recording the ops of a step and evaluating it,
// on the CPU backend at tiny sizes, so compute is negligible and what is timed is the engine's
// own work: recording (validation, node creation, CSE) and evaluation (planning, or finding
// the cached plan, then dispatching one fused kernel per group and the GEMMs on 4 x 4 data).
// The plan cache on (kiln's default, 256 plans) and off (`set_plan_cache_limit(0)`: every
// evaluation planned afresh) side by side.
//
// Cases: the seed loop (bench/rnn_cells.h, d = 4) and an LSTM cell (batch 1, in = hidden = 4)
// whose input is a row slice at a new offset every step, or the same tensor every step. Each step
// is timed in two parts with the steady clock: its op calls (`record()`, reported per op call) and
// `kiln::eval` of its results (per step); two clock reads per part add ~20-40 ns. The
// configurations take turns in `rounds` rounds (a burst of load elsewhere touches all of them a
// little); each round starts from the same data, with warm-up steps; medians over all timed steps.
// Check: 100 steps with the cache on and off give bit-identical results (exit 1 otherwise).
//
// Usage: plan_cost [steps per round, default 2000] [rounds, default 10]
#include "bench_util.h"
#include "rnn_cells.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

constexpr int kWarmup = 20;
constexpr int64_t kDefaultPlans = 256; // kiln's default plan cache limit (engine.h; no getter)

struct Config {
  const char* name;
  int64_t plans;
};
const Config kConfigs[] = {{"on", kDefaultPlans}, {"off", 0}};

struct Series {
  std::vector<double> record_ns, eval_us, total_us; // per op call, per step, per step
  kiln::Stats st;                                   // summed over the timed steps
  int64_t steps = 0;
};

void accumulate(kiln::Stats& sum, const kiln::Stats& s) {
  sum.ops_recorded += s.ops_recorded;
  sum.flushes += s.flushes;
  sum.plan_hits += s.plan_hits;
  sum.plan_misses += s.plan_misses;
  sum.kernels_run += s.kernels_run;
  sum.gemms_run += s.gemms_run;
}

// One round of one configuration: `steps` timed steps of a fresh copy of `base`.
template <class Cell> void run_round(const Cell& base, int steps, Series& out) {
  Cell cell = base;
  for (int i = 0; i < kWarmup; ++i) cell.step();
  kiln::reset_stats();
  for (int i = 0; i < steps; ++i) {
    const double t0 = bench::now_ns();
    cell.record();
    const double t1 = bench::now_ns();
    kiln::eval(cell.state());
    const double t2 = bench::now_ns();
    out.record_ns.push_back((t1 - t0) / Cell::kOpCalls);
    out.eval_us.push_back((t2 - t1) / 1e3);
    out.total_us.push_back((t2 - t0) / 1e3);
  }
  accumulate(out.st, kiln::stats());
  out.steps += steps;
}

// The values after `steps` steps from `base`.
template <class Cell> std::vector<std::vector<float>> final_state(const Cell& base, int steps) {
  Cell cell = base;
  for (int i = 0; i < steps; ++i) cell.step();
  std::vector<std::vector<float>> v;
  for (const kiln::Tensor& t : cell.state()) v.push_back(t.to_vector<float>());
  return v;
}

struct Case {
  const char* name;
  int op_calls;
  std::function<void(int steps, Series&)> round;                   // one timed round
  std::function<std::vector<std::vector<float>>(int steps)> final; // state after n steps
  Series series[2];                                                // per configuration
};

template <class Cell> Case make_case(const char* name, Cell base) {
  return {name,
          Cell::kOpCalls,
          [base](int steps, Series& s) { run_round(base, steps, s); },
          [base](int steps) { return final_state(base, steps); },
          {}};
}

} // namespace

int main(int argc, char** argv) try {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2000;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
  bench::print_header("plan_cost: host cost per step of small loops, plan cache on and off", argc,
                      argv);
  kiln::set_eager(false);
  std::printf("- device: cpu (tiny tensors: the engine's host work dominates); %d rounds of %d "
              "timed steps per case and configuration, each after %d warm-up steps; median "
              "(p10, p90) over all timed steps\n",
              rounds, steps, kWarmup);
  std::printf("- record: the op calls of a step, per op call; eval: `kiln::eval` of the step's "
              "results (plan or cached plan, then the kernels and GEMMs on tiny data), per "
              "step\n\n");

  // An LSTM input slice is at a new offset in every timed step of a round.
  const int64_t len = kWarmup + steps;
  std::vector<Case> cases;
  cases.push_back(make_case("seed loop d=4", bench::Seed::random(4, 1)));
  cases.push_back(make_case("LSTM cell batch 1, hidden 4", bench::Lstm::random(1, 4, 4, len, 2)));
  // The same input tensor every step (len 1): the LSTM's plan repeats exactly.
  cases.push_back(
      make_case("LSTM cell batch 1, hidden 4, fixed x", bench::Lstm::random(1, 4, 4, 1, 2)));

  for (int r = 0; r < rounds; ++r)
    for (Case& c : cases)
      for (int k = 0; k < 2; ++k) {
        kiln::set_plan_cache_limit(kConfigs[k].plans);
        c.round(steps, c.series[k]);
      }

  std::printf("| case | plan cache | op calls/step | ops recorded/step | record ns/op call | p10 "
              "| p90 | eval us/step | p10 | p90 | record + eval us/step | plan hits/step | plan "
              "misses/step | kernels/step | GEMMs/step |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (Case& c : cases)
    for (int k = 0; k < 2; ++k) {
      const Series& s = c.series[k];
      const double n = double(s.steps);
      std::printf("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f "
                  "| %.2f | %.2f | %.2f |\n",
                  c.name, kConfigs[k].name, c.op_calls, double(s.st.ops_recorded) / n,
                  bench::median(s.record_ns), bench::percentile(s.record_ns, 0.1),
                  bench::percentile(s.record_ns, 0.9), bench::median(s.eval_us),
                  bench::percentile(s.eval_us, 0.1), bench::percentile(s.eval_us, 0.9),
                  bench::median(s.total_us), double(s.st.plan_hits) / n,
                  double(s.st.plan_misses) / n, double(s.st.kernels_run) / n,
                  double(s.st.gemms_run) / n);
    }

  // The cache must not change results: same steps with it on and off, bit for bit.
  bool same = true;
  std::printf("\n");
  for (Case& c : cases) {
    kiln::set_plan_cache_limit(kConfigs[0].plans);
    auto on = c.final(100);
    kiln::set_plan_cache_limit(kConfigs[1].plans);
    auto off = c.final(100);
    const bool eq = on == off;
    std::printf("%s: 100 steps with the plan cache on and off give %s results\n", c.name,
                eq ? "identical" : "DIFFERENT");
    same = same && eq;
  }
  kiln::set_plan_cache_limit(kDefaultPlans);
  return same ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "plan_cost: %s\n", e.what());
  return 2;
}

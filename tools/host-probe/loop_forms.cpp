// Probe (GPU or CPU): each of the seed loop (d = 64), the LSTM and the GRU cell at batch 1
// written two ways, an eval every step and no eval (read at the end), each with a confirmed
// loop's ops skipping the CSE table and without (EngineState::loop_skips_cse), and without eval
// with a constant node per scalar operand (EngineState::loop_shares_constants off), and without
// eval with a loop's flushes bounded at 512 and 1024 nodes instead of 256
// (EngineState::loop_flush_nodes; session 31 compared 64 and 128:
// bench/results/2026-11-27-h100-session31.md, call 8), and without eval with merged launches
// (kiln::set_merge_launches: a flush's steps of a small kernel as one launch); the forms alternated
// 5 times in one process, since the H100 host's speed changes in phases of seconds (~1.4x). Prints
// us a step (median, min-max), the host's time before the final sync, and flushes a step.
//   g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
//     -Ibuild-gpu/generated/include -I.deps/llvm/include tools/host-probe/loop_forms.cpp \
//     -Lbuild-gpu -lkiln -Wl,-rpath,$PWD/build-gpu -o /tmp/loop_forms
//   /tmp/loop_forms [STEPS, default 3000] [seed|lstm|gru, default all three; or seed4]
#include "bench_util.h"
#include "engine/graph.h"
#include "rnn_cells.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

using namespace kiln;

namespace {
double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
struct Result {
  double wall, host, flushes;
};

struct Form {
  const char* name;
  bool eval_each, skip_cse, share_constants;
  int64_t flush_nodes = 256; // EngineState::loop_flush_nodes
  bool merge = false;        // kiln::set_merge_launches
};
constexpr Form kForms[] = {{"eval every step", true, true, true},
                           {"eval, CSE always", true, false, true},
                           {"no eval", false, true, true},
                           {"no eval, CSE always", false, false, true},
                           {"no eval, own constants", false, true, false},
                           {"no eval, <= 512 nodes", false, true, true, 512},
                           {"no eval, <= 1024 nodes", false, true, true, 1024},
                           {"no eval, merged", false, true, true, 256, true}};

// One timed loop of `steps` steps after 300 warm-up steps.
template <class Cell> Result run(Cell& cell, int steps, const Form& f) {
  detail::engine().loop_skips_cse = f.skip_cse;
  detail::engine().loop_shares_constants = f.share_constants;
  detail::engine().loop_flush_nodes = f.flush_nodes;
  set_merge_launches(f.merge);
  for (int i = 0; i < 300; ++i) {
    cell.record();
    if (f.eval_each) eval(cell.state());
  }
  kiln::sync();
  reset_stats();
  const double t0 = now_us();
  for (int i = 0; i < steps; ++i) {
    cell.record();
    if (f.eval_each) eval(cell.state());
  }
  eval(cell.state());
  const double host = now_us() - t0;
  kiln::sync();
  return {(now_us() - t0) / steps, host / steps, double(stats().flushes) / steps};
}

// The forms alternated over 5 rounds, one row each.
template <class Cell> void compare_forms(const char* name, Cell cell, int steps) {
  constexpr size_t n = std::size(kForms);
  std::vector<std::vector<Result>> r(n);
  for (int round = 0; round < 5; ++round)
    for (size_t i = 0; i < n; ++i) r[i].push_back(run(cell, steps, kForms[i]));
  for (size_t i = 0; i < n; ++i) {
    auto v = r[i];
    std::sort(v.begin(), v.end(), [](const Result& a, const Result& b) { return a.wall < b.wall; });
    std::printf("%-14s %-22s %6.2f (%5.2f-%5.2f) us/step, host %5.2f, flushes/step %.4f\n", name,
                kForms[i].name, v[2].wall, v[0].wall, v[4].wall, v[2].host, v[2].flushes);
  }
  detail::engine().loop_skips_cse = true;
  detail::engine().loop_shares_constants = true;
  detail::engine().loop_flush_nodes = 256;
  set_merge_launches(false);
}
} // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3000;
  const std::string only = argc > 2 ? argv[2] : "";
  const Device dev = default_device();
  std::printf("host speed probe: %.0f us (bench::host_speed_us)\n", bench::host_speed_us());
  if (only.empty() || only == "seed")
    compare_forms("seed d=64", bench::Seed::random(64, 1).on(dev), steps);
  if (only == "seed4") // d = 4: the host's work of a seed step, for the CPU backend
    compare_forms("seed d=4", bench::Seed::random(4, 1).on(dev), steps);
  if (only.empty() || only == "lstm")
    compare_forms("LSTM b1", bench::Lstm::random(1, 256, 256, steps + 400, 2).on(dev), steps);
  if (only.empty() || only == "gru")
    compare_forms("GRU b1", bench::Gru::random(1, 256, 256, steps + 400, 3).on(dev), steps);
}

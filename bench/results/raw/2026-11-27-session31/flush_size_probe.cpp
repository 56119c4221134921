// Session 31: a loop without eval with the loop flush bound (EngineState::loop_flush_nodes) at
// 64, 128, 256 nodes, alternated in one process, beside an eval every step: us a step (and the
// host's time before the final sync), median (min-max) of 5 rounds, and flushes per step.
//   g++ -std=c++20 -O2 -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
//     -IBUILD/generated/include -I.deps/llvm/include scripts/tmp/flush_size_probe.cpp \
//     -LBUILD -lkiln -Wl,-rpath,$PWD/BUILD -o /tmp/fsp
#include "engine/graph.h"
#include "rnn_cells.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;

namespace {
double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
struct Result { double wall, host, flushes; };

template <class Cell> Result run(Cell& cell, int steps, int64_t nodes) {
  const bool eval_each = nodes == 0;
  if (!eval_each) detail::engine().loop_flush_nodes = nodes;
  for (int i = 0; i < 300; ++i) { cell.record(); if (eval_each) eval(cell.state()); }
  kiln::sync();
  reset_stats();
  const double t0 = now_us();
  for (int i = 0; i < steps; ++i) { cell.record(); if (eval_each) eval(cell.state()); }
  eval(cell.state());
  const double host = now_us() - t0;
  kiln::sync();
  return {(now_us() - t0) / steps, host / steps, double(stats().flushes) / steps};
}

template <class Cell> void sizes(const char* name, Cell cell, int steps) {
  const std::vector<int64_t> ns = {0, 64, 128, 256};
  std::vector<std::vector<Result>> r(ns.size());
  for (int round = 0; round < 5; ++round)
    for (size_t i = 0; i < ns.size(); ++i) r[i].push_back(run(cell, steps, ns[i]));
  for (size_t i = 0; i < ns.size(); ++i) {
    auto v = r[i];
    std::sort(v.begin(), v.end(), [](const Result& a, const Result& b) { return a.wall < b.wall; });
    std::printf("%-14s %-22s %6.2f (%5.2f-%5.2f) us/step, host %5.2f, flushes/step %.4f\n", name,
                ns[i] == 0 ? "eval every step" : ("no eval, <= " + std::to_string(ns[i]) + " nodes").c_str(),
                v[2].wall, v[0].wall, v[4].wall, v[2].host, v[2].flushes);
  }
  detail::engine().loop_flush_nodes = 256;
}
} // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3000;
  const std::string only = argc > 2 ? argv[2] : "";
  const Device dev = default_device();
  if (only.empty() || only == "seed") sizes("seed d=64", bench::Seed::random(64, 1).on(dev), steps);
  if (only.empty() || only == "lstm") sizes("LSTM b1", bench::Lstm::random(1, 256, 256, steps + 400, 2).on(dev), steps);
  if (only.empty() || only == "gru") sizes("GRU b1", bench::Gru::random(1, 256, 256, steps + 400, 3).on(dev), steps);
}

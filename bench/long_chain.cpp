// Planning a long pending graph (issue 16, item 8): a chain of n elementwise op calls recorded
// without evaluation (the pending limits raised), then one eval; and the same chain dropped
// unevaluated. Two chains: `y = y * 1.0001f + 0.5f` (the same constants every step), and
// `y = y * 0.5f + x[i]` with a distinct realized input per step (the kernel parameter budget
// splits it). Medians with min/max over `reps` runs, in seconds; the CPU backend, tiny tensors
// (16 elements), so what is timed is recording, planning and the engine's own work.
//
// Usage: long_chain [reps, default 3] [largest n, default 1000000]
#include "bench_util.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct Times {
  double record, eval, drop;
};

Times run(int64_t n, bool distinct) {
  using namespace kiln;
  std::vector<Tensor> xs;
  if (distinct) {
    for (int64_t i = 0; i < n; ++i) xs.push_back(full({16}, double(i % 7)));
    eval(xs);
  }
  auto chain = [&] {
    Tensor y = ones({16});
    for (int64_t i = 0; i < n; ++i) y = distinct ? y * 0.5f + xs[size_t(i)] : y * 1.0001f + 0.5f;
    return y;
  };
  Times t{};
  double t0 = bench::now_ns();
  Tensor y = chain();
  double t1 = bench::now_ns();
  eval(y);
  double t2 = bench::now_ns();
  Tensor z = chain();
  double t3 = bench::now_ns();
  z = Tensor(); // dropped unevaluated
  double t4 = bench::now_ns();
  t.record = (t1 - t0) / 1e9;
  t.eval = (t2 - t1) / 1e9;
  t.drop = (t4 - t3) / 1e9;
  return t;
}

std::string stat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  char b[96];
  std::snprintf(b, sizeof b, "%.3f (%.3f-%.3f)", bench::median(v), v.front(), v.back());
  return b;
}

} // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const int64_t largest = argc > 2 ? std::atoll(argv[2]) : 1000000;
  bench::print_header("long_chain: planning a long pending chain (issue 16)", argc, argv);
  kiln::set_pending_limits(int64_t(1) << 40, int64_t(1) << 40);
  kiln::set_idle_flush(0);
  std::printf(
      "| chain | n | record s | eval s | drop s | kernels |\n|---|---:|---:|---:|---:|---:|\n");
  for (bool distinct : {false, true})
    for (int64_t n : {int64_t(10000), int64_t(40000), int64_t(100000), int64_t(1000000)}) {
      if (n > largest || (distinct && n > 100000)) continue;
      std::vector<double> rec, ev, dr;
      int64_t kernels = 0;
      for (int r = 0; r < reps; ++r) {
        kiln::reset_stats();
        Times t = run(n, distinct);
        kernels = kiln::stats().kernels_run;
        rec.push_back(t.record);
        ev.push_back(t.eval);
        dr.push_back(t.drop);
      }
      std::printf("| %s | %lld | %s | %s | %s | %lld |\n",
                  distinct ? "y * 0.5 + x[i]" : "y * 1.0001 + 0.5", static_cast<long long>(n),
                  stat(rec).c_str(), stat(ev).c_str(), stat(dr).c_str(),
                  static_cast<long long>(kernels));
      std::fflush(stdout);
    }
  return 0;
}

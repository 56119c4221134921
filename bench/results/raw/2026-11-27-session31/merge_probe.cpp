// Session 31: the seed loop (d=64) with merging on and off, alternated in one process:
// eval every K steps (K = 1, 16, 64) and no eval (N); wall us/step over STEPS steps, 5 rounds.
#include <kiln/kiln.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace kiln;
static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 4096;
  const int d = argc > 2 ? atoi(argv[2]) : 64;
  const char* only = argc > 3 ? argv[3] : nullptr;
  const int merge_only = argc > 4 ? atoi(argv[4]) : -1; // 1 or 0: only that mode (for ncu)
  manual_seed(1);
  Tensor w = randn({d, d}) * (8.f / d), b = randn({d}) * 0.1f;
  eval(w, b);
  double host_us = 0;
  auto run = [&](int K, bool merge, int n) {
    set_merge_launches(merge);
    set_idle_flush(K == 0 ? 64 : 0);
    Tensor x = randn({d, d});
    eval(x);
    kiln::sync();
    double t0 = now_us();
    for (int s = 0; s < n; ++s) {
      Tensor y = matmul(x, w);
      y = tanh(y + b) * 0.5f + x;
      x = sigmoid(y) - 0.5f;
      if (K > 0 && (s + 1) % K == 0) eval(x);
    }
    eval(x);
    host_us = (now_us() - t0) / n;
    kiln::sync();
    return (now_us() - t0) / n;
  };
  for (int K : {1, 16, 64, 0}) {
    if (only && atoi(only) != K) continue;
    std::vector<double> on, off;
    if (merge_only >= 0) {
      std::vector<double> t;
      run(K, merge_only == 1, 1024);
      for (int r = 0; r < 5; ++r) t.push_back(run(K, merge_only == 1, steps));
      std::sort(t.begin(), t.end());
      std::printf("K=%d merge=%d %.2f (%.2f-%.2f) us/step, host %.2f in the last\n", K, merge_only, t[2], t[0], t[4], host_us);
      continue;
    }
    run(K, true, 1024), run(K, false, 1024); // warm: compile, plan, graphs
    for (int r = 0; r < 5; ++r) {
      off.push_back(run(K, false, steps));
      on.push_back(run(K, true, steps));
    }
    reset_stats();
    const double t = run(K, false, steps);
    const Stats st = stats();
    std::printf("K=%-3d unmerged once more: %.2f us/step (host %.2f before the sync); per step: flushes %.4f loop %.4f idle %.4f busy checks %.4f plan hits %.4f misses %.4f graphs built %.4f replays %.4f patched %.4f direct %.4f kernels %.3f\n",
                K, t, host_us, double(st.flushes) / steps, double(st.loop_flushes) / steps, double(st.idle_flushes) / steps,
                double(st.busy_checks) / steps, double(st.plan_hits) / steps, double(st.plan_misses) / steps,
                double(st.graph_instantiations) / steps, double(st.graph_replays) / steps, double(st.graph_updates) / steps,
                double(st.graph_misses) / steps, double(st.kernels_run) / steps);
    std::sort(on.begin(), on.end()), std::sort(off.begin(), off.end());
    std::printf("K=%-3d merged %.2f (%.2f-%.2f)  unmerged %.2f (%.2f-%.2f) us/step\n", K, on[2], on[0], on[4], off[2], off[0], off[4]);
  }
  Stats s = stats();
  std::printf("kernels_merged %lld\n", (long long)s.kernels_merged);
}

// What fusion buys on the CPU backend: a 9-op elementwise chain over 16M f32 elements,
//   t = x*y + 1; t = tanh(t); s = sigmoid(t); o = relu(s*x + (1-s)*y)
// run three ways in one process:
//   fused  lazy mode, kiln::eval(o): the planner should make it one kernel
//   eager  kiln::set_eager(true): same engine, one kernel per op, every intermediate stored
//   loop   a hand-written single C++ loop over std::vector<float> (this file is built -O3),
//          same math with std::tanh/std::exp, into a preallocated output
// x and y come from kiln::randn and are realized before timing. GB/s counts the minimum
// traffic, 12 bytes per element (read x and y, write o), for all three.
//
// Usage: chain_cpu [repetitions, default 7] [elements, default 16777216]
#include "bench_util.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace {

kiln::Tensor chain(const kiln::Tensor& x, const kiln::Tensor& y) {
  kiln::Tensor t = x * y + 1.0f;
  t = kiln::tanh(t);
  kiln::Tensor s = kiln::sigmoid(t);
  return kiln::relu(s * x + (1.0f - s) * y);
}

void hand_loop(const float* __restrict x, const float* __restrict y, float* __restrict o,
               size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float t = std::tanh(x[i] * y[i] + 1.0f);
    float s = 1.0f / (1.0f + std::exp(-t));
    float v = s * x[i] + (1.0f - s) * y[i];
    o[i] = v > 0.0f ? v : 0.0f;
  }
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

} // namespace

int main(int argc, char** argv) try {
  int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  int64_t n = argc > 2 ? std::atoll(argv[2]) : int64_t(1) << 24;
  if (reps < 1) reps = 1;
  bench::print_header("chain_cpu: fused vs eager vs hand loop, 9-op elementwise chain", argc, argv);
  std::printf("- chain: `t = x*y + 1; t = tanh(t); s = sigmoid(t); o = relu(s*x + (1-s)*y)`\n");
  std::printf("- %lld f32 elements (%.0f MiB per tensor), %d timed repetitions each after one "
              "warm-up, median reported\n\n",
              (long long)n, double(n) * 4 / (1 << 20), reps);

  const kiln::Device cpu = kiln::Device::cpu();
  kiln::set_default_device(cpu);
  kiln::set_eager(false);
  kiln::manual_seed(42);
  kiln::Tensor x = kiln::randn({n}, kiln::DType::f32, cpu);
  kiln::Tensor y = kiln::randn({n}, kiln::DType::f32, cpu);
  kiln::eval(x, y);
  const std::vector<float> xv = x.to_vector<float>();
  const std::vector<float> yv = y.to_vector<float>();

  // fused (lazy)
  std::vector<double> fused_ms;
  kiln::Stats fused_stats;
  kiln::Tensor o_fused;
  for (int r = -1; r < reps; ++r) {
    o_fused = kiln::Tensor(); // free the previous output first
    kiln::reset_stats();
    double t0 = bench::now_ns();
    o_fused = chain(x, y);
    kiln::eval(o_fused);
    double t1 = bench::now_ns();
    if (r >= 0) fused_ms.push_back((t1 - t0) / 1e6);
    fused_stats = kiln::stats();
  }

  // eager: same engine, every op computed as recorded
  std::vector<double> eager_ms;
  kiln::Stats eager_stats;
  kiln::Tensor o_eager;
  kiln::set_eager(true);
  for (int r = -1; r < reps; ++r) {
    o_eager = kiln::Tensor();
    kiln::reset_stats();
    double t0 = bench::now_ns();
    o_eager = chain(x, y);
    kiln::eval(o_eager);
    double t1 = bench::now_ns();
    if (r >= 0) eager_ms.push_back((t1 - t0) / 1e6);
    eager_stats = kiln::stats();
  }
  kiln::set_eager(false);

  // hand-written loop
  std::vector<double> loop_ms;
  std::vector<float> o_loop(static_cast<size_t>(n));
  for (int r = -1; r < reps; ++r) {
    double t0 = bench::now_ns();
    hand_loop(xv.data(), yv.data(), o_loop.data(), o_loop.size());
    double t1 = bench::now_ns();
    if (r >= 0) loop_ms.push_back((t1 - t0) / 1e6);
  }

  const std::vector<float> fv = o_fused.to_vector<float>();
  const std::vector<float> ev = o_eager.to_vector<float>();
  const double d_fl = max_abs_diff(fv, o_loop), d_el = max_abs_diff(ev, o_loop),
               d_fe = max_abs_diff(fv, ev);

  const double bytes = 12.0 * double(n);
  const double mf = bench::median(fused_ms), me = bench::median(eager_ms),
               ml = bench::median(loop_ms);
  auto row = [&](const char* name, const std::vector<double>& ms, double med) {
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n", name, med,
                *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()),
                bytes / (med * 1e6), med / ml);
  };
  std::printf("| variant | median ms | min ms | max ms | GB/s (12 B/elem) | time / hand loop |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  row("kiln fused (lazy, eval)", fused_ms, mf);
  row("kiln eager (set_eager(true))", eager_ms, me);
  row("hand loop (C++ -O3, 1 thread)", loop_ms, ml);

  std::printf("\n- fused speedup over eager: %.2fx (target >= 2x: %s)\n", me / mf,
              me / mf >= 2 ? "met" : "NOT met");
  std::printf("- fused / hand loop: %.2fx (target <= 3x: %s)\n", mf / ml,
              mf / ml <= 3 ? "met" : "NOT met");
  std::printf("- one fused evaluation: kernels_run = %lld (expected 1), fused_ops = %lld, "
              "buffers_materialized = %lld\n",
              (long long)fused_stats.kernels_run, (long long)fused_stats.fused_ops,
              (long long)fused_stats.buffers_materialized);
  std::printf("- one eager evaluation: kernels_run = %lld\n", (long long)eager_stats.kernels_run);
  std::printf("- max |diff|: fused vs loop %.3g, eager vs loop %.3g, fused vs eager %.3g -> %s\n",
              d_fl, d_el, d_fe, std::max({d_fl, d_el, d_fe}) <= 1e-5 ? "agree" : "DISAGREE");
  std::printf("\nfused stats: %s\n",
              [&] {
                std::ostringstream os;
                os << fused_stats;
                return os.str();
              }()
                  .c_str());
  return std::max({d_fl, d_el, d_fe}) <= 1e-5 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "chain_cpu: %s\n", e.what());
  return 2;
}

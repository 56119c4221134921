// Host cost of recording an op: how long an op call takes when nothing is computed.
//
// Small (8x8 f32) inputs are realized first; then each timed batch records ~200 ops into a
// pending chain and drops it without evaluating, so no kernel ever runs (checked with
// kiln::stats(): kernels_run, gemms_run, copies_run and flushes must not move while timing).
// Batches stay far below the pending-graph node limit so no auto-flush happens.
//
// The cases take turns: `rounds` rounds of `batches / rounds` batches per case, so a burst of
// load from elsewhere on the machine touches every case a little instead of one case a lot.
// The median over all of a case's batches is reported.
//
// Usage: record_cost [batches per case, default 2000] [rounds, default 10]
#include "bench_util.h"

#include <kiln/kiln.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

constexpr int kBatchOps = 200; // op calls per timed batch (< the 10,000-node pending limit)

struct Case {
  const char* name;
  int ops = 0;                                 // op calls per batch
  std::function<void(double&, double&)> batch; // one timed batch: record ns/op, drop ns/op
  std::vector<double> rec, drop, total;
  int64_t nodes = 0, batches = 0;
  bool clean = true; // nothing computed while timing
};

// step(y, x) -> new y, making `ops_per_step` op calls. The std::function is called once per
// batch; the op calls inside run through the template, as in user code.
template <class Step>
Case make_case(const char* name, int ops_per_step, Step step, const kiln::Tensor& x,
               const kiln::Tensor& y0) {
  const int steps = kBatchOps / ops_per_step;
  const int ops = steps * ops_per_step;
  Case c;
  c.name = name;
  c.ops = ops;
  c.batch = [steps, ops, step, &x, &y0](double& rec_ns, double& drop_ns) {
    double t0 = bench::now_ns(), t1;
    {
      kiln::Tensor y = y0;
      for (int s = 0; s < steps; ++s) y = step(y, x);
      t1 = bench::now_ns();
    } // the chain's last handle dies here: every pending node is dropped unseen
    double t2 = bench::now_ns();
    rec_ns = (t1 - t0) / ops;
    drop_ns = (t2 - t1) / ops;
  };
  return c;
}

void run_round(Case& c, int batches) {
  double r, d;
  for (int i = 0; i < 20; ++i) c.batch(r, d); // warm up allocators and caches
  kiln::reset_stats();
  for (int i = 0; i < batches; ++i) {
    c.batch(r, d);
    c.rec.push_back(r);
    c.drop.push_back(d);
    c.total.push_back(r + d);
  }
  kiln::Stats st = kiln::stats();
  c.clean =
      c.clean && st.kernels_run == 0 && st.gemms_run == 0 && st.copies_run == 0 && st.flushes == 0;
  c.nodes += st.ops_recorded - st.ops_merged; // merged op calls create no node
  c.batches += batches;
}

} // namespace

int main(int argc, char** argv) try {
  int batches = argc > 1 ? std::atoi(argv[1]) : 2000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  if (rounds < 1) rounds = 1;
  if (batches < rounds) batches = rounds;
  const int per_round = batches / rounds;
  bench::print_header("record_cost: host cost of recording an op (nothing computed)", argc, argv);
  kiln::set_eager(false);
  kiln::Device dev = kiln::Device::cpu();
  std::printf("- device: %s, inputs 8x8 f32, %d op calls per batch, %d batches per case in %d "
              "interleaved rounds, median over batches\n\n",
              dev.str().c_str(), kBatchOps, per_round * rounds, rounds);

  kiln::Tensor x = kiln::randn({8, 8}, kiln::DType::f32, dev);
  kiln::Tensor y0 = kiln::ones({8, 8}, kiln::DType::f32, dev);
  kiln::eval(x, y0);

  using kiln::Tensor;
  std::vector<Case> cases;
  cases.push_back(make_case(
      "y = y * x + 1", 2, [](const Tensor& y, const Tensor& x) { return y * x + 1.0f; }, x, y0));
  cases.push_back(make_case(
      "y = y + x", 1, [](const Tensor& y, const Tensor& x) { return y + x; }, x, y0));
  cases.push_back(make_case(
      "y = y * 0.5", 1, [](const Tensor& y, const Tensor&) { return y * 0.5f; }, x, y0));
  cases.push_back(make_case(
      "y = tanh(y)", 1, [](const Tensor& y, const Tensor&) { return kiln::tanh(y); }, x, y0));
  cases.push_back(make_case(
      "y = transpose(y, 0, 1)", 1,
      [](const Tensor& y, const Tensor&) { return kiln::transpose(y, 0, 1); }, x, y0));
  cases.push_back(make_case(
      "y = y + sum(y, {1}, true)", 2,
      [](const Tensor& y, const Tensor&) { return y + kiln::sum(y, {1}, true); }, x, y0));

  for (int r = 0; r < rounds; ++r)
    for (Case& c : cases) run_round(c, per_round);

  std::printf("| ops recorded | op calls/batch | nodes/batch | record ns/op (median) | p10 | p90 "
              "| drop ns/op | record+drop ns/op | computed nothing |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool all_clean = true;
  for (const Case& c : cases) {
    std::printf("| `%s` | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", c.name, c.ops,
                double(c.nodes) / double(c.batches), bench::median(c.rec),
                bench::percentile(c.rec, 0.1), bench::percentile(c.rec, 0.9), bench::median(c.drop),
                bench::median(c.total), c.clean ? "yes" : "NO");
    all_clean = all_clean && c.clean;
  }
  const Case& main_case = cases.front();
  const double main_med = bench::median(main_case.rec);
  std::printf("\ntarget: record <= 200 ns/op for `%s`: %.1f ns/op -> %s\n", main_case.name,
              main_med, main_med <= 200 ? "met" : "NOT met");
  if (!all_clean) {
    std::printf("ERROR: kernels ran or the graph flushed while timing; numbers include compute\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "record_cost: %s\n", e.what());
  return 2;
}

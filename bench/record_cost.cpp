// Host cost of recording an op: how long an op call takes when nothing is computed.
//
// Small (8x8 f32) inputs are realized first; then each timed batch records ~200 ops into a
// pending chain and drops it without evaluating, so no kernel ever runs (checked with
// kiln::stats(): kernels_run, gemms_run and flushes must not move while timing). Batches stay
// far below the pending-graph node limit so no auto-flush happens.
//
// Usage: record_cost [batches per case, default 2000]
#include "bench_util.h"

#include <kiln/kiln.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kBatchOps = 200; // op calls per timed batch (< the 10,000-node pending limit)

struct Row {
  const char* name;
  int ops_per_batch;
  double nodes_per_batch;
  double record_med, record_p10, record_p90, drop_med, total_med;
  bool clean; // nothing computed while timing
};

// step(y, x) -> new y, making `ops_per_step` op calls.
template <class Step>
Row run_case(const char* name, int ops_per_step, Step step, const kiln::Tensor& x,
             const kiln::Tensor& y0, int batches) {
  const int steps = kBatchOps / ops_per_step;
  const int ops = steps * ops_per_step;
  auto batch = [&](double& rec_ns, double& drop_ns) {
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

  double r, d;
  for (int i = 0; i < 50; ++i) batch(r, d); // warm up allocators and caches

  kiln::reset_stats();
  std::vector<double> rec, drop, total;
  rec.reserve(batches);
  drop.reserve(batches);
  total.reserve(batches);
  for (int i = 0; i < batches; ++i) {
    batch(r, d);
    rec.push_back(r);
    drop.push_back(d);
    total.push_back(r + d);
  }
  kiln::Stats st = kiln::stats();
  bool clean = st.kernels_run == 0 && st.gemms_run == 0 && st.copies_run == 0 && st.flushes == 0;
  return {name,
          ops,
          double(st.ops_recorded) / batches,
          bench::median(rec),
          bench::percentile(rec, 0.1),
          bench::percentile(rec, 0.9),
          bench::median(drop),
          bench::median(total),
          clean};
}

} // namespace

int main(int argc, char** argv) try {
  int batches = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (batches < 1) batches = 1;
  bench::print_header("record_cost: host cost of recording an op (nothing computed)", argc, argv);
  kiln::set_eager(false);
  kiln::Device dev = kiln::Device::cpu();
  std::printf("- device: %s, inputs 8x8 f32, %d op calls per batch, %d batches per case, "
              "median over batches\n\n",
              dev.str().c_str(), kBatchOps, batches);

  kiln::Tensor x = kiln::randn({8, 8}, kiln::DType::f32, dev);
  kiln::Tensor y0 = kiln::ones({8, 8}, kiln::DType::f32, dev);
  kiln::eval(x, y0);

  using kiln::Tensor;
  std::vector<Row> rows;
  rows.push_back(run_case(
      "y = y * x + 1", 2, [](const Tensor& y, const Tensor& x) { return y * x + 1.0f; }, x, y0,
      batches));
  rows.push_back(run_case(
      "y = y + x", 1, [](const Tensor& y, const Tensor& x) { return y + x; }, x, y0, batches));
  rows.push_back(run_case(
      "y = y * 0.5", 1, [](const Tensor& y, const Tensor&) { return y * 0.5f; }, x, y0, batches));
  rows.push_back(run_case(
      "y = tanh(y)", 1, [](const Tensor& y, const Tensor&) { return kiln::tanh(y); }, x, y0,
      batches));
  rows.push_back(run_case(
      "y = transpose(y, 0, 1)", 1,
      [](const Tensor& y, const Tensor&) { return kiln::transpose(y, 0, 1); }, x, y0, batches));
  rows.push_back(run_case(
      "y = y + sum(y, {1}, true)", 2,
      [](const Tensor& y, const Tensor&) { return y + kiln::sum(y, {1}, true); }, x, y0, batches));

  std::printf("| ops recorded | op calls/batch | nodes/batch | record ns/op (median) | p10 | p90 "
              "| drop ns/op | record+drop ns/op | computed nothing |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool all_clean = true;
  for (const Row& r : rows) {
    std::printf("| `%s` | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n", r.name,
                r.ops_per_batch, r.nodes_per_batch, r.record_med, r.record_p10, r.record_p90,
                r.drop_med, r.total_med, r.clean ? "yes" : "NO");
    all_clean = all_clean && r.clean;
  }
  const Row& main_row = rows.front();
  std::printf("\ntarget: record <= 200 ns/op for `%s`: %.1f ns/op -> %s\n", main_row.name,
              main_row.record_med, main_row.record_med <= 200 ? "met" : "NOT met");
  if (!all_clean) {
    std::printf("ERROR: kernels ran or the graph flushed while timing; numbers include compute\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "record_cost: %s\n", e.what());
  return 2;
}

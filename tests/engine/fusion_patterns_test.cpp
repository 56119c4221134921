// Common subexpression elimination and in-place buffer reuse, asserted through stats(), the plan
// dump and values computed separately (eagerly or on the host) from fresh random inputs.
#include "../test_device.h"

#include "engine/cse.h"
#include "engine/schedule.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct FusionPatterns : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    manual_seed(1234);
  }
  void TearDown() override {
    set_eager(false);
    set_pending_limits(10000, int64_t(1) << 30);
    set_loop_flush(true);
  }
};

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

Tensor realized_randn(const Shape& s) {
  Tensor t = randn(s);
  eval(t);
  return t;
}

void expect_bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << i << ": " << a[i] << " vs " << b[i];
}

} // namespace

// ---- common subexpression elimination ---------------------------------------------------------

TEST_F(FusionPatterns, IdenticalOpsShareOneNodeAndOneBuffer) {
  Tensor x = realized_randn({1000}), y = realized_randn({1000});
  reset_stats();
  Tensor u = x + y;
  Tensor v = x + y; // recorded twice: the same value
  EXPECT_EQ(stats().ops_merged, 1);
  eval(u, v);
  Stats s = stats();
  EXPECT_EQ(s.kernels_run, 1);
  EXPECT_EQ(s.buffers_materialized, 1);
  EXPECT_EQ(s.bytes_allocated, 1000 * 4);
  EXPECT_EQ(s.nodes_dropped, 0);
  auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
  auto us = u.to_vector<float>(), vs = v.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(us[i], xs[i] + ys[i]) << i;
    ASSERT_EQ(vs[i], xs[i] + ys[i]) << i;
  }
}

TEST_F(FusionPatterns, SharedSubexpressionIsComputedOnceInOneKernel) {
  Tensor x = realized_randn({4096});
  reset_stats();
  Tensor a = exp(x) * 2;
  Tensor b = exp(x) * 3;
  eval(a, b);
  Stats s = stats();
  std::string plan = last_plan();
  EXPECT_EQ(s.kernels_run, 1) << plan;
  EXPECT_EQ(s.fused_ops, 3) << plan; // exp, * 2, * 3
  EXPECT_EQ(s.buffers_materialized, 2) << plan;
  EXPECT_EQ(count(plan, "= exp "), 1) << plan;
  auto xs = x.to_vector<float>(), as = a.to_vector<float>(), bs = b.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_NEAR(as[i], std::exp(xs[i]) * 2, 2e-6 * std::exp(xs[i]) * 2) << i;
    ASSERT_NEAR(bs[i], std::exp(xs[i]) * 3, 2e-6 * std::exp(xs[i]) * 3) << i;
  }
}

TEST_F(FusionPatterns, SiblingKernelsReadingThroughBroadcastsMerge) {
  Tensor x = realized_randn({64, 64}), row = realized_randn({1, 64});
  reset_stats();
  Tensor a = exp(row) + x; // exp(row) is read through a broadcast by both kernels
  Tensor b = exp(row) * x;
  eval(a, b);
  std::string plan = last_plan();
  EXPECT_EQ(stats().kernels_run, 1) << plan;
  EXPECT_EQ(count(plan, "= exp "), 1) << plan;
  // A third consumer over another iteration space cannot join: exp(row) is then written once
  // and read by every kernel, still computed once.
  Tensor c = exp(row) + x, d = exp(row) * x, e = exp(row) - 1;
  eval(c, d, e);
  plan = last_plan();
  EXPECT_EQ(count(plan, "= exp "), 1) << plan;
  EXPECT_NE(plan.find("used by several kernels"), std::string::npos) << plan;
  auto xs = x.to_vector<float>(), rs = row.to_vector<float>();
  auto as = a.to_vector<float>(), bs = b.to_vector<float>();
  auto cs = c.to_vector<float>(), ds = d.to_vector<float>(), es = e.to_vector<float>();
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) {
      float ex = std::exp(rs[j]);
      ASSERT_NEAR(as[i * 64 + j], ex + xs[i * 64 + j], 1e-5 * (1 + std::fabs(ex)));
      ASSERT_NEAR(bs[i * 64 + j], ex * xs[i * 64 + j], 1e-5 * (1 + std::fabs(ex)));
      ASSERT_EQ(cs[i * 64 + j], as[i * 64 + j]);
      ASSERT_EQ(ds[i * 64 + j], bs[i * 64 + j]);
      if (i == 0) ASSERT_NEAR(es[j], ex - 1, 1e-5 * (1 + std::fabs(ex)));
    }
}

TEST_F(FusionPatterns, SharedRandomSourceReadThroughABroadcastIsWrittenOnce) {
  Tensor x = realized_randn({64, 64});
  manual_seed(77);
  Tensor a, b;
  {
    Tensor r = rand({1, 64}); // random values can't be recomputed at another index
    a = r + x;
    b = r * x;
  }
  eval(a, b);
  manual_seed(77);
  auto rs = rand({1, 64}).to_vector<float>();
  auto xs = x.to_vector<float>(), as = a.to_vector<float>(), bs = b.to_vector<float>();
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(as[i * 64 + j], rs[j] + xs[i * 64 + j]);
      ASSERT_EQ(bs[i * 64 + j], rs[j] * xs[i * 64 + j]);
    }
}

TEST_F(FusionPatterns, SharedChainsMergeNodeByNode) {
  Tensor x = realized_randn({64, 32}), y = realized_randn({32});
  reset_stats();
  // Each line records the same 4 ops (the scalars 1 and 0.5 are recorded anew each time and
  // compared by value): the second and third lines record nothing new.
  Tensor p = tanh(x * y + 1) * 0.5f;
  Tensor q = tanh(x * y + 1) * 0.5f;
  Tensor r = sum(tanh(x * y + 1) * 0.5f, {1});
  EXPECT_EQ(stats().ops_merged, 8);
  eval(p, q, r);
  // One kernel computes the chain once and writes both p (whole space) and its row sums.
  EXPECT_EQ(stats().fused_ops, 5) << last_plan();
  EXPECT_EQ(stats().kernels_run, 1) << last_plan();
  auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
  auto ps = p.to_vector<float>(), qs = q.to_vector<float>(), rs = r.to_vector<float>();
  for (int i = 0; i < 64; ++i) {
    double row = 0;
    for (int j = 0; j < 32; ++j) {
      double ref = std::tanh(double(xs[i * 32 + j]) * ys[j] + 1) * 0.5;
      ASSERT_NEAR(ps[i * 32 + j], ref, 1e-6);
      ASSERT_EQ(ps[i * 32 + j], qs[i * 32 + j]);
      row += ref;
    }
    ASSERT_NEAR(rs[i], row, 1e-4) << i;
  }
}

TEST_F(FusionPatterns, DifferentAttributesNeverMerge) {
  Tensor x = realized_randn({16, 8});
  reset_stats();
  std::vector<Tensor> keep = {x * 2.0f,
                              x * 3.0f,
                              x * 0.0f,
                              x * -0.0f,
                              sum(x, {0}),
                              sum(x, {1}),
                              sum(x, {1}, true),
                              max(x, {1}),
                              exp(x),
                              log(x),
                              x + 1,
                              x - 1,
                              x.astype(DType::f16),
                              x.astype(DType::bf16)};
  // Views of a pending value: different slices and a permutation.
  Tensor e = sin(x) + 0.25f;
  keep.push_back(slice(e, 0, 0, 8, 1));
  keep.push_back(slice(e, 0, 8, 16, 1));
  keep.push_back(slice(e, 0, 0, 16, 2));
  keep.push_back(transpose(e, 0, 1));
  EXPECT_EQ(stats().ops_merged, 0);
  // -0.0 and 0.0 are different constants: the products differ in sign.
  auto pz = keep[2].to_vector<float>(), nz = keep[3].to_vector<float>();
  auto xs = x.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(std::signbit(pz[i]), std::signbit(xs[i])) << i;
    ASSERT_NE(std::signbit(nz[i]), std::signbit(xs[i])) << i;
  }
}

TEST_F(FusionPatterns, TheCseTableShrinksBackAfterALargeEvaluation) {
  // A flush of thousands of pending nodes grows the CSE table. Each reset of the emptied table
  // writes every bucket it reserves, so the small evaluations after it must not keep that size:
  // kept, it made a small loop's steps 3x slower (2.9 -> 9.5 us on the CPU backend). The chain
  // is also deeper than one kernel may be: before the depth bound, building its kernel
  // overflowed the stack.
  // Without the loop detector: in a loop it confirms, ops of kinds that never merged skip the
  // table (engine/cse.h).
  set_loop_flush(false);
  Tensor x = realized_randn({4});
  std::vector<float> xs = x.to_vector<float>(), want = xs;
  Tensor acc = x;
  auto step = [&] {
    acc = acc * 0.5f + x;
    for (size_t i = 0; i < want.size(); ++i) want[i] = want[i] * 0.5f + xs[i];
  };
  set_pending_limits(20000, int64_t(1) << 30); // (TearDown restores the defaults)
  reset_stats();
  for (int i = 0; i < 5000; ++i) step(); // 15,000 pending nodes, a chain 10,000 ops deep
  EXPECT_GE(detail::cse_table_buckets(), 8192u);
  eval(acc); // split into kernels of at most 512 chained ops (kernel_builder.cpp)
  EXPECT_EQ(stats().flushes, 1);
  EXPECT_GE(stats().kernels_run, 10000 / 512);
  for (int i = 0; i < 3; ++i) {
    step();
    eval(acc);
  }
  EXPECT_LE(detail::cse_table_buckets(), 64u);
  std::vector<float> got = acc.to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST_F(FusionPatterns, RandomDrawsMergeOnlyWhenIdentical) {
  reset_stats();
  Tensor r1 = rand({512}), r2 = rand({512}); // consecutive draws: different counters
  EXPECT_EQ(stats().ops_merged, 0);
  auto v1 = r1.to_vector<float>(), v2 = r2.to_vector<float>();
  int same = 0;
  for (size_t i = 0; i < v1.size(); ++i) same += v1[i] == v2[i];
  EXPECT_LT(same, 4);
  manual_seed(99);
  Tensor a = randn({512}) * 2;
  manual_seed(99);
  Tensor b = randn({512}) * 2; // the very same numbers: one node
  EXPECT_EQ(stats().ops_merged, 2);
  manual_seed(100);
  Tensor c = randn({512}) * 2; // another seed
  EXPECT_EQ(stats().ops_merged, 2);
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  expect_bits_equal(av, bv);
  EXPECT_NE(av, cv);
}

TEST_F(FusionPatterns, MergedNodesKeepLivenessExact) {
  Tensor x = realized_randn({256}), y = realized_randn({256});
  reset_stats();
  Tensor u = x * y;
  {
    Tensor v = x * y; // a second handle on u's node, released here
  }
  EXPECT_FALSE(u.is_realized());
  EXPECT_EQ(stats().nodes_dropped, 0);
  {
    Tensor a = exp(x) - 1, b = exp(x) - 1; // 3 nodes (exp, constant, sub) for both
  }
  EXPECT_EQ(stats().nodes_dropped, 3);
  auto us = u.to_vector<float>(), xs = x.to_vector<float>(), ys = y.to_vector<float>();
  for (size_t i = 0; i < us.size(); ++i) ASSERT_EQ(us[i], xs[i] * ys[i]);
}

TEST_F(FusionPatterns, ChainsPastTheParameterBudgetAreSplit) {
  // Recorded without evaluation, 2,000 steps of `acc * 0.5 + x` would be one kernel with 2,000
  // constants (each a parameter) and 4,000 ops: the planner splits it into kernels within the
  // parameter budget, and the values are those of one kernel (every op rounds to f32 either way).
  Tensor x = realized_randn({64});
  reset_stats();
  Tensor acc = x;
  for (int i = 0; i < 2000; ++i) acc = acc * 0.5f + x;
  eval(acc);
  const Stats s = stats();
  EXPECT_EQ(s.auto_flushes, 0);
  EXPECT_GT(s.kernels_run, 1);
  EXPECT_LE(s.kernels_run, 16);
  std::vector<float> xs = x.to_vector<float>(), got = acc.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = xs[i];
    for (int k = 0; k < 2000; ++k) want = want * 0.5f + xs[i];
    ASSERT_EQ(got[i], want) << i;
  }
}

TEST_F(FusionPatterns, SumOfManyTensorsIsSplitWithinTheParameterBudget) {
  std::vector<Tensor> ts;
  for (int i = 0; i < 700; ++i) ts.push_back(realized_randn({32}));
  reset_stats();
  Tensor acc = ts[0];
  for (size_t i = 1; i < ts.size(); ++i) acc = acc + ts[i]; // one input per op
  eval(acc);
  EXPECT_GT(stats().kernels_run, 1);
  std::vector<float> want = ts[0].to_vector<float>();
  for (size_t i = 1; i < ts.size(); ++i) {
    std::vector<float> v = ts[i].to_vector<float>();
    for (size_t j = 0; j < want.size(); ++j) want[j] += v[j];
  }
  expect_bits_equal(acc.to_vector<float>(), want);
}

TEST_F(FusionPatterns, MergedResultCountsOnceTowardsThePendingByteLimit) {
  Tensor x = realized_randn({4096}), y = realized_randn({4096}); // 16 KiB per result
  set_pending_limits(10000, 24 * 1024);
  reset_stats();
  Tensor u = x + y, v = x + y; // one pending result, held twice
  EXPECT_EQ(stats().auto_flushes, 0);
  Tensor w = x - y; // a second distinct result crosses the limit
  EXPECT_EQ(stats().auto_flushes, 1);
  EXPECT_TRUE(u.is_realized());
  EXPECT_TRUE(v.is_realized());
}

TEST_F(FusionPatterns, UserRequestForAnOpsOwnCastMakesItAUserValue) {
  Tensor xi = arange(100, DType::i32);
  eval(xi);
  reset_stats();
  Tensor s = xi + 1.5f;             // records an internal cast of xi to f32
  Tensor c = xi.astype(DType::f32); // the same cast, asked for by the user
  EXPECT_EQ(stats().ops_merged, 1);
  kiln::sync(); // computes every value a user holds: c included
  EXPECT_TRUE(c.is_realized());
  auto cs = c.to_vector<float>(), ss = s.to_vector<float>();
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(cs[i], float(i));
    ASSERT_EQ(ss[i], float(i) + 1.5f);
  }
}

// ---- in-place buffer reuse --------------------------------------------------------------------

TEST_F(FusionPatterns, ParameterUpdateLoopHoldsAllocatorUsageFlat) {
  const int n = 1024, steps = 10000;
  Tensor x = realized_randn({n}), g = realized_randn({n});
  const std::vector<float> x0 = x.to_vector<float>();
  for (int i = 0; i < 3; ++i) { // warm up (the first step takes x's buffer over)
    x = x * 0.9f + g;
    eval(x);
  }
  reset_stats();
  const int64_t in_use = stats().bytes_in_use;
  for (int i = 3; i < steps; ++i) {
    x = x * 0.9f + g;
    eval(x);
  }
  Stats s = stats();
  EXPECT_EQ(s.bytes_allocated, 0) << s;
  EXPECT_EQ(s.buffers_reused, steps - 3) << s;
  EXPECT_EQ(s.kernels_run, steps - 3) << s;
  EXPECT_EQ(s.bytes_in_use, in_use);
  EXPECT_EQ(s.peak_bytes_in_use, in_use);
  EXPECT_NE(last_plan().find("in place: out0"), std::string::npos) << last_plan();

  // The same loop computed eagerly from the same start: bit for bit the same values.
  set_eager(true);
  Tensor e = from_data(x0.data(), DType::f32, Shape{n});
  for (int i = 0; i < steps; ++i) e = e * 0.9f + g;
  set_eager(false);
  expect_bits_equal(x.to_vector<float>(), e.to_vector<float>());
  // And close to the fixed point 10 g.
  auto xs = x.to_vector<float>(), gs = g.to_vector<float>();
  for (int i = 0; i < n; ++i) ASSERT_NEAR(xs[i], 10 * gs[i], 1e-4 * (1 + std::fabs(10 * gs[i])));
}

TEST_F(FusionPatterns, MomentumStepUpdatesBothBuffersInPlace) {
  const int steps = 50;
  Tensor w = realized_randn({256, 256}), g = realized_randn({256, 256});
  Tensor v = zeros({256, 256});
  eval(v);
  const std::vector<float> w0 = w.to_vector<float>();
  reset_stats();
  for (int i = 0; i < steps; ++i) {
    v = v * 0.9f + g;
    w = w - v * 0.01f;
    eval(w, v);
  }
  Stats s = stats();
  EXPECT_EQ(s.kernels_run, steps) << last_plan(); // v joins w's kernel as a second output
  EXPECT_EQ(s.buffers_reused, 2 * steps) << s << "\n" << last_plan();
  EXPECT_EQ(s.bytes_allocated, 0) << s;

  set_eager(true);
  Tensor we = from_data(w0.data(), DType::f32, Shape{256, 256});
  Tensor ve = zeros({256, 256});
  for (int i = 0; i < steps; ++i) {
    ve = ve * 0.9f + g;
    we = we - ve * 0.01f;
  }
  set_eager(false);
  expect_bits_equal(w.to_vector<float>(), we.to_vector<float>());
  expect_bits_equal(v.to_vector<float>(), ve.to_vector<float>());
}

TEST_F(FusionPatterns, HeldAliasIsNotOverwritten) {
  Tensor x = realized_randn({1024}), g = realized_randn({1024});
  const auto before = x.to_vector<float>();
  Tensor keep = x; // the old value stays visible through this handle
  reset_stats();
  x = x * 0.9f + g;
  eval(x);
  EXPECT_EQ(stats().buffers_reused, 0);
  EXPECT_EQ(stats().bytes_allocated, 1024 * 4);
  expect_bits_equal(keep.to_vector<float>(), before);
  auto xs = x.to_vector<float>(), gs = g.to_vector<float>();
  for (int i = 0; i < 1024; ++i) ASSERT_FLOAT_EQ(xs[i], before[i] * 0.9f + gs[i]);
}

TEST_F(FusionPatterns, ViewHeldElsewhereBlocksReuse) {
  Tensor x = realized_randn({1024}), g = realized_randn({1024});
  const auto before = x.to_vector<float>();
  Tensor view = reshape(x, {32, 32}); // an alias of x's buffer
  reset_stats();
  x = x * 0.9f + g;
  eval(x);
  EXPECT_EQ(stats().buffers_reused, 0);
  expect_bits_equal(view.to_vector<float>(), before);
}

TEST_F(FusionPatterns, TransposedReadOfTheSameBufferIsNotDonated) {
  // 64x64 = 16 CPU blocks: writing in place would clobber elements other blocks still read.
  Tensor x = realized_randn({64, 64});
  const auto xs = x.to_vector<float>();
  reset_stats();
  x = x * 0.5f + transpose(x, 0, 1);
  eval(x);
  EXPECT_EQ(stats().buffers_reused, 0) << last_plan();
  auto out = x.to_vector<float>();
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j)
      ASSERT_FLOAT_EQ(out[i * 64 + j], xs[i * 64 + j] * 0.5f + xs[j * 64 + i]);
}

TEST_F(FusionPatterns, BroadcastReadOfTheSameBufferIsNotDonated) {
  Tensor x = realized_randn({64, 64});
  const auto xs = x.to_vector<float>();
  reset_stats();
  x = x - slice(x, 0, 0, 1, 1); // row 0 broadcast over every row
  eval(x);
  EXPECT_EQ(stats().buffers_reused, 0) << last_plan();
  auto out = x.to_vector<float>();
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) ASSERT_EQ(out[i * 64 + j], xs[i * 64 + j] - xs[j]);
}

TEST_F(FusionPatterns, BufferReadByALaterStepIsNotDonated) {
  Tensor x = realized_randn({64, 64});
  const auto xs = x.to_vector<float>();
  // y's kernel runs first; the reduction after it still reads x.
  Tensor y = x * 2;
  Tensor r = sum(x, {1});
  x = Tensor();
  reset_stats();
  eval(y, r);
  EXPECT_EQ(stats().buffers_reused, 0) << last_plan();
  auto ys = y.to_vector<float>(), rs = r.to_vector<float>();
  for (int i = 0; i < 64; ++i) {
    double row = 0;
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(ys[i * 64 + j], xs[i * 64 + j] * 2);
      row += xs[i * 64 + j];
    }
    ASSERT_NEAR(rs[i], row, 1e-4);
  }
}

TEST_F(FusionPatterns, LastReaderOfABufferTakesItOver) {
  Tensor x = realized_randn({64, 64});
  const auto xs = x.to_vector<float>();
  // Now the reduction runs first and y's kernel is x's last reader.
  Tensor r = sum(x, {1});
  Tensor y = x * 2;
  x = Tensor();
  reset_stats();
  eval(y, r);
  EXPECT_EQ(stats().buffers_reused, 1) << last_plan();
  EXPECT_EQ(stats().bytes_allocated, 64 * 4) << last_plan(); // only r's buffer
  auto ys = y.to_vector<float>(), rs = r.to_vector<float>();
  for (int i = 0; i < 64; ++i) {
    double row = 0;
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(ys[i * 64 + j], xs[i * 64 + j] * 2);
      row += xs[i * 64 + j];
    }
    ASSERT_NEAR(rs[i], row, 1e-4);
  }
}

TEST_F(FusionPatterns, DifferentSizeOrTypeIsNotDonated) {
  Tensor x = realized_randn({1024});
  reset_stats();
  Tensor h = x.astype(DType::f16); // half the bytes
  x = Tensor();
  eval(h);
  EXPECT_EQ(stats().buffers_reused, 0);
  Tensor y = realized_randn({1024});
  reset_stats();
  Tensor i = (y * 100).astype(DType::i32); // same size, reinterpreted per element: allowed
  y = Tensor();
  eval(i);
  EXPECT_EQ(stats().buffers_reused, 1) << last_plan();
}

namespace {

// How many values the last plan wrote for reason w (the step notes, compared as enums).
int written_for(kiln::detail::Why w) {
  int n = 0;
  for (const auto& st : kiln::detail::last_schedule()->steps)
    for (const auto& note : st.notes) n += note.written && note.reason == w;
  return n;
}

} // namespace

TEST_F(FusionPatterns, ALongChainIsCutInOnePlanningPass) {
  // A chain of 20,000 ops recorded without evaluation is cut every 512 ops before grouping
  // (split_long_chains, engine/split_chains.cpp). Found one cut per planning pass, it took 39
  // passes over the whole graph, and planning was quadratic (100,000 ops: 34 s;
  // bench/long_chain.cpp).
  Tensor x = realized_randn({4});
  std::vector<float> xs = x.to_vector<float>(), want = xs;
  Tensor acc = x;
  set_pending_limits(40000, int64_t(1) << 30); // (TearDown restores the defaults)
  for (int i = 0; i < 10000; ++i) {
    acc = acc * 0.5f + x;
    for (size_t e = 0; e < want.size(); ++e) want[e] = want[e] * 0.5f + xs[e];
  }
  reset_stats();
  eval(acc);
  EXPECT_EQ(stats().plan_retries, 0);
  EXPECT_GE(written_for(kiln::detail::Why::long_chain), 20000 / 512 - 1);
  EXPECT_GE(stats().kernels_run, 20000 / 512);
  EXPECT_LE(stats().kernels_run, 2 * 20000 / 512 + 1);
  std::vector<float> got = acc.to_vector<float>();
  for (size_t e = 0; e < want.size(); ++e)
    EXPECT_NEAR(got[e], want[e], 1e-5f * (1 + std::abs(want[e])));
}

// A recurrence through a matmul (an RNN's steps, its backward through time) is no long chain:
// a matmul reads its operands from memory, so each step's kernel starts there. Counted as one
// chain, an LSTM's training step was cut into extra kernels wherever 512 ops of its steps added
// up (bench/results/2026-11-26-h100-session23.md).
TEST_F(FusionPatterns, ARecurrenceThroughAMatmulIsNotALongChain) {
  constexpr int kSteps = 300; // 4 ops per step: 1,200 in a row
  Tensor w = realized_randn({8, 8}) * 0.3f, b = realized_randn({8}), h = realized_randn({4, 8});
  eval(w, b, h);
  set_pending_limits(40000, int64_t(1) << 30); // (TearDown restores the defaults)
  Tensor x = h;
  for (int i = 0; i < kSteps; ++i) x = tanh(matmul(x, w) + b) * 0.5f;
  reset_stats();
  eval(x);
  EXPECT_EQ(written_for(kiln::detail::Why::long_chain), 0) << last_plan();
  // one GEMM (or a kernel computing it, on a GPU) and one kernel per step
  EXPECT_LE(stats().kernels_run + stats().gemms_run, 2 * kSteps) << stats();
  std::vector<float> hv = h.to_vector<float>(), wv = w.to_vector<float>(),
                     bv = b.to_vector<float>(), got = x.to_vector<float>();
  for (int i = 0; i < kSteps; ++i) { // in double on the host
    std::vector<float> next(32);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 8; ++c) {
        double acc = 0;
        for (int k = 0; k < 8; ++k) acc += double(hv[r * 8 + k]) * wv[k * 8 + c];
        next[r * 8 + c] = static_cast<float>(std::tanh(acc + bv[c]) * 0.5);
      }
    hv = next;
  }
  for (int e = 0; e < 32; ++e) EXPECT_NEAR(got[e], hv[e], 1e-4) << e;
}

TEST_F(FusionPatterns, AChainReadingANewInputEveryOpIsCutInOnePlanningPass) {
  // `y = y * 0.5f + x[i]` with a distinct realized x[i] per op: one kernel's parameters hold a
  // few hundred inputs (kMaxParamFields), and the cuts are found before grouping. Found by the
  // builder one per planning pass, 40,000 such ops took 3.3 s to plan (bench/long_chain.cpp).
  // Without the loop detector: in a loop it confirms, every `* 0.5f` would read one shared
  // constant (engine/graph.h, loop_constant), and the kernels would need half the parameters.
  set_loop_flush(false);
  set_pending_limits(1 << 20, int64_t(1) << 30); // (TearDown restores the defaults)
  std::vector<Tensor> xs;
  for (int i = 0; i < 4000; ++i) xs.push_back(full({4}, double(i % 7)));
  eval(xs);
  Tensor y = ones({4});
  double want = 1;
  for (int i = 0; i < 4000; ++i) {
    y = y * 0.5f + xs[size_t(i)];
    want = float(float(want * 0.5f) + float(i % 7));
  }
  reset_stats();
  eval(y);
  EXPECT_EQ(stats().plan_retries, 0) << last_plan();
  EXPECT_GE(written_for(kiln::detail::Why::chain_inputs), 4000 * 4 / 1024 - 1) << last_plan();
  EXPECT_GE(stats().kernels_run, 4000 * 2 / 1024);
  EXPECT_LE(stats().kernels_run, 4000 * 4 / 512 + 1);
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, float(want));
}

// A step that reads the last step's value both directly and through views that undo each other
// (a [1, 6] reshaped to [6, 1] and transposed back): the builder computed a value once per
// chain of views, so the values of earlier steps were computed 2, 4, 8, ... times over in the
// kernel (16 steps recorded without evaluation took seconds to plan, found by kiln_fuzz --mode
// loops). The same elements read through either chain are one value (Builder::index_map).
TEST_F(FusionPatterns, ValuesReadThroughViewsThatUndoEachOtherAreComputedOnce) {
  constexpr int kSteps = 16;
  const Tensor x0 = realized_randn({1, 6});
  auto run = [&] {
    Tensor s = x0;
    for (int t = 0; t < kSteps; ++t)
      s = tanh(transpose(reshape(s * 0.5f, {6, 1}), 0, 1) + s); // 3 compute ops a step
    return s;
  };
  reset_stats();
  const Tensor lazy = run();
  eval(lazy);
  EXPECT_LE(stats().fused_ops, 3 * kSteps) << stats();
  set_eager(true);
  const Tensor eager = run();
  set_eager(false);
  EXPECT_EQ(lazy.to_vector<float>(), eager.to_vector<float>());
}

// A value read through more distinct index maps than kMaxIndexMaps by one kernel (here the 40
// column chunks of a pending value summed) is written once and read from memory.
TEST_F(FusionPatterns, AValueReadThroughManyIndexMapsIsWrittenOnce) {
  const Tensor a = realized_randn({2, 120}), b = realized_randn({2, 120});
  auto run = [&] {
    const std::vector<Tensor> parts = chunk(tanh(a * b), 40, 1);
    Tensor y = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) y = y + parts[i];
    return y;
  };
  const Tensor lazy = run();
  eval(lazy);
  EXPECT_EQ(written_for(kiln::detail::Why::many_index_maps), 1) << last_plan();
  set_eager(true);
  const Tensor eager = run();
  set_eager(false);
  EXPECT_EQ(lazy.to_vector<float>(), eager.to_vector<float>());
}

// A kernel past its reductions' budget (kMaxKernelReductions) is split where a value it computes
// is not written yet. Where every value being computed was an output already (a loop's flush
// cut inside its second softmax, so the row max and what read it were both requested), the
// split named nothing, and the kernel used its first value in place of the ninth reduction
// (found by kiln_fuzz --mode loops at seed 26199: the loop's state came out with its sign
// flipped). The innermost value that still shares the kernel gets one of its own.
TEST_F(FusionPatterns, AKernelPastItsReductionsWhoseValuesAreAllOutputsIsSplit) {
  const Tensor x = realized_randn({5, 2});
  auto run = [&] {
    Tensor y = x;
    for (int i = 0; i < 4; ++i) y = softmax(y, 1) - 0.25f; // 8 row reductions
    const Tensor m = max(y, {1}, true);                    // the ninth
    return std::vector<Tensor>{y - m, m, y};
  };
  const std::vector<Tensor> lazy = run();
  eval(lazy);
  set_eager(true);
  const std::vector<Tensor> eager = run();
  set_eager(false);
  for (size_t i = 0; i < lazy.size(); ++i)
    EXPECT_EQ(lazy[i].to_vector<float>(), eager[i].to_vector<float>()) << i << "\n" << last_plan();
}

// An accumulator that reads a new softmax every step, evaluated once after many steps: over the
// reductions' budget, the kernel writes the step's value it reads (holding none of the
// reductions already counted), so planning takes a round per step. Writing the innermost value
// took a round per node of each softmax (about 7 a step), each round grouping the whole graph
// again: 160 steps planned in 3.5 s (bench/results/2026-11-28-h100-session40.md).
TEST_F(FusionPatterns, AnAccumulatorOfSoftmaxesPlansInARoundPerStep) {
  const int steps = 24;
  const Tensor x = realized_randn({1, 8});
  auto run = [&] {
    Tensor acc = zeros({1, 8}, DType::f64), h = x;
    for (int t = 0; t < steps; ++t) {
      h = tanh(h * 0.75f + 0.125f); // the state: no reductions
      Tensor s = softmax(h, 1) - 0.25f;
      s = softmax(s, 1) - 0.25f; // 4 row reductions a step, read by the accumulator only
      acc = acc * 0.5 + cast(s, DType::f64) * s;
    }
    return acc;
  };
  reset_stats();
  const Tensor lazy = run();
  eval(lazy);
  const Stats st = stats();
  EXPECT_LE(st.plan_retries, steps + 2) << st;
  set_eager(true);
  const Tensor eager = run();
  set_eager(false);
  EXPECT_EQ(lazy.to_vector<double>(), eager.to_vector<double>()) << last_plan();
}

// Laziness, refcount-driven liveness and fusion, asserted through stats() and the plan dump.
#include "../test_device.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

using namespace kiln;

namespace {

struct Lazy : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    manual_seed(42);
  }
  void TearDown() override { set_eager(false); }
};

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The 9-op chain from the issue; only `o` survives the scope.
Tensor chain(const Tensor& x, const Tensor& y) {
  Tensor t = x * y + 1;
  t = tanh(t);
  Tensor s = sigmoid(t);
  return relu(s * x + (1 - s) * y);
}

double chain_ref(double x, double y) {
  double s = 1 / (1 + std::exp(-std::tanh(x * y + 1)));
  return std::max(0.0, s * x + (1 - s) * y);
}

} // namespace

TEST_F(Lazy, NothingRunsUntilAValueIsNeeded) {
  Tensor x = randn({64}), y = randn({64});
  reset_stats();
  Tensor z = tanh(x * y + 2);
  EXPECT_FALSE(z.is_realized());
  EXPECT_EQ(stats().kernels_run, 0);
  EXPECT_EQ(stats().buffers_materialized, 0);
  EXPECT_GE(stats().ops_recorded, 3);
  z.to_vector<float>();
  EXPECT_TRUE(z.is_realized());
  EXPECT_EQ(stats().kernels_run, 1);
}

TEST_F(Lazy, DeadWorkNeverRuns) {
  Tensor x = randn({1000});
  eval(x);
  reset_stats();
  {
    Tensor dead = exp(x) * 3 + sin(x); // nobody reads it
  }
  EXPECT_GE(stats().nodes_dropped, 4);
  Tensor live = x + 1;
  live.to_vector<float>();
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 1);
  EXPECT_EQ(last_plan().find("exp"), std::string::npos) << last_plan();
}

TEST_F(Lazy, NineOpChainIsOneKernelWritingOneBuffer) {
  Tensor x = randn({4096}), y = randn({4096});
  eval(x, y);
  reset_stats();
  Tensor o = chain(x, y);
  eval(o);
  Stats s = stats();
  EXPECT_EQ(s.kernels_run, 1);
  EXPECT_EQ(s.buffers_materialized, 1);
  EXPECT_EQ(s.max_fused_ops, 9);
  EXPECT_EQ(s.bytes_allocated, 4096 * 4);
  EXPECT_EQ(s.nodes_dropped, 0);
  std::string plan = last_plan();
  EXPECT_EQ(count(plan, "] kernel "), 1) << plan;
  EXPECT_EQ(count(plan, "out"), 1) << plan;
  auto xs = x.to_vector<float>(), ys = y.to_vector<float>(), os = o.to_vector<float>();
  for (size_t i = 0; i < os.size(); ++i)
    ASSERT_NEAR(os[i], chain_ref(xs[i], ys[i]), 1e-5 * (1 + std::fabs(os[i]))) << i;
}

struct WriteHeld { // every held value written, as before deferred held values (A/B)
  WriteHeld() { set_write_held_values(true); }
  ~WriteHeld() { set_write_held_values(false); }
};

TEST_F(Lazy, LiveIntermediateIsAnExtraOutputOfTheSameKernel) {
  WriteHeld all;
  Tensor x = randn({256}), y = randn({256});
  eval(x, y);
  reset_stats();
  Tensor t = tanh(x * y);    // kept by the user
  Tensor o = sigmoid(t) + y; // consumer fuses t
  eval(o);
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 2);
  EXPECT_TRUE(t.is_realized());
  std::string plan = last_plan();
  EXPECT_NE(plan.find("live handle"), std::string::npos) << plan;
  auto ts = t.to_vector<float>(), xs = x.to_vector<float>(), ys = y.to_vector<float>();
  for (size_t i = 0; i < ts.size(); ++i) ASSERT_NEAR(ts[i], std::tanh(xs[i] * ys[i]), 1e-6);
}

TEST_F(Lazy, MultiOutputWritesExactlyTheLiveOutputs) {
  WriteHeld all;
  Tensor x = randn({512});
  eval(x);
  reset_stats();
  Tensor a = exp(x), b = a * 2, c = b + a;
  Tensor d = c * c; // a, b, c, d all live
  b = Tensor();     // b dies: computed in registers only
  eval(d);
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 3); // a, c, d
  EXPECT_TRUE(a.is_realized());
  EXPECT_TRUE(c.is_realized());
}

TEST_F(Lazy, DiamondFusesIntoOneKernel) {
  Tensor x = randn({300});
  eval(x);
  reset_stats();
  Tensor s;
  {
    Tensor e = exp(x);
    s = (e + 1) * (e - 1) / e; // e used three times
  }
  eval(s);
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 1);
}

TEST_F(Lazy, ValueUsedByTwoKernelsIsWrittenOnce) {
  Tensor x = randn({8, 16});
  eval(x);
  reset_stats();
  Tensor r, c;
  {
    Tensor e = exp(x); // consumed by a column sum and by a kernel over another space
    c = sum(e, {0});
    r = transpose(e, 0, 1) * 2;
  }
  eval(r, c);
  std::string plan = last_plan();
  // e is written once and read by both kernels rather than recomputed in each.
  EXPECT_EQ(stats().kernels_run, 3) << plan;
  EXPECT_EQ(stats().buffers_materialized, 3) << plan;
  EXPECT_NE(plan.find("used by several kernels"), std::string::npos) << plan;
}

TEST_F(Lazy, ReductionAbsorbsItsProducers) {
  Tensor x = randn({32, 64});
  eval(x);
  reset_stats();
  Tensor m = mean(exp(x) * 2 + 1, {1});
  eval(m);
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 1);
  EXPECT_NE(last_plan().find("reduction"), std::string::npos);
}

TEST_F(Lazy, ViewsOfRealizedBuffersFeedKernelsWithoutCopies) {
  Tensor a = randn({16, 32}), b = randn({32, 16});
  eval(a, b);
  reset_stats();
  Tensor bt = transpose(b, 0, 1);
  EXPECT_TRUE(bt.is_realized()); // an alias, no work
  EXPECT_FALSE(bt.is_contiguous());
  Tensor o = a * bt + slice(a, 1, 0, 32, 1);
  eval(o);
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 1);
  EXPECT_EQ(stats().bytes_allocated, 16 * 32 * 4);
  EXPECT_NE(last_plan().find("strided"), std::string::npos) << last_plan();
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), ov = o.to_vector<float>();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 32; ++j)
      ASSERT_FLOAT_EQ(ov[i * 32 + j], av[i * 32 + j] * bv[j * 16 + i] + av[i * 32 + j]);
}

TEST_F(Lazy, ViewsInTheMiddleOfAChainAreIndexMaps) {
  Tensor a = randn({8, 12});
  eval(a);
  reset_stats();
  Tensor o = transpose(exp(a), 0, 1) + 1; // transpose of a pending value
  eval(o);
  EXPECT_EQ(stats().kernels_run, 1) << last_plan();
  EXPECT_EQ(stats().buffers_materialized, 1);
  auto av = a.to_vector<float>(), ov = o.to_vector<float>();
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 8; ++j) ASSERT_NEAR(ov[i * 8 + j], std::exp(av[j * 12 + i]) + 1, 1e-5);
}

TEST_F(Lazy, ReshapeOfABroadcastFallsBackToMaterializing) {
  Tensor row = randn({1, 6}), col = randn({4, 1});
  eval(row, col);
  Tensor o = reshape(row + col, {24}) * 2; // (4,6) broadcast then flattened
  auto ov = o.to_vector<float>();
  auto rv = row.to_vector<float>(), cv = col.to_vector<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) ASSERT_FLOAT_EQ(ov[i * 6 + j], (rv[j] + cv[i]) * 2);
}

TEST_F(Lazy, EagerModeIsBitIdenticalToLazy) {
  auto run = [](bool eager_mode) {
    set_eager(eager_mode);
    manual_seed(7);
    Tensor x = randn({37, 19}), y = rand({37, 19}, DType::f32);
    Tensor h = randn({19}, DType::f16);
    Tensor o = chain(x, y);
    Tensor p = softmax(o * 3, 1) + log_softmax(x, 0);
    Tensor q = (h.astype(DType::f32) * x + h.astype(DType::f32)).astype(DType::f16);
    Tensor r = sum(where(x > y, x, y * 2), {0}) + mean(gelu(x), {0});
    Tensor g = matmul(x, transpose(y, 0, 1));
    std::vector<float> out = p.to_vector<float>();
    for (float v : q.to_vector<float>()) out.push_back(v);
    for (float v : r.to_vector<float>()) out.push_back(v);
    for (float v : g.to_vector<float>()) out.push_back(v);
    for (float v : o.to_vector<float>()) out.push_back(v);
    set_eager(false);
    return out;
  };
  reset_stats();
  std::vector<float> lazy = run(false);
  int64_t lazy_kernels = stats().kernels_run;
  reset_stats();
  std::vector<float> eager_out = run(true);
  int64_t eager_kernels = stats().kernels_run;
  ASSERT_EQ(lazy.size(), eager_out.size());
  for (size_t i = 0; i < lazy.size(); ++i)
    ASSERT_EQ(std::memcmp(&lazy[i], &eager_out[i], sizeof(float)), 0) << i;
  EXPECT_GT(eager_kernels, 2 * lazy_kernels);
}

TEST_F(Lazy, EagerModeRunsOneKernelPerOp) {
  Tensor x = randn({10});
  eval(x);
  set_eager(true);
  reset_stats();
  Tensor y = exp(x) * 2 + 1; // 3 ops; scalar constants fuse into their op
  EXPECT_TRUE(y.is_realized());
  EXPECT_EQ(stats().kernels_run, 3);
}

TEST_F(Lazy, PendingGraphFlushesItselfAtTheNodeLimit) {
  set_pending_limits(50, int64_t(1) << 40);
  Tensor x = randn({16});
  eval(x);
  reset_stats();
  Tensor acc = x;
  for (int i = 0; i < 200; ++i) acc = acc * 0.5f + x;
  EXPECT_GT(stats().auto_flushes, 0);
  auto v = acc.to_vector<float>();
  auto xv = x.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(v[i], 2 * xv[i], 1e-5);
  set_pending_limits(10000, int64_t(1) << 30);
}

TEST_F(Lazy, PendingGraphFlushesItselfAtTheByteLimit) {
  set_pending_limits(100000, 64 * 1024);
  reset_stats();
  Tensor x = rand({4096}); // 16 KiB pending per op
  std::vector<Tensor> live;
  for (int i = 0; i < 8; ++i) live.push_back(x + static_cast<float>(i));
  EXPECT_GT(stats().auto_flushes, 0);
  EXPECT_LT(stats().peak_bytes_in_use, int64_t(1) << 30);
  set_pending_limits(10000, int64_t(1) << 30);
}

TEST_F(Lazy, LongLoopKeepsMemoryFlat) {
  Tensor w = randn({1024});
  eval(w);
  Tensor g = randn({1024});
  eval(g);
  for (int i = 0; i < 50; ++i) {
    w = w * 0.9f + g;
    eval(w);
  }
  int64_t in_use = stats().bytes_in_use;
  for (int i = 0; i < 500; ++i) {
    w = w * 0.9f + g;
    eval(w);
  }
  EXPECT_EQ(stats().bytes_in_use, in_use);
}

TEST_F(Lazy, FailedOpRecordsNothingAndPendingWorkStillRuns) {
  Tensor x = randn({3, 4}), y = randn({3, 4});
  Tensor p = x * y + 1; // pending
  reset_stats();
  EXPECT_THROW(matmul(p, randn({5, 6})), Error);
  int64_t recorded = stats().ops_recorded;
  EXPECT_THROW(add(p, randn({2, 2})), Error);
  EXPECT_THROW(reshape(p, {5}), Error);
  EXPECT_THROW(sum(p, {7}), Error);
  EXPECT_EQ(stats().ops_recorded, recorded + 1); // only the randn operand of add
  auto pv = p.to_vector<float>();
  auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < pv.size(); ++i) ASSERT_FLOAT_EQ(pv[i], xv[i] * yv[i] + 1);
}

TEST_F(Lazy, PlanDumpNamesKernelsAndReasons) {
  Tensor x = randn({4, 8});
  eval(x);
  Tensor s = softmax(x, 1);
  eval(s);
  std::string plan = last_plan();
  EXPECT_NE(plan.find("kiln_"), std::string::npos) << plan;
  EXPECT_NE(plan.find("why:"), std::string::npos) << plan;
  EXPECT_NE(plan.find("3 pass(es) over each row"), std::string::npos) << plan;
  EXPECT_NE(plan.find("max of v0 over its row (pass 0)"), std::string::npos) << plan;
  EXPECT_NE(plan.find("requested"), std::string::npos) << plan;
}

TEST_F(Lazy, MatmulOperandsAreMaterializedAndTransposesAreNotCopied) {
  // BLAS for every matmul: on CUDA this small one would be computed in a kernel by default.
  set_small_matmul(SmallMatmul::blas);
  Tensor a = randn({8, 4}), b = randn({8, 4});
  eval(a, b);
  reset_stats();
  Tensor c = matmul(a * 2, transpose(b, 0, 1));
  eval(c);
  set_small_matmul(SmallMatmul::on_gpu);
  EXPECT_EQ(stats().gemms_run, 1);
  EXPECT_EQ(stats().kernels_run, 1); // a*2; b^T goes to BLAS as a transpose flag
  EXPECT_NE(last_plan().find("GEMM operand"), std::string::npos) << last_plan();
}

TEST_F(Lazy, ToVectorOfBool) {
  Tensor m = arange(6) > 2;
  EXPECT_EQ(m.to_vector<bool>(), (std::vector<bool>{false, false, false, true, true, true}));
}

TEST_F(Lazy, IntermediatesNobodyHoldsDoNotCountTowardsTheByteLimit) {
  set_pending_limits(100000, 64 * 1024);
  Tensor x = rand({4096}); // 16 KiB
  eval(x);
  reset_stats();
  Tensor acc = x;
  for (int i = 0; i < 50; ++i) acc = tanh(acc * 0.5f + x); // 800 KiB of intermediates
  EXPECT_EQ(stats().auto_flushes, 0);
  eval(acc);
  EXPECT_EQ(stats().kernels_run, 1);
  set_pending_limits(10000, int64_t(1) << 30);
}

TEST_F(Lazy, ExpressionTemporariesDoNotTriggerTheByteLimit) {
  Tensor x = randn({4096}), y = randn({4096}); // 16 KiB each
  eval(x, y);
  // Room for the frontier of one expression (s*x waits while (1-s)*y is built: two values),
  // not for its nine intermediates.
  set_pending_limits(100000, 40 * 1024);
  reset_stats();
  Tensor o = chain(x, y);
  EXPECT_EQ(stats().auto_flushes, 0);
  eval(o);
  EXPECT_EQ(stats().kernels_run, 1);
  set_pending_limits(10000, int64_t(1) << 30);
}

namespace {

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

// Named temporaries of a chain (issue 20): held, but cheap to recompute from held values in
// memory, so eval(o) writes o alone; read later, they are computed then, bit for bit as eager.
TEST_F(Lazy, HeldTemporariesStayPendingUntilRead) {
  Tensor x = randn({4096}), y = randn({4096});
  eval(x, y);
  auto chain = [&](Tensor& t, Tensor& s) {
    t = x * y + 1.0f;
    s = tanh(t);
    Tensor u = sigmoid(s);
    return relu(u * x + (1.0f - u) * t);
  };
  Tensor t, s;
  Tensor o = chain(t, s);
  reset_stats();
  eval(o);
  EXPECT_EQ(stats().kernels_run, 1);
  EXPECT_EQ(stats().buffers_materialized, 1) << last_plan();
  EXPECT_FALSE(t.is_realized());
  EXPECT_FALSE(s.is_realized());
  EXPECT_NE(last_plan().find("stays pending until read"), std::string::npos) << last_plan();
  const std::vector<float> tv = t.to_vector<float>(), sv = s.to_vector<float>(),
                           ov = o.to_vector<float>();
  set_eager(true);
  Tensor te, se;
  const Tensor oe = chain(te, se);
  EXPECT_TRUE(bits_equal(ov, oe.to_vector<float>()));
  EXPECT_TRUE(bits_equal(tv, te.to_vector<float>()));
  EXPECT_TRUE(bits_equal(sv, se.to_vector<float>()));
  set_eager(false);
  // sync() computes what is still pending.
  Tensor t2 = x - y, o2 = t2 * 2.0f;
  eval(o2);
  EXPECT_FALSE(t2.is_realized());
  kiln::sync();
  EXPECT_TRUE(t2.is_realized());
}

TEST_F(Lazy, HeldValuesThatAreCostlyOrWouldPinFreedMemoryAreWritten) {
  Tensor x = randn({64, 64}), w = randn({64, 64});
  eval(x, w);
  Tensor r = sum(x, {1});         // a reduction: written
  Tensor m = matmul(x, w) * 2.0f; // a matmul's result: written
  Tensor o = r.reshape({64, 1}) + m;
  eval(o);
  EXPECT_TRUE(r.is_realized());
  EXPECT_TRUE(m.is_realized());
  Tensor e;
  {
    Tensor tmp = randn({256}); // in memory; its only handle dies below
    eval(tmp);
    e = exp(tmp);
  }
  Tensor o2 = e * 2.0f;
  eval(o2);
  EXPECT_TRUE(e.is_realized()) << "its input is not held: leaving it pending would pin it\n"
                               << last_plan();
  // A parameter update still takes the old value's buffer.
  Tensor p = randn({1024}), g = randn({1024});
  eval(p, g);
  reset_stats();
  p = p - g * 0.1f;
  eval(p);
  EXPECT_EQ(stats().buffers_reused, 1);
}

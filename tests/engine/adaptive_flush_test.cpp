// Adaptive batching (issue 5): the pending graph is flushed early while the device is idle and
// left to grow while it is busy. The policy reads the device's state through a probe; these
// tests substitute one that says idle or busy, so CI runs the policy on the CPU backend (which is
// synchronous: never idle, so the real probe never flushes it early, though a loop's flushes
// still come at the most bodies). The last test uses the real probe on the test device: on CUDA
// (gpu-check) it sees the GPU's actual state.
#include "../test_device.h"

#include "adaptive_flush_fixture.h"
#include "engine/adaptive_flush.h"
#include "engine/autograd.h"
#include "engine/cse.h"
#include "engine/graph.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace kiln;
using kiln::detail::DeviceState;
using namespace kiln_tests;

namespace {

TEST_F(AdaptiveFlush, IdleDeviceStartsALoopEarlyWithIdenticalResults) {
  Rnn r = Rnn::make(8);
  set_idle_flush(0);
  const std::vector<float> want = run_unevaluated(r, 100);

  set_idle_flush(kEvery);
  probe(DeviceState::idle);
  reset_stats();
  const std::vector<float> got = run_unevaluated(r, 100);
  EXPECT_EQ(got, want); // a cut writes a value that would have stayed in registers: same bits
  const Stats s = stats();
  EXPECT_EQ(s.auto_flushes, 0);
  EXPECT_EQ(s.busy_checks, 0);
  // Every kEvery pending nodes (~9 per step with the op's own constants): dozens of flushes.
  EXPECT_GE(s.idle_flushes, 100 * 7 / kEvery);
  EXPECT_EQ(s.flushes, s.idle_flushes + 1); // plus the read at the end
  ASSERT_FALSE(asked.empty());
  for (Device d : asked) EXPECT_EQ(d, default_device());
}

TEST_F(AdaptiveFlush, EarlyFlushesOfASteadyLoopRepeatTheirPlans) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::idle);
  for (int i = 0; i < 100; ++i) r.step(); // cut points cycle through the steps' phases
  eval(r.h);
  reset_stats();
  for (int i = 0; i < 200; ++i) r.step();
  eval(r.h);
  const Stats s = stats();
  EXPECT_GT(s.idle_flushes, 50);
  // A cut lands at one of a few phases of the step; each phase's plan was seen before.
  EXPECT_EQ(s.plan_misses, 1) << s; // the final eval's phase may be new
  EXPECT_GE(s.plan_hits, s.idle_flushes);
}

TEST_F(AdaptiveFlush, BusyDeviceLetsWorkPileUpUntilEval) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::busy);
  reset_stats();
  for (int i = 0; i < 50; ++i) r.step();
  Stats s = stats();
  EXPECT_EQ(s.flushes, 0);
  EXPECT_GE(s.busy_checks, 50 * 7 / kEvery);
  EXPECT_FALSE(r.h.is_realized());

  // Once the device is idle, the next check (within kEvery nodes) flushes all that piled up.
  const Tensor piled = r.h;
  probe(DeviceState::idle);
  for (int i = 0; i < 3; ++i) r.step();
  s = stats();
  EXPECT_EQ(s.idle_flushes, 1);
  EXPECT_EQ(s.flushes, 1);
  EXPECT_TRUE(piled.is_realized());
}

TEST_F(AdaptiveFlush, BusyDeviceStillRespectsThePendingLimits) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::busy);
  set_pending_limits(100, int64_t(1) << 30);
  reset_stats();
  for (int i = 0; i < 100; ++i) r.step();
  const Stats s = stats();
  set_pending_limits(10000, int64_t(1) << 30);
  EXPECT_GT(s.auto_flushes, 0);
  EXPECT_EQ(s.idle_flushes, 0);
}

TEST_F(AdaptiveFlush, LargeHeldValuesAreNotCutEarly) {
  // 2 MiB per value: a cut would write and re-read more than a launch costs.
  Tensor x = realized_randn({512 * 1024});
  probe(DeviceState::idle);
  reset_stats();
  Tensor acc = x;
  for (int i = 0; i < 40; ++i) acc = tanh(acc * 0.5f + x);
  EXPECT_EQ(stats().idle_flushes, 0);
  EXPECT_FALSE(acc.is_realized());
  eval(acc);
  EXPECT_EQ(stats().kernels_run, 1); // the whole chain fused, as without adaptive batching
  // The pending graph was walked a few times, not at every check: the interval doubles.
  EXPECT_LE(asked.size(), 4u);
}

TEST_F(AdaptiveFlush, EvalEveryStepLeavesNothingToFlushEarly) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::idle);
  reset_stats();
  for (int i = 0; i < 100; ++i) {
    r.step();
    eval(r.h);
  }
  EXPECT_EQ(stats().idle_flushes, 0);
  EXPECT_EQ(stats().flushes, 100);
  EXPECT_TRUE(asked.empty()); // fewer than kEvery nodes pend between evals: no check at all
}

TEST_F(AdaptiveFlush, HeldIntermediatesStayIntactAcrossEarlyFlushes) {
  Rnn r = Rnn::make(8);
  set_idle_flush(0);
  std::vector<std::vector<float>> want;
  {
    Rnn q = r;
    for (int i = 0; i < 30; ++i) {
      q.step();
      want.push_back(q.h.to_vector<float>());
    }
  }
  set_idle_flush(kEvery);
  probe(DeviceState::idle);
  std::vector<Tensor> held; // every step's h, read only at the end
  for (int i = 0; i < 30; ++i) {
    r.step();
    held.push_back(r.h);
  }
  EXPECT_GT(stats().idle_flushes, 0);
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i].to_vector<float>(), want[i]) << i;
}

TEST_F(AdaptiveFlush, ZeroTurnsItOffAndNegativeIsAnError) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::idle);
  set_idle_flush(0);
  EXPECT_EQ(idle_flush(), 0);
  reset_stats();
  for (int i = 0; i < 50; ++i) r.step();
  EXPECT_EQ(stats().flushes, 0);
  EXPECT_TRUE(asked.empty());
  try {
    set_idle_flush(-1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[set_idle_flush]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("-1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(idle_flush(), 0); // unchanged by the rejected call
}

// The real probe. On the CPU backend (synchronous) nothing is flushed early; on CUDA whether a
// check flushes depends on the GPU's state at that moment, so the test asserts only that checks
// happen and that results match the CPU backend.
TEST_F(AdaptiveFlush, RealDeviceProbe) {
  const Device dev = default_device();
  Rnn cpu_r;
  {
    set_default_device(Device::cpu());
    manual_seed(5);
    cpu_r = Rnn::make(16);
    set_default_device(dev);
  }
  Rnn r{cpu_r.x.to(dev), cpu_r.w.to(dev), cpu_r.b.to(dev), cpu_r.h.to(dev)};
  eval(r.x, r.w, r.b, r.h);
  set_idle_flush(0);
  set_default_device(Device::cpu());
  const std::vector<float> want = run_unevaluated(cpu_r, 200);
  set_default_device(dev);
  set_idle_flush(kEvery);
  reset_stats();
  const std::vector<float> got = run_unevaluated(r, 200);
  const Stats s = stats();
  if (dev.is_cpu()) {
    EXPECT_EQ(s.idle_flushes + s.busy_checks, 0);
    EXPECT_EQ(got, want);
  } else {
    EXPECT_GT(s.idle_flushes + s.busy_checks, 0) << s;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
  }
}

} // namespace

namespace {

// While a gradient history is recorded the device's idleness does not cut the graph (a cut
// would write every saved value and land anywhere in the step); once grad() has freed it,
// early flushes resume.
TEST_F(AdaptiveFlush, NoEarlyFlushWhileAGradientHistoryIsRecorded) {
  Rnn r = Rnn::make(8);
  r.w.requires_grad_();
  probe(DeviceState::idle);
  reset_stats();
  for (int i = 0; i < 30; ++i) r.step(); // ~270 nodes: 16 checks' worth
  EXPECT_EQ(stats().idle_flushes, 0);
  Tensor g = grad(sum(r.h), {r.w})[0];
  {
    NoGradGuard update; // after grad(), until the next evaluation: the step's update
    Tensor w = r.w;
    for (int i = 0; i < 30; ++i) w = w - g * 0.001f;
  }
  EXPECT_EQ(stats().idle_flushes, 0) << "no cut between a step's backward and its update";
  eval(g);
  r.h = r.h.detach();
  for (int i = 0; i < 30; ++i) r.step(); // w still requires grad: every step records
  EXPECT_EQ(stats().idle_flushes, 0);
  // Truncated: without a handle to the old state its history is unreachable and freed at once,
  // though the pending detach() view still reads the value.
  r.w = r.w.detach();
  r.h = r.h.detach();
  for (int i = 0; i < 30; ++i) r.step();
  EXPECT_GT(stats().idle_flushes, 0);
}

} // namespace

TEST_F(AdaptiveLoopFlush, AnIdleDeviceGetsEveryFlushFromTheSamePlans) {
  Rnn r = Rnn::make(8);
  set_idle_flush(0);
  const std::vector<float> want = run_unevaluated(r, 300);
  set_idle_flush(kLoopEvery);
  probe(DeviceState::idle);
  for (int i = 0; i < 100; ++i) r.step(); // finds the loop, plans its flushes
  reset_stats();
  for (int i = 0; i < 200; ++i) r.step();
  const Stats s = stats();
  EXPECT_EQ(s.plan_misses, 0) << s;
  EXPECT_GT(s.loop_flushes, 20) << s; // a few bodies each: the device was idle at every check
  EXPECT_EQ(s.flushes, s.loop_flushes);
  EXPECT_EQ(s.auto_flushes, 0);
  EXPECT_EQ(r.h.to_vector<float>(), want) << "same bits as one evaluation at the end";
  EXPECT_GT(detail::engine().loop.period(), 0);
}

TEST_F(AdaptiveLoopFlush, ABusyDeviceGetsTheLargestFlushesOnly) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::busy);
  for (int i = 0; i < 1000; ++i) r.step();
  reset_stats();
  for (int i = 0; i < 1200; ++i) r.step();
  const Stats s = stats();
  // 6 ops recorded per step (sigmoid(x) stays pending, shared): 256 / 6 -> 32 bodies a flush.
  EXPECT_GE(s.loop_flushes, 37) << s;
  EXPECT_LE(s.loop_flushes, 38) << s;
  EXPECT_EQ(s.idle_flushes, 0);
  EXPECT_EQ(s.auto_flushes, 0) << "cut before bodies, never by the pending limits";
  EXPECT_LE(s.plan_misses, 1) << s;
  EXPECT_LE(detail::engine().pending_nodes, 256 + 8);
}

// With the default interval a loop's bodies are too short for idle checks: each flush comes at
// the most bodies allowed, and the device is not asked anything (the real probe answers with a
// stream query).
TEST_F(AdaptiveLoopFlush, FlushesAtTheMostBodiesAskTheDeviceNothing) {
  Rnn r = Rnn::make(8);
  set_idle_flush(1024);
  probe(DeviceState::busy);
  for (int i = 0; i < 1000; ++i) r.step();
  reset_stats();
  asked.clear();
  for (int i = 0; i < 1200; ++i) r.step();
  const Stats s = stats();
  EXPECT_GE(s.loop_flushes, 37) << s;
  EXPECT_EQ(s.busy_checks, 0) << s;
  EXPECT_TRUE(asked.empty()) << asked.size() << " questions in " << s.loop_flushes << " flushes";
}

// The repetition is confirmed at whatever op of the step the detector happens to (here inside the
// step, not at its first op). Bodies still begin where the fewest values are held: before the
// step's first op, where its temporaries are gone and only the state (h, c) is written.
TEST_F(AdaptiveLoopFlush, BodiesBeginWhereOnlyTheLoopStateIsHeld) {
  const Tensor xs = realized_randn({512, 8}), w = realized_randn({1, 8}),
               u = realized_randn({1, 8});
  const Tensor h0 = realized_randn({1, 8}), c0 = realized_randn({1, 8});
  Tensor h = h0, c = c0;
  probe(DeviceState::busy);
  int t = 0;
  auto step = [&] {
    Tensor x = slice(xs, 0, t++ % 512, 1); // temporaries, held until the step's end
    Tensor a = tanh(h * w + x);
    Tensor b = sigmoid(c + u);
    Tensor g = a * b;
    c = c * b + g;
    h = tanh(c) * a;
  };
  for (int i = 0; i < 100; ++i) step();
  reset_stats();
  for (int i = 0; i < 512; ++i) step();
  const Stats s = stats();
  EXPECT_GE(s.loop_flushes, 8) << s;
  EXPECT_EQ(s.buffers_materialized, 2 * s.loop_flushes) << "h and c only: " << s;
  const std::vector<float> got = h.to_vector<float>();
  set_idle_flush(0); // the same steps evaluated once, at the end
  h = h0, c = c0, t = 0;
  for (int i = 0; i < 612; ++i) step();
  EXPECT_EQ(h.to_vector<float>(), got);
}

// A step whose first op casts its bf16 state first (an internal node recorded before the op's
// own): the cut before the body's first op call leaves the cast pending with it, not written.
TEST_F(AdaptiveLoopFlush, TheCutKeepsAnOpCallsInternalNodesWithIt) {
  const Tensor w = realized_randn({1, 8});
  Tensor h = realized_randn({1, 8}).astype(DType::bf16);
  eval(h);
  probe(DeviceState::busy);
  auto step = [&] { h = (tanh(h * w) + 1.0f).astype(DType::bf16); };
  for (int i = 0; i < 100; ++i) step();
  reset_stats();
  for (int i = 0; i < 512; ++i) step();
  const Stats s = stats();
  EXPECT_GE(s.loop_flushes, 8) << s;
  EXPECT_EQ(s.buffers_materialized, s.loop_flushes) << "h only: " << s;
}

// A loop that keeps every step's output: the kept values count alike before every op of the
// step (only those recorded within one body before it are counted), so the bodies still begin
// at the step's first op and a flush writes the kept outputs and nothing else.
TEST_F(AdaptiveLoopFlush, KeptOutputsDoNotMoveTheBodiesStart) {
  const Tensor u = realized_randn({1, 8});
  Tensor h = realized_randn({1, 8});
  std::vector<Tensor> outs;
  probe(DeviceState::busy);
  auto step = [&] {
    Tensor a = tanh(h * u);
    h = a + h * u * 2.0f;
    outs.push_back(h);
  };
  for (int i = 0; i < 100; ++i) step();
  kiln::sync();
  reset_stats();
  for (int i = 0; i < 512; ++i) step();
  const Stats s = stats();
  EXPECT_GE(s.loop_flushes, 8) << s;
  EXPECT_LE(s.buffers_materialized, 512) << "at most one per step, the kept h: " << s;
}

// Each loop flush leaves the next body's first op pending, so the CSE table never empties (where
// its buckets were reset): its tombstones are dropped when they outnumber the entries instead,
// or every record would probe past more of them.
TEST_F(AdaptiveLoopFlush, ALoopThatNeverEmptiesTheCseTableDropsItsTombstones) {
  const Tensor w = realized_randn({1, 8}), u = realized_randn({1, 8});
  Tensor h = realized_randn({1, 8}), c = realized_randn({1, 8});
  probe(DeviceState::busy);
  size_t most_erased = 0, most_entries = 0;
  for (int i = 0; i < 3000; ++i) {
    Tensor a = tanh(h * w); // the body's first op: pending after every flush
    c = c * sigmoid(c + u) + a;
    h = tanh(c) * a;
    most_erased = std::max(most_erased, detail::cse_table_erased());
    most_entries = std::max(most_entries, detail::cse_table_entries());
  }
  EXPECT_GT(stats().loop_flushes, 50) << stats();
  EXPECT_LE(most_erased, 4 * most_entries + 257) << "tombstones since the last reset";
}

// Once the detector has confirmed a loop, ops of kinds that never merged skip the CSE table: a
// loop like this one never merges anything, and the table's hash, probe and erase were ~8% of
// its recording's host instructions. Its pending nodes stay out of the table.
TEST_F(AdaptiveLoopFlush, AConfirmedLoopThatNeverMergesSkipsTheCseTable) {
  // Rnn::step would merge: its sigmoid(x) reads nothing that changes.
  const Tensor w = realized_randn({8, 8}, 0.3f), b = realized_randn({8}, 0.1f);
  Tensor h = realized_randn({4, 8});
  probe(DeviceState::busy);
  detail::cse_forget_merged_kinds();
  auto step = [&] { h = tanh(matmul(h, w) + b) * 0.5f + h; };
  for (int i = 0; i < 100; ++i) step();
  ASSERT_GT(detail::engine().loop.period(), 0);
  reset_stats();
  for (int i = 0; i < 50; ++i) step();
  EXPECT_GT(detail::engine().pending_nodes, 10);
  EXPECT_EQ(detail::cse_table_entries(), 0u) << "pending nodes in the table";
  EXPECT_EQ(stats().ops_merged, 0) << stats();
  detail::engine().loop_skips_cse = false; // the probes' A/B switch
  for (int i = 0; i < 10; ++i) step();
  EXPECT_GT(detail::cse_table_entries(), 0u);
}

// Both sides of a merge have the same kind: once an op merged in the loop's first bodies, its
// kind keeps going through the table, and every later step merges it as before.
TEST_F(AdaptiveLoopFlush, OpsThatMergedBeforeTheLoopWasConfirmedKeepMerging) {
  const Tensor w = realized_randn({4, 4});
  Tensor y = realized_randn({4, 4});
  probe(DeviceState::busy);
  detail::cse_forget_merged_kinds();
  auto step = [&] {
    Tensor a = tanh(w * y);
    Tensor b = tanh(w * y); // the same op on the same inputs: CSE hands out a's nodes
    y = a - b * 0.5f;
  };
  for (int i = 0; i < 100; ++i) step();
  ASSERT_GT(detail::engine().loop.period(), 0);
  reset_stats();
  for (int i = 0; i < 50; ++i) step();
  EXPECT_EQ(stats().ops_merged, 100) << "w * y and tanh, every step: " << stats();
}

// A value that repeats only after the loop was confirmed is not merged (computed twice), and
// the values are those of the loop recorded with CSE throughout (loop flushes off).
TEST_F(AdaptiveLoopFlush, AnOpThatFirstRepeatsInAConfirmedLoopGivesTheSameValues) {
  auto run = [](bool loops) {
    set_loop_flush(loops);
    detail::cse_forget_merged_kinds();
    manual_seed(7);
    const Tensor w = realized_randn({4, 4});
    Tensor y = realized_randn({4, 4});
    for (int i = 0; i < 300; ++i) {
      Tensor a = sigmoid(w + y);
      // From step 200 on, the same op on the same inputs once more.
      Tensor b = i >= 200 ? sigmoid(w + y) : a * 1.0f;
      y = a * 0.5f + b * 0.25f;
    }
    return std::pair{y.to_vector<float>(), stats().ops_merged};
  };
  probe(DeviceState::busy);
  reset_stats();
  auto [loop_values, loop_merged] = run(true);
  reset_stats();
  auto [cse_values, cse_merged] = run(false);
  EXPECT_EQ(loop_values, cse_values);
  EXPECT_EQ(cse_merged, 200) << "w + y and sigmoid in each of the last 100 steps";
  EXPECT_LT(loop_merged, cse_merged) << "the confirmed loop skipped the table for them";
}

// Reads after any number of bodies (the device busy, so nothing was flushed early): the whole
// bodies pending are flushed in chunks of a power of two of bodies, so after some reads (a plan
// per chunk size and remainder; with 32 bodies a flush, 4-5 of reads 80-120 still planned, 1 of
// reads 180-220) every read finds its plans cached, where a plan per number of bodies would miss at
// almost every read. Same bits as the loop read without loop flushes.
TEST_F(AdaptiveLoopFlush, ReadsAfterAnyNumberOfBodiesReuseAFewPlans) {
  auto run = [](Rnn r, bool loops) {
    set_loop_flush(loops);
    std::mt19937 gen(5);
    std::vector<float> all;
    Stats warm;
    for (int read = 0; read < 220; ++read) {
      if (read == 180) {
        warm = stats();
        reset_stats();
      }
      const int bodies = std::uniform_int_distribution<int>(1, 200)(gen);
      for (int i = 0; i < bodies; ++i) r.step();
      const std::vector<float> h = r.h.to_vector<float>();
      all.insert(all.end(), h.begin(), h.end());
    }
    return std::pair{all, stats()};
  };
  Rnn r = Rnn::make(8);
  probe(DeviceState::busy);
  for (int i = 0; i < 50; ++i) r.step(); // finds the loop
  eval(r.h);
  reset_stats();
  const auto [want, counts_off] = run(r, false);
  reset_stats();
  const auto [got, s] = run(r, true);
  EXPECT_EQ(got, want);
  EXPECT_LE(s.plan_misses, 4) << s; // the last 40 reads
  EXPECT_GE(counts_off.plan_misses, 10) << counts_off;
  EXPECT_EQ(s.auto_flushes, 0) << s;
}

// A loop that evaluates every step, or every third: its reads find their plans cached, and are
// not cut at the body starts the detector found.
TEST_F(AdaptiveLoopFlush, ALoopWithAnEvalEveryFewStepsIsNotCut) {
  for (int every : {1, 3}) {
    Rnn r = Rnn::make(8);
    probe(DeviceState::busy);
    for (int i = 0; i < 60; ++i) { // reads at the same place in the loop as below
      r.step();
      if (i % every == every - 1) eval(r.h);
    }
    reset_stats();
    for (int i = 0; i < 60 * every; ++i) {
      r.step();
      if (i % every == every - 1) eval(r.h);
    }
    EXPECT_EQ(stats().flushes, 60) << every << ": " << stats();
    EXPECT_EQ(stats().plan_misses, 0) << every << ": " << stats();
    EXPECT_GT(detail::engine().loop.period(), 0) << every;
  }
}

// An LSTM cell evaluated every step, reading row i % 8 of a sequence: every eighth read (row 0,
// offset 0) keys apart from the others. The bodies begin at the step's first op, so a read finds
// no whole body pending before the current one and is never cut: one flush per step, every plan
// cached.
TEST_F(AdaptiveLoopFlush, AReadThatRecursIsPlannedWhole) {
  Tensor seq = realized_randn({8, 8}), wx = realized_randn({8, 32}, 0.3f);
  Tensor wh = realized_randn({8, 32}, 0.3f), bias = realized_randn({32}, 0.1f);
  Tensor h = realized_randn({1, 8}), c = realized_randn({1, 8});
  probe(DeviceState::busy);
  auto step = [&](int i) {
    Tensor gates = matmul(slice(seq, 0, i % 8, i % 8 + 1), wx) + matmul(h, wh) + bias;
    std::vector<Tensor> g = chunk(gates, 4, 1);
    c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    h = sigmoid(g[3]) * tanh(c);
    eval(h, c);
  };
  for (int i = 0; i < 64; ++i) step(i);
  reset_stats();
  for (int i = 0; i < 64; ++i) step(i);
  EXPECT_EQ(stats().flushes, 64) << stats();
  EXPECT_EQ(stats().plan_misses, 0) << stats();
}

// A loop without eval reading row t % 64 of a sequence, read every 37 steps, the device idle or
// busy at random (so flushes of 1, 2, 4, ... bodies start anywhere in the sequence, as a GPU's
// timing makes them): the rows' offsets inside a flush (where it wraps around the sequence)
// differ from flush to flush, and the plans do not depend on them (each row, a realized view of
// the sequence, has a slot of its own). Same bits as without loop flushes.
TEST_F(AdaptiveLoopFlush, RowsOfASequenceAtAnyOffsetsKeepThePlans) {
  Tensor seq = realized_randn({64, 8}), w = realized_randn({8, 8}, 0.3f);
  auto run = [&](bool loops) {
    set_loop_flush(loops);
    Tensor h = seq * 0.0f;
    h = slice(h, 0, 0, 1);
    eval(h);
    std::vector<float> all;
    int t = 0;
    for (int read = 0; read < 26; ++read) {
      if (read == 10) reset_stats();
      for (int i = 0; i < 37; ++i, ++t) h = tanh(matmul(h, w) + slice(seq, 0, t % 64, t % 64 + 1));
      const std::vector<float> v = h.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    return std::pair{all, stats()};
  };
  uint64_t bits = 88172645463325252ull; // xorshift
  detail::set_device_probe([&bits](Device) {
    bits ^= bits << 13, bits ^= bits >> 7, bits ^= bits << 17;
    return bits % 2 ? DeviceState::idle : DeviceState::busy;
  });
  const auto [want, off] = run(false);
  const auto [got, s] = run(true);
  EXPECT_EQ(got, want);
  EXPECT_GE(s.loop_flushes, 8) << s;
  EXPECT_LE(s.plan_misses, 4) << s; // the last 16 reads
}

TEST_F(AdaptiveLoopFlush, TurnedOffTheNodeCountsDecide) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::idle);
  set_loop_flush(false);
  EXPECT_FALSE(loop_flush());
  reset_stats();
  for (int i = 0; i < 100; ++i) r.step();
  EXPECT_EQ(stats().loop_flushes, 0);
  EXPECT_GE(stats().idle_flushes, 100 * 6 / kEvery - 1);
}

TEST_F(AdaptiveLoopFlush, ABodyThatRepeatsAnOpWithinItIsFoundWhole) {
  // Per step: tanh, mul, tanh, add: the two tanh ops look alike, the body is all four.
  Tensor y = realized_randn({4, 4}), x = realized_randn({4, 4});
  probe(DeviceState::busy); // no flush: the detector's view alone
  for (int i = 0; i < 20; ++i) {
    Tensor a = tanh(y);
    Tensor b = a * x;
    y = tanh(b) + a;
  }
  EXPECT_EQ(detail::engine().loop.period(), 4);
}

// The CPU backend (synchronous) is never idle, so it is never flushed early, but a loop's
// flushes still come at the most bodies: without them its pending graph grew to the node limit
// (10,000 nodes) and each of those flushes was planned afresh (the seed loop at d = 4 took 8.7
// us a step without eval against 2.7 with an eval every step,
// bench/results/2026-11-27-cpu-session31.md).
TEST_F(AdaptiveLoopFlush, ASynchronousDeviceFlushesALoopAtTheMostBodiesOnly) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::synchronous);
  set_idle_flush(1); // idle checks at every power of two of bodies: all answered "synchronous"
  for (int i = 0; i < 200; ++i) r.step();
  reset_stats();
  for (int i = 0; i < 1200; ++i) r.step();
  const Stats s = stats();
  EXPECT_GE(s.loop_flushes, 37) << s;
  EXPECT_EQ(s.flushes, s.loop_flushes) << s;
  EXPECT_EQ(s.idle_flushes + s.busy_checks, 0) << s;
  EXPECT_EQ(s.plan_misses, 0) << s;
  EXPECT_LE(detail::engine().pending_nodes, 256 + 8);
}

// ... nor cut at a read: an unrolled expression (the same few ops over i) fuses more evaluated
// whole than cut into chunks of bodies, and the CPU's plans build no CUDA graphs.
TEST_F(AdaptiveLoopFlush, AReadOnASynchronousDeviceIsNotCutIntoBodies) {
  probe(DeviceState::synchronous);
  std::vector<Tensor> xs;
  for (int i = 0; i < 40; ++i) xs.push_back(realized_randn({8, 8}));
  reset_stats();
  Tensor acc = tanh(xs[0]);
  for (int i = 1; i < 40; ++i) acc = acc + tanh(xs[i]) * float(i);
  eval(acc);
  EXPECT_EQ(stats().flushes, 1) << stats();
  EXPECT_EQ(stats().kernels_run, 1) << stats();
}

// Issue 20: a loop without eval runs in bounded memory however long it goes, whatever the
// device's state (the loop's flushes free each step's temporaries).
TEST_F(AdaptiveLoopFlush, MemoryStaysFlatOverALongLoop) {
  Rnn r = Rnn::make(8);
  probe(DeviceState::busy);
  for (int i = 0; i < 2000; ++i) r.step();
  reset_stats();
  const int64_t in_use = stats().bytes_in_use;
  for (int i = 0; i < 30000; ++i) r.step();
  const Stats s = stats();
  EXPECT_GE(s.loop_flushes, 100);
  EXPECT_EQ(s.auto_flushes, 0);
  EXPECT_LE(s.bytes_in_use, in_use + 4096) << s;
  EXPECT_LE(s.peak_bytes_in_use, in_use + (int64_t(1) << 20)) << s;
  EXPECT_LE(detail::engine().pending_nodes, 256 + 8);
}

// Values a loop keeps (every step's h), read only after it: right across the loop's flushes.
TEST_F(AdaptiveLoopFlush, HeldValuesReadAfterTheLoopAreRight) {
  Rnn r = Rnn::make(8);
  std::vector<std::vector<float>> want;
  {
    set_idle_flush(0);
    Rnn q = r;
    for (int i = 0; i < 200; ++i) {
      q.step();
      want.push_back(q.h.to_vector<float>());
    }
    set_idle_flush(kLoopEvery);
  }
  probe(DeviceState::idle);
  reset_stats();
  std::vector<Tensor> held;
  for (int i = 0; i < 200; ++i) {
    r.step();
    held.push_back(r.h);
  }
  EXPECT_GT(stats().loop_flushes, 10) << stats();
  for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i].to_vector<float>(), want[i]) << i;
}

// A gradient history stops the loop detector only while it is being recorded (made since the last
// evaluation). One kept from before, as a loss pushed to a list with its history, leaves later
// loops (an evaluation pass, say) free to be found and cut.
TEST_F(AdaptiveLoopFlush, AHistoryKeptOnAComputedValueLeavesLoopsAlone) {
  Rnn r = Rnn::make(8);
  Tensor w = realized_randn({8});
  w.requires_grad_();
  Tensor kept_loss = sum(r.x * w); // a history, computed and kept
  eval(kept_loss);
  ASSERT_GT(detail::live_grad_records(), 0);
  EXPECT_FALSE(detail::history_recording());
  probe(DeviceState::busy);
  for (int i = 0; i < 1000; ++i) r.step();
  reset_stats();
  for (int i = 0; i < 1200; ++i) r.step();
  EXPECT_GE(stats().loop_flushes, 37) << stats();
  EXPECT_LE(stats().plan_misses, 1) << stats();

  // A history recorded since the last evaluation does stop it, until the next evaluation.
  Tensor pending_loss = sum(r.x * w);
  EXPECT_TRUE(detail::history_recording());
  reset_stats();
  for (int i = 0; i < 1200; ++i) r.step();
  EXPECT_EQ(stats().loop_flushes, 0) << stats();
  eval(pending_loss);
  EXPECT_FALSE(detail::history_recording());
  const float g = grad(kept_loss, {w})[0].to_vector<float>()[0];
  EXPECT_EQ(g, sum(slice(r.x, 1, 0, 1)).item<float>()) << "the kept history still differentiates";
}

// A confirmed loop's op calls are recorded from the body before where their operands are alike
// (engine/loop_template.h). Each test runs the same loop with templates and without
// (EngineState::loop_template, KILN_LOOP_TEMPLATE's switch): the same bits, dtypes, kernels and
// plans, and the steps that differ from the body before take the front-ends' path.
#include "adaptive_flush_fixture.h"

#include "engine/cse.h"
#include "engine/kernel_observer.h"
#include "engine/loop_template.h"
#include "ir/kernel_key.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln_tests;

namespace {

struct LoopTemplate : AdaptiveLoopFlush {
  void TearDown() override {
    detail::engine().loop_template = true;
    AdaptiveLoopFlush::TearDown();
  }

  // What one run of a loop left: its result's values and dtype, its stats, and the kernels run.
  struct Run {
    std::vector<double> values;
    DType dtype = DType::f32;
    Stats stats;
    std::set<std::string> kernels;
  };

  // `loop` records `steps` steps from seed 7 and returns the value read afterwards.
  static Run run(bool templates, const std::function<Tensor()>& loop) {
    set_loop_flush(true); // the loop detector and CSE's merged kinds start afresh in both runs
    detail::cse_forget_merged_kinds();
    detail::clear_loop_template();
    detail::engine().loop_template = templates;
    const int64_t plans = detail::engine().max_plans; // each run plans afresh
    set_plan_cache_limit(0);
    set_plan_cache_limit(plans);
    Run r;
    detail::set_kernel_observer(
        [&r](const detail::FusedKernel& k) { r.kernels.insert(detail::kernel_key(k)); });
    manual_seed(7);
    reset_stats();
    const Tensor out = loop();
    r.dtype = out.dtype();
    r.values = cast(out, DType::f64).to_vector<double>();
    r.stats = stats();
    detail::set_kernel_observer({});
    return r;
  }

  // The loop with templates and without: the same in everything but the recording.
  static Run expect_same_with_templates(const std::function<Tensor()>& loop) {
    const Run with = run(true, loop);
    const Run without = run(false, loop);
    EXPECT_EQ(with.values, without.values);
    EXPECT_EQ(with.dtype, without.dtype);
    EXPECT_EQ(with.kernels, without.kernels);
    const Stats &a = with.stats, &b = without.stats;
    EXPECT_EQ(b.ops_from_template, 0) << b;
    for (auto field : {&Stats::ops_recorded, &Stats::ops_merged, &Stats::flushes,
                       &Stats::loop_flushes, &Stats::plan_misses, &Stats::kernels_run,
                       &Stats::buffers_materialized, &Stats::nodes_fused, &Stats::fused_ops})
      EXPECT_EQ(a.*field, b.*field) << "with templates: " << a << "\nwithout: " << b;
    return with;
  }
};

// An LSTM cell (matmuls, a column chunk of pending gates, sigmoid, tanh) and a loop of scalar
// ops of both orders, comparisons and where: nearly every op call after the loop is found comes
// from the template, to the same bits, kernels and plans.
TEST_F(LoopTemplate, RecordsALoopsOpsAsItsFrontEndsDo) {
  probe(DeviceState::busy);
  const Run lstm = expect_same_with_templates([] {
    const Tensor wx = realized_randn({8, 32}, 0.3f), wh = realized_randn({8, 32}, 0.3f),
                 b = realized_randn({32}, 0.1f), x = realized_randn({2, 8});
    Tensor h = realized_randn({2, 8}), c = realized_randn({2, 8});
    for (int i = 0; i < 300; ++i) {
      const Tensor gates = matmul(x, wx) + matmul(h, wh) + b;
      const std::vector<Tensor> g = chunk(gates, 4, 1);
      c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      h = sigmoid(g[3]) * tanh(c);
    }
    return h + c;
  });
  EXPECT_GE(lstm.stats.ops_from_template, lstm.stats.ops_recorded * 4 / 5) << lstm.stats;

  const Run scalars = expect_same_with_templates([] {
    Tensor h = realized_randn({3, 5});
    Tensor n = full({3, 5}, int64_t{3}, DType::i64);
    for (int i = 0; i < 300; ++i) {
      h = rsub(h * 0.5f, 0.25f) + h;
      h = where(h > 0.0f, h, h * 0.1f) - 0.125f;
      n = (n * 3 + 1) - (n * 2 + 1); // integer scalars on an integer tensor: no casts, n stays
    }
    return h + cast(n, DType::f32);
  });
  EXPECT_GE(scalars.stats.ops_from_template, scalars.stats.ops_recorded / 2) << scalars.stats;
}

// A scalar's value is each call's own, though the node is the template's: a loop whose scalar
// changes every step.
TEST_F(LoopTemplate, EachCallsScalarValueIsItsOwn) {
  probe(DeviceState::busy);
  const Run r = expect_same_with_templates([] {
    Tensor h = realized_randn({4, 4});
    for (int i = 0; i < 300; ++i) h = tanh(h * (1.0f + 0.001f * float(i))) + float(i % 7);
    return h;
  });
  EXPECT_GT(r.stats.ops_from_template, 0) << r.stats;
}

// A step reading row t of a sequence (a slice at a new offset every step, as an RNN's input):
// the matmul of that row reads it in place at any offset, so it comes from the template too.
TEST_F(LoopTemplate, AMatmulOfARowAtANewOffsetEachStepComesFromTheTemplate) {
  probe(DeviceState::busy);
  constexpr int kSteps = 200;
  const Run r = expect_same_with_templates([] {
    const Tensor seq = realized_randn({kSteps, 8}), w = realized_randn({8, 8}, 0.3f);
    Tensor h = realized_randn({1, 8});
    for (int i = 0; i < kSteps; ++i) h = tanh(matmul(slice(seq, 0, i, i + 1), w) + h);
    return h;
  });
  // Each step: the row (a realized view, not templated), the matmul, the add and tanh; the
  // loop is found within its first steps.
  EXPECT_GE(r.stats.ops_from_template, 3 * (kSteps - 10)) << r.stats;
}

// Once in a while an op call's operands differ from the body before: a double operand, a
// broadcast one, a scalar of another kind, a slice at another offset, a transposed matmul
// operand. Each is recorded as its front-end records it (its own dtype and shape), not as the
// template's.
TEST_F(LoopTemplate, AnOpCallUnlikeTheBodyBeforeIsRecordedByItsFrontEnd) {
  probe(DeviceState::busy);
  const Run r = expect_same_with_templates([] {
    const Tensor w = realized_randn({6, 6}, 0.3f), seq = realized_randn({8, 6});
    const Tensor wide = cast(realized_randn({3, 6}), DType::f64), row = realized_randn({1, 6});
    Tensor h = realized_randn({3, 6}), acc = zeros({3, 6}, DType::f64);
    Tensor n = full({3, 6}, int64_t{2}, DType::i64);
    for (int i = 0; i < 240; ++i) {
      const bool odd = i % 37 == 36;
      const Tensor x = slice(seq + 0.0f, 0, odd ? 2 : 0, odd ? 5 : 3); // a pending slice
      h = tanh(matmul(h, odd ? transpose(w, 0, 1) : w) + x);
      const Tensor d = h + (odd ? wide : cast(h, DType::f64)); // f32 + f64 once: an f64 add
      acc = acc + d;
      h = h * (odd ? row : h);                // a broadcast operand once
      const Tensor m = odd ? n * 0.5 : n * 2; // a float scalar once: an f32 result
      EXPECT_EQ(m.dtype(), odd ? DType::f32 : DType::i64);
    }
    return acc + cast(h, DType::f64);
  });
  EXPECT_GT(r.stats.ops_from_template, r.stats.ops_recorded / 6) << r.stats;
}

// A parameter that requires grad joins a confirmed loop's op calls: those calls record history,
// and grad gives the derivative the front-ends' recording gives.
TEST_F(LoopTemplate, AnOperandThatRequiresGradRecordsHistory) {
  probe(DeviceState::busy);
  auto loop = [] {
    Tensor w = realized_randn({4, 4}, 0.3f);
    Tensor h = realized_randn({2, 4});
    for (int i = 0; i < 200; ++i) h = tanh(matmul(h, w) * 0.5f);
    w.requires_grad_(true);
    Tensor y = h;
    for (int i = 0; i < 3; ++i) y = tanh(matmul(y, w) * 0.5f);
    const Tensor gw = grad(sum(y), {w})[0];
    return sum(gw * gw);
  };
  expect_same_with_templates(loop);
  EXPECT_GT(run(true, loop).stats.ops_from_template, 0);
}

// Random loop bodies over the forms a template replays (binary, scalar of both orders and both
// kinds, unary, matmul, slice, reshape, transpose, expand) and some it does not (cast, where,
// sum), with an odd step now and then whose operands differ (a wider dtype, a broadcast row,
// another slice, an integer scalar, a realized value expanded): the same bits, dtypes, kernels
// and plans with templates as without.
TEST_F(LoopTemplate, RandomLoopBodiesGiveTheSameResultsWithTemplates) {
  int templated = 0; // seeds whose run recorded most op calls from the template
  for (unsigned seed = 1; seed <= 30; ++seed) {
    std::mt19937 gen(seed);
    auto below = [&gen](int n) { return std::uniform_int_distribution<int>(0, n - 1)(gen); };
    std::vector<int> body(static_cast<size_t>(2 + below(7)));
    for (int& op : body) op = below(10);
    const int steps = 100 + below(200), odd_every = 5 + below(40);
    uint64_t bits = 0; // the probe's state
    const Run r = expect_same_with_templates([&] {
      // Idle or busy at random, the same in both runs. Set afresh in each: a probe just set is
      // asked once more (whether the device runs synchronously).
      bits = seed;
      detail::set_device_probe([&bits](Device) {
        bits = bits * 6364136223846793005ull + 1442695040888963407ull;
        return bits >> 63 ? DeviceState::idle : DeviceState::busy;
      });
      const Tensor w = realized_randn({5, 5}, 0.3f), row = realized_randn({1, 5});
      const Tensor wide = cast(realized_randn({3, 5}), DType::f64);
      Tensor h = realized_randn({3, 5}), x = realized_randn({6, 5});
      Tensor acc = zeros({3, 5}, DType::f64);
      for (int s = 0; s < steps; ++s) {
        const bool odd = s % odd_every == odd_every - 1;
        for (int op : body) {
          switch (op) {
          case 0:
            h = tanh(h * (odd ? row : h) + h);
            break;
          case 1:
            h = tanh(h) - (odd ? 0.25f : 0.5f);
            break;
          case 2:
            h = rsub(sigmoid(h), odd ? 1.0f : 2.0f);
            break;
          case 3:
            h = tanh(matmul(h, w)) * 0.5f;
            break;
          case 4:
            h = tanh(h + slice(x * 0.5f, 0, odd ? 1 : 0, odd ? 4 : 3));
            break;
          case 5:
            acc = acc * 0.5 + (odd ? wide : cast(h, DType::f64)) * h;
            break;
          case 6:
            h = where(h > 0.0f, h, h * 0.1f);
            break;
          case 7:
            h = tanh(odd ? h * 2 : h * 0.5f); // an integer scalar on odd steps
            break;
          // Reshape (to another shape on odd steps), transpose, and expand (a realized row on
          // odd steps) of pending values.
          case 8: {
            const Tensor v = reshape(h * 0.5f, odd ? Shape{15, 1} : Shape{5, 3});
            h = tanh(reshape(transpose(reshape(v, {5, 3}), 0, 1), {3, 5}) +
                     expand(odd ? row : sum(h, {0}, true), {3, 5}));
            break;
          }
          default:
            x = x * 0.9f + 0.1f;
            break;
          }
        }
      }
      return acc + cast(h + sum(x, {0}), DType::f64);
    });
    if (HasFailure()) {
      ADD_FAILURE() << "seed " << seed;
      break;
    }
    templated += r.stats.ops_from_template * 2 > r.stats.ops_recorded;
  }
  EXPECT_GE(templated, 10);
}

} // namespace

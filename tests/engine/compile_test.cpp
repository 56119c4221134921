// kiln::compile: a traced function replays to the same bits as calling it, records no ops
// while replaying, rebinds its state, keeps what the trace captured, and calls the function
// instead wherever a replay could be wrong (random draws, a read inside it, another liveness
// of its inputs). Runs on the CPU in CI and again on CUDA (KILN_TEST_DEVICE=cuda), where a
// replay is a CUDA-graph launch.
#include "../test_device.h"

#include <kiln/kiln.h>
#include <kiln/optim.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct Compile : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    manual_seed(11);
  }
  void TearDown() override { set_eager(false); }
};

Tensor realized_randn(const Shape& s, float scale = 1.0f) {
  Tensor t = randn(s) * scale;
  eval(t);
  return t;
}

std::vector<float> values(const Tensor& t) {
  return t.to_vector<float>();
}

// The seeds' cell: one matmul and five pointwise ops.
Tensor seed_step(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = tanh(matmul(x, w) + b) * 0.5f + x;
  return sigmoid(y) - 0.5f;
}

TEST_F(Compile, ASeedLoopReplaysToTheBitsOfCallingTheFunction) {
  const int64_t d = 16;
  Tensor w = realized_randn({d, d}, 0.25f), b = realized_randn({d}, 0.1f);
  Tensor x0 = realized_randn({d, d});
  Compiled step = compile(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{seed_step(in[0], w, b)}; });
  Tensor x = x0, ref = x0;
  for (int t = 0; t < 3; ++t) { // the trace and the first replays
    x = step({x})[0];
    ref = seed_step(ref, w, b);
    eval(ref);
  }
  const int64_t recorded = stats().ops_recorded, flushes = stats().flushes;
  for (int t = 0; t < 20; ++t) x = step({x})[0];
  EXPECT_EQ(stats().ops_recorded, recorded) << "a replay records no op";
  EXPECT_EQ(stats().flushes, flushes + 20) << "one evaluation per call";
  for (int t = 0; t < 20; ++t) {
    ref = seed_step(ref, w, b);
    eval(ref);
  }
  EXPECT_EQ(values(x), values(ref));
  EXPECT_EQ(step.counts().traces, 1);
  EXPECT_EQ(step.counts().replays, 22);
  EXPECT_EQ(step.counts().calls, 0);
  EXPECT_EQ(step.why_not_replayed(), "");
}

// An LSTM cell whose h and c are state: each call leaves them holding the new values.
TEST_F(Compile, StateTensorsAreRebound) {
  const int64_t hidden = 8, batch = 2;
  Tensor wx = realized_randn({3, 4 * hidden}, 0.3f),
         wh = realized_randn({hidden, 4 * hidden}, 0.3f);
  Tensor h = zeros({batch, hidden}), c = zeros({batch, hidden});
  eval(h, c);
  auto cell = [&](const Tensor& x, Tensor& hs, Tensor& cs) {
    std::vector<Tensor> g = chunk(matmul(x, wx) + matmul(hs, wh), 4, 1);
    cs = sigmoid(g[1]) * cs + sigmoid(g[0]) * tanh(g[2]);
    hs = sigmoid(g[3]) * tanh(cs);
    return hs * 2.0f;
  };
  Compiled step =
      compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cell(in[0], h, c)}; },
              {&h, &c});
  Tensor rh = h, rc = c;
  std::vector<Tensor> xs;
  for (int t = 0; t < 6; ++t) xs.push_back(realized_randn({batch, 3}));
  for (int t = 0; t < 6; ++t) {
    Tensor y = step({xs[t]})[0];
    Tensor ry = cell(xs[t], rh, rc);
    eval(ry, rh, rc);
    EXPECT_EQ(values(y), values(ry)) << "step " << t;
    EXPECT_EQ(values(h), values(rh)) << "step " << t;
    EXPECT_EQ(values(c), values(rc)) << "step " << t;
  }
  // The first call's state may key another liveness than the later calls' (the initial zeros):
  // then a second trace.
  EXPECT_EQ(step.counts().traces + step.counts().replays, 6);
  EXPECT_GE(step.counts().replays, 4);
  EXPECT_EQ(step.counts().calls, 0);
}

// A training step: loss, gradients and an SGD update of the parameters, which are state.
TEST_F(Compile, ATrainingStepWithItsUpdateReplays) {
  Tensor w = realized_randn({4, 3}, 0.5f), b = realized_randn({3}, 0.1f);
  auto train = [](const Tensor& x, const Tensor& y, Tensor& w, Tensor& b) {
    Tensor wl = w.detach().requires_grad_(), bl = b.detach().requires_grad_();
    Tensor e = tanh(matmul(x, wl) + bl) - y;
    Tensor loss = mean(e * e);
    std::vector<Tensor> g = grad(loss, {wl, bl});
    w = w - g[0] * 0.1f;
    b = b - g[1] * 0.1f;
    return loss.detach();
  };
  Compiled step = compile(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{train(in[0], in[1], w, b)}; },
      {&w, &b});
  Tensor rw = w, rb = b;
  for (int t = 0; t < 8; ++t) {
    Tensor x = realized_randn({5, 4}), y = realized_randn({5, 3});
    Tensor loss = step({x, y})[0];
    Tensor rloss = train(x, y, rw, rb);
    eval(rloss, rw, rb);
    ASSERT_EQ(values(loss), values(rloss)) << "step " << t << ": " << step.why_not_replayed();
    ASSERT_EQ(values(w), values(rw)) << "step " << t;
    ASSERT_EQ(values(b), values(rb)) << "step " << t;
  }
  EXPECT_EQ(step.counts().traces, 1);
  EXPECT_EQ(step.counts().replays, 7) << step.why_not_replayed();
}

// Adam's bias correction changes every step: a host scalar by default, which a trace would fix
// (so the step is not replayed), or a count on the device with `capturable`, whose steps replay
// to the bits of calling the function.
TEST_F(Compile, AnAdamStepReplaysWhenItsCountIsOnTheDevice) {
  for (bool capturable : {true, false}) {
    manual_seed(5);
    Tensor w = realized_randn({4, 3}, 0.5f).requires_grad_();
    Tensor b = realized_randn({3}, 0.1f).requires_grad_();
    Tensor rw = w.detach().requires_grad_(), rb = b.detach().requires_grad_();
    eval(rw, rb);
    optim::AdamOptions o;
    o.capturable = capturable;
    optim::Adam opt({{"w", &w}, {"b", &b}}, 0.05, o), ropt({{"w", &rw}, {"b", &rb}}, 0.05, o);
    auto train = [](const Tensor& x, const Tensor& y, optim::Adam& opt, Tensor& w, Tensor& b) {
      Tensor e = tanh(matmul(x, w) + b) - y;
      Tensor loss = mean(e * e);
      opt.step(grad(loss, {w, b}));
      return loss.detach();
    };
    std::vector<Tensor*> state = {&w, &b};
    for (const nn::NamedParam& p : opt.state()) state.push_back(p.tensor);
    (void)ropt.state(); // the same zeros, made the same way
    Compiled step = compile(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{train(in[0], in[1], opt, w, b)};
        },
        state);
    for (int t = 0; t < 6; ++t) {
      Tensor x = realized_randn({5, 4}), y = realized_randn({5, 3});
      Tensor loss = step({x, y})[0];
      Tensor rloss = train(x, y, ropt, rw, rb);
      ASSERT_EQ(values(loss), values(rloss)) << "step " << t << ", capturable " << capturable;
      ASSERT_EQ(values(w), values(rw)) << "step " << t << ", capturable " << capturable;
      ASSERT_EQ(values(b), values(rb)) << "step " << t << ", capturable " << capturable;
      ASSERT_TRUE(w.requires_grad());
    }
    if (capturable) {
      EXPECT_EQ(step.counts().replays, 4) << step.why_not_replayed(); // two traces (rw, rb)
    } else {
      EXPECT_EQ(step.counts().replays, 0);
      EXPECT_NE(step.why_not_replayed().find("capturable"), std::string::npos);
    }
  }
}

// A capturable Adam keeps its learning rate on the device: a schedule (set_lr between calls)
// reaches the replays.
TEST_F(Compile, ALearningRateScheduleReachesACompiledAdamStep) {
  Tensor w = realized_randn({4}).requires_grad_();
  const std::vector<float> w0 = values(w);
  Tensor rw = w.detach().requires_grad_();
  eval(rw);
  optim::AdamOptions o;
  o.capturable = true;
  optim::AdamW opt({{"w", &w}}, 0.1, o), ropt({{"w", &rw}}, 0.1, o);
  auto train = [](optim::Adam& o, Tensor& w) {
    Tensor loss = sum(w * w * w);
    o.step(grad(loss, {w}));
    return loss.detach();
  };
  std::vector<Tensor*> state = {&w};
  for (const nn::NamedParam& p : opt.state()) state.push_back(p.tensor);
  (void)ropt.state();
  Compiled step = compile(
      [&](const std::vector<Tensor>&) { return std::vector<Tensor>{train(opt, w)}; }, state);
  for (int t = 0; t < 8; ++t) {
    const double lr = 0.1 * std::pow(0.5, t); // halved every step
    opt.set_lr(lr);
    ropt.set_lr(lr);
    Tensor loss = step({})[0];
    Tensor rloss = train(ropt, rw);
    ASSERT_EQ(values(loss), values(rloss)) << "step " << t;
    ASSERT_EQ(values(w), values(rw)) << "step " << t;
  }
  EXPECT_GE(step.counts().replays, 6) << step.why_not_replayed();
  // The schedule mattered: the same steps at the first rate end elsewhere.
  Tensor cw = from_vector(w0, {4}).requires_grad_();
  optim::AdamW copt({{"w", &cw}}, 0.1, o);
  for (int t = 0; t < 8; ++t) (void)train(copt, cw);
  EXPECT_NE(values(cw), values(w));
}

// A replay must not write a value the caller can still see: the state's old values are never
// written in place (the call holds them while the plan runs), whether or not the caller kept
// them.
TEST_F(Compile, AValueTheCallerHoldsIsNeverOverwritten) {
  Tensor w = realized_randn({64});
  Compiled step = compile(
      [&](const std::vector<Tensor>& in) {
        w = w * 0.5f + in[0]; // an elementwise update: its old buffer could take the new w
        return std::vector<Tensor>{w * 2.0f};
      },
      {&w});
  Tensor one = full({64}, 1.0f);
  eval(one);
  auto expect_step = [&](const std::vector<float>& before) {
    std::vector<float> e = before;
    for (float& v : e) v = v * 0.5f + 1.0f;
    EXPECT_EQ(values(w), e);
  };
  for (int i = 0; i < 2; ++i) { // a trace, a replay
    const std::vector<float> before = values(w);
    step({one});
    expect_step(before);
  }
  for (int i = 0; i < 2; ++i) { // the caller keeps the old value
    Tensor kept = w;
    const std::vector<float> before = values(kept);
    step({one});
    EXPECT_EQ(values(kept), before) << "the held value was overwritten";
    expect_step(before);
  }
  const std::vector<float> before = values(w);
  step({one});
  expect_step(before);
  EXPECT_EQ(step.counts().traces, 1);
  EXPECT_EQ(step.counts().replays, 4);
  EXPECT_EQ(step.counts().calls, 0);
}

// Tensors the function reads that are not inputs, and host values, are fixed by the trace.
TEST_F(Compile, WhatTheTraceCapturedStaysAsItWas) {
  Tensor w = full({4}, 2.0f);
  float scale = 3.0f;
  Compiled f = compile(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w * scale}; });
  Tensor x = full({4}, 1.0f);
  eval(w, x);
  EXPECT_EQ(values(f({x})[0]), std::vector<float>(4, 6.0f));
  w = full({4}, 5.0f); // rebinding the C++ variable
  scale = 10.0f;
  EXPECT_EQ(values(f({x})[0]), std::vector<float>(4, 6.0f)) << "replayed with the trace's values";
  EXPECT_EQ(f.counts().replays, 1);
}

TEST_F(Compile, ANewSignatureTracesAgain) {
  Compiled f =
      compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0]) + 1.0f}; });
  Tensor a = realized_randn({3, 4}), b = realized_randn({5});
  Tensor at = transpose(a, 0, 1); // other strides
  const std::vector<float> ra = values(exp(a) + 1.0f), rb = values(exp(b) + 1.0f),
                           rat = values(exp(at) + 1.0f);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(values(f({a})[0]), ra);
    EXPECT_EQ(values(f({b})[0]), rb);
    EXPECT_EQ(values(f({at})[0]), rat);
  }
  EXPECT_EQ(f.counts().traces, 3);
  EXPECT_EQ(f.counts().replays, 3);
}

TEST_F(Compile, RandomDrawsAreNotReplayed) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + randn(in[0].shape())};
  });
  Tensor x = zeros({8});
  eval(x);
  const std::vector<float> first = values(f({x})[0]), second = values(f({x})[0]);
  EXPECT_NE(first, second) << "each call draws new numbers";
  EXPECT_NE(f.why_not_replayed().find("random"), std::string::npos) << f.why_not_replayed();
  EXPECT_EQ(values(f({x})[0]) != second, true);
  EXPECT_EQ(f.counts().replays, 0);
  EXPECT_EQ(f.counts().traces, 2); // traced again once: a later trace may be replayable
  EXPECT_EQ(f.counts().calls, 1);
}

TEST_F(Compile, AFunctionThatReadsAValueIsNotReplayed) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    const float m = max(in[0]).item<float>(); // a host value the function branches on
    return std::vector<Tensor>{m > 0 ? in[0] * 2.0f : in[0] * 3.0f};
  });
  Tensor pos = full({3}, 1.0f), neg = full({3}, -1.0f);
  eval(pos, neg);
  EXPECT_EQ(values(f({pos})[0]), std::vector<float>(3, 2.0f));
  EXPECT_EQ(values(f({neg})[0]), std::vector<float>(3, -3.0f));
  EXPECT_NE(f.why_not_replayed().find("evaluated"), std::string::npos) << f.why_not_replayed();
}

TEST_F(Compile, ResultsMayBeInputsAndViews) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0], in[0] + 1.0f, transpose(in[0] * 2.0f, 0, 1)};
  });
  Tensor x = realized_randn({2, 3});
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> r = f({x});
    EXPECT_EQ(values(r[0]), values(x));
    EXPECT_EQ(values(r[1]), values(x + 1.0f));
    EXPECT_EQ(values(r[2]), values(transpose(x * 2.0f, 0, 1)));
    EXPECT_EQ(r[2].shape(), Shape({3, 2}));
  }
}

// A view of an input returned beside a computed result holds the input's buffer when the trace
// is keyed; a replay makes it first too, so the call is replayed.
TEST_F(Compile, AViewOfAnInputBesideAComputedResultIsReplayed) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{transpose(in[0], 0, 1), in[0] * 2.0f};
  });
  for (int i = 0; i < 4; ++i) {
    Tensor x = from_vector<float>({1, 2, 3, float(i)}, {2, 2});
    std::vector<Tensor> r = f({x});
    EXPECT_EQ(values(r[0]), (std::vector<float>{1, 3, 2, float(i)}));
    EXPECT_EQ(values(r[1]), (std::vector<float>{2, 4, 6, 2.0f * float(i)}));
  }
  EXPECT_GE(f.counts().replays, 2) << f.why_not_replayed();
}

TEST_F(Compile, EagerModeCallsTheFunction) {
  set_eager(true);
  Compiled f =
      compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0f}; });
  Tensor x = full({2}, 1.5f);
  EXPECT_EQ(values(f({x})[0]), std::vector<float>(2, 3.0f));
  EXPECT_EQ(values(f({x})[0]), std::vector<float>(2, 3.0f));
  EXPECT_EQ(f.counts().calls, 2);
}

TEST_F(Compile, PendingInputsAreEvaluatedFirst) {
  Compiled f =
      compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[1]}; });
  Tensor a = full({4}, 2.0f);
  for (int i = 0; i < 3; ++i) {
    Tensor x = a + float(i); // pending
    EXPECT_EQ(values(f({x, x})[0]), std::vector<float>(4, (2.0f + i) * (2.0f + i)));
  }
  EXPECT_EQ(f.counts().replays, 2);
}

// Found by review: each of these replayed wrong values before the fix named.

// A constant the plan writes to memory (a matmul operand, a result) keeps its value in a replay.
TEST_F(Compile, ConstantsThePlanStoresKeepTheirValues) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], full({4, 4}, 0.5f)), full({3}, 7.0f)};
  });
  Tensor x = full({2, 4}, 1.0f);
  eval(x);
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> r = f({x});
    EXPECT_EQ(values(r[0]), std::vector<float>(8, 2.0f)) << "call " << i;
    EXPECT_EQ(values(r[1]), std::vector<float>(3, 7.0f)) << "call " << i;
  }
  EXPECT_EQ(f.counts().replays, 2);
}

// A captured tensor whose memory an input is a slice of is read as captured, not as a view of
// the input (which moves with each call's slice).
TEST_F(Compile, ACapturedTensorSharingTheInputsMemoryStaysCaptured) {
  Tensor xs = arange(0, 24, 1, DType::f32).reshape({6, 4});
  eval(xs);
  std::vector<Tensor> rows; // the caller keeps every row: no in-place reuse keyed
  for (int64_t t = 0; t < 6; ++t) rows.push_back(slice(xs, 0, t, t + 1));
  Compiled f = compile([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(transpose(xs, 0, 1), {1}) + in[0].reshape({4})};
  });
  for (int64_t t = 0; t < 6; ++t) {
    std::vector<float> want(4);
    for (int64_t j = 0; j < 4; ++j) want[j] = float(60 + 6 * j) + float(t * 4 + j);
    EXPECT_EQ(values(f({rows[t]})[0]), want) << "row " << t;
  }
  EXPECT_GE(f.counts().replays, 4);
}

// A tensor captured by reference that is the input's value when traced stays the captured one.
TEST_F(Compile, ACapturedTensorThatIsTheFirstInputStaysCaptured) {
  Tensor x0 = full({2}, 1.0f);
  eval(x0);
  Compiled f = compile(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 0.5f + x0}; });
  Tensor x = x0;
  for (float want : {1.5f, 1.75f, 1.875f, 1.9375f}) {
    x = f({x})[0];
    EXPECT_EQ(values(x), std::vector<float>(2, want));
  }
  EXPECT_EQ(f.counts().traces + f.counts().replays, 4);
  EXPECT_EQ(f.counts().calls, 0);
}

// An input that requires grad has another signature: the function is traced for it, and its
// results carry history (so that trace is not replayed).
TEST_F(Compile, AnInputThatRequiresGradIsNotReplayedWithoutHistory) {
  Compiled f = compile(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(in[0] * in[0])}; });
  Tensor x = full({3}, 2.0f);
  eval(x);
  f({x});
  f({x}); // replayed
  Tensor xg = x.detach().requires_grad_();
  Tensor l = f({xg})[0];
  EXPECT_EQ(values(grad(l, {xg})[0]), std::vector<float>(3, 4.0f));
  EXPECT_EQ(f.counts().replays, 1);
}

// SGD's first step with momentum takes another branch than the later ones: not replayed.
TEST_F(Compile, AnSgdStepWithMomentumReplaysFromTheSecondStep) {
  Tensor w = realized_randn({4}).requires_grad_();
  Tensor rw = w.detach().requires_grad_();
  eval(rw);
  optim::SGD opt({{"w", &w}}, 0.1, {.momentum = 0.9});
  optim::SGD ropt({{"w", &rw}}, 0.1, {.momentum = 0.9});
  auto train = [](optim::SGD& o, Tensor& w) {
    Tensor loss = sum(w * w * w);
    o.step(grad(loss, {w}));
    return loss.detach();
  };
  std::vector<Tensor*> state = {&w};
  for (const nn::NamedParam& p : opt.state()) state.push_back(p.tensor);
  (void)ropt.state();
  Compiled step = compile(
      [&](const std::vector<Tensor>&) { return std::vector<Tensor>{train(opt, w)}; }, state);
  for (int t = 0; t < 6; ++t) {
    Tensor loss = step({})[0];
    Tensor rloss = train(ropt, rw);
    ASSERT_EQ(values(loss), values(rloss)) << "step " << t;
    ASSERT_EQ(values(w), values(rw)) << "step " << t;
  }
  EXPECT_EQ(step.counts().replays, 4) << step.why_not_replayed();
}

// Found by a second review.

// A value read on the host inside the function (item, to_vector, data_ptr) is not fixed by a
// trace: such a function is called every time.
TEST_F(Compile, AHostReadInsideTheFunctionIsNotReplayed) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * in[1].item<float>()};
  });
  Tensor x = full({3}, 1.0f);
  eval(x);
  for (float k : {2.0f, 3.0f, 5.0f}) {
    Tensor scale = full({}, k);
    eval(scale);
    EXPECT_EQ(values(f({x, scale})[0]), std::vector<float>(3, k));
  }
  EXPECT_EQ(f.counts().replays, 0);
  EXPECT_NE(f.why_not_replayed().find("host"), std::string::npos) << f.why_not_replayed();
}

// Gradients of results reach the caller's tensors, whether a result is a view of an input that
// requires grad or is computed from a state tensor that does.
TEST_F(Compile, GradientsOfResultsReachTheCallersTensors) {
  Compiled view = compile(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{transpose(in[0], 0, 1)}; });
  Tensor w = full({3}, 1.0f).requires_grad_();
  eval(w);
  Compiled dot = compile(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(w * in[0])}; }, {&w});
  for (int i = 0; i < 3; ++i) {
    Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2}).requires_grad_();
    Tensor r = view({x})[0];
    EXPECT_EQ(values(grad(sum(r * r), {x})[0]), (std::vector<float>{2, 4, 6, 8})) << "call " << i;
    Tensor y = from_vector<float>({10, 11, 12});
    EXPECT_EQ(values(grad(dot({y})[0], {w})[0]), (std::vector<float>{10, 11, 12})) << "call " << i;
  }
}

// A compiled function called by one being traced is part of that trace.
TEST_F(Compile, ACompiledCallInsideATraceIsPartOfIt) {
  Compiled inner =
      compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1.0f}; });
  Compiled outer = compile([&](const std::vector<Tensor>& in) {
    Tensor v = transpose(in[0], 0, 1);
    return std::vector<Tensor>{inner({v})[0] * 2.0f};
  });
  for (int i = 0; i < 3; ++i) {
    Tensor x = full({2, 2}, float(i));
    eval(x);
    EXPECT_EQ(values(outer({x})[0]), std::vector<float>(4, 2.0f * (float(i) + 1))) << i;
  }
  EXPECT_EQ(outer.counts().replays, 2) << outer.why_not_replayed();
}

// Found by a third review.

// A compiled function with state called inside a traced one: the outer trace would not update
// that state, so the outer function is not replayed.
TEST_F(Compile, ACompiledCallWithStateInsideATraceRefusesItsReplay) {
  Tensor h = zeros({2});
  eval(h);
  Compiled inner = compile(
      [&](const std::vector<Tensor>& in) {
        h = h + in[0];
        return std::vector<Tensor>{h * 1.0f};
      },
      {&h});
  Compiled outer = compile([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{inner({in[0] * 2.0f})[0] + 1.0f};
  });
  std::vector<float> want_h = {0, 0};
  for (int i = 0; i < 4; ++i) {
    Tensor x = from_vector<float>({1, float(i)}, {2});
    want_h[0] += 2;
    want_h[1] += 2.0f * float(i);
    EXPECT_EQ(values(outer({x})[0]), (std::vector<float>{want_h[0] + 1, want_h[1] + 1})) << i;
    EXPECT_EQ(values(h), want_h) << i;
  }
  EXPECT_EQ(outer.counts().replays, 0);
  EXPECT_NE(outer.why_not_replayed().find("has state"), std::string::npos);
}

// requires_grad as the function leaves it: on a view of an input it returns or assigns to
// state (replayed), and on an input it marks (given to the caller; such a function is not
// replayed).
TEST_F(Compile, RequiresGradIsAsTheFunctionLeavesIt) {
  Compiled f = compile([](const std::vector<Tensor>& in) {
    Tensor v = in[0].detach();
    v.requires_grad_();
    return std::vector<Tensor>{v, in[0] * 2.0f};
  });
  for (int i = 0; i < 3; ++i) {
    Tensor x = full({2}, float(i));
    eval(x);
    EXPECT_TRUE(f({x})[0].requires_grad()) << i;
  }
  EXPECT_GE(f.counts().replays, 1);
  Compiled g = compile([](const std::vector<Tensor>& in) {
    Tensor t = in[0];
    t.requires_grad_();
    return std::vector<Tensor>{t * 2.0f};
  });
  Tensor y = full({2}, 1.0f);
  eval(y);
  (void)g({y});
  EXPECT_TRUE(y.requires_grad());
  EXPECT_NE(g.why_not_replayed().find("requires grad"), std::string::npos);
}

TEST_F(Compile, BadUseIsAClearError) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { compile(nullptr); }).find("compile"), std::string::npos);
  EXPECT_NE(message([] {
              compile([](const std::vector<Tensor>& in) { return in; }, {nullptr});
            }).find("state tensor 0 is a null pointer"),
            std::string::npos);
  Tensor s = full({1}, 1.0f);
  EXPECT_NE(message([&] {
              compile([](const std::vector<Tensor>& in) { return in; }, {&s, &s});
            }).find("state tensors 0 and 1 are the same variable"),
            std::string::npos);
  Compiled f = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{Tensor()}; });
  EXPECT_NE(message([&] { f({Tensor()}); }).find("input 0 is an undefined tensor"),
            std::string::npos);
  Tensor x = full({1}, 1.0f);
  EXPECT_NE(message([&] { f({x}); }).find("result 0 of the function is undefined"),
            std::string::npos);
}

} // namespace

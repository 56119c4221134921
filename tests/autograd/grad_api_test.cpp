// kiln::grad's contract: flags, errors, freeing of history, no-grad, detach, compound
// assignment on parameters, ties, dtypes, lazy vs eager, and whole small models against finite
// differences.
#include "tests/autograd/gradcheck.h"

#include <cmath>
#include <cstring>

using namespace kiln;
using namespace kt;
using namespace kt_grad;

namespace {

class Grad : public OpsTest {};

std::vector<float> values(const Tensor& t) {
  return t.to_vector<float>();
}

TEST_F(Grad, FlagsFollowTheOps) {
  Tensor w = randn({3}).requires_grad_();
  Tensor x = randn({3});
  EXPECT_TRUE(w.requires_grad());
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE((w * x + 1.0f).requires_grad());
  EXPECT_FALSE((x * 2.0f).requires_grad());
  EXPECT_FALSE((w > 0).requires_grad()) << "a comparison has no gradient";
  EXPECT_FALSE(argmax(w).requires_grad());
  EXPECT_FALSE(cast(w, DType::i32).requires_grad()) << "an integer result has no gradient";
  EXPECT_FALSE(w.detach().requires_grad());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_FALSE((w * 2.0f).requires_grad());
    { NoGradGuard nested; }
    EXPECT_FALSE(is_grad_enabled()) << "a nested guard restores the outer state";
  }
  EXPECT_TRUE(is_grad_enabled());
}

TEST_F(Grad, BadRequestsThrowNamingWhatIsWrong) {
  Tensor i = arange(4);
  EXPECT_KILN_ERROR("only floating-point tensors can require grad, got i64", i.requires_grad_());
  Tensor w = randn({2, 2}).requires_grad_();
  Tensor x = randn({2, 2});
  EXPECT_KILN_ERROR("the output (shape ()) does not require grad", grad(sum(x), {w}));
  EXPECT_KILN_ERROR("input 0 (shape (2, 2), f32) does not require grad", grad(sum(w * x), {x}));
  EXPECT_KILN_ERROR("the output has shape (2, 2) (4 elements): pass grad_output", grad(w * x, {w}));
  GradOptions bad;
  bad.grad_output = ones({3});
  EXPECT_KILN_ERROR("grad_output has shape (3,), but the output has shape", grad(w * x, {w}, bad));
  Tensor y = w * 2.0f;
  EXPECT_KILN_ERROR("use detach()", y.requires_grad_(false));
}

TEST_F(Grad, GradOutputWeighsANonScalarOutput) {
  Tensor w = from_vector<float>({1, 2, 3}).requires_grad_();
  GradOptions o;
  o.grad_output = from_vector<float>({1, 10, 100});
  EXPECT_EQ(values(grad(w * w, {w}, o)[0]), (std::vector<float>{2, 40, 600}));
}

TEST_F(Grad, HistoryIsFreedUnlessRetained) {
  Tensor w = from_vector<float>({1, 2}).requires_grad_();
  Tensor h = tanh(w);
  Tensor loss = sum(h * h);
  GradOptions keep;
  keep.retain_graph = true;
  auto first = grad(loss, {w}, keep);
  auto second = grad(loss, {w}); // retained: allowed, and frees it
  EXPECT_EQ(values(first[0]), values(second[0]));
  EXPECT_KILN_ERROR("was freed by an earlier grad()", grad(loss, {w}));
  // A value carried into the next step without detach() names the fix.
  EXPECT_KILN_ERROR("detach() values carried from one step to the next", grad(sum(h * w), {w}));
  EXPECT_NO_THROW(grad(sum(h.detach() * w), {w}));
}

TEST_F(Grad, GradWithRespectToAnIntermediateAndAnUnusedInput) {
  Tensor w = from_vector<float>({0.5f, -1}).requires_grad_();
  Tensor unused = ones({3}).requires_grad_();
  Tensor h = w * 3.0f;
  auto g = grad(sum(h * h), {h, w, unused});
  EXPECT_EQ(values(g[0]), (std::vector<float>{3, -6}));  // 2h
  EXPECT_EQ(values(g[1]), (std::vector<float>{9, -18})); // 2h * 3, through h
  EXPECT_EQ(values(g[2]), (std::vector<float>{0, 0, 0}));
}

TEST_F(Grad, DetachStopsTheGradient) {
  Tensor x = from_vector<float>({2, 3}).requires_grad_();
  auto g = grad(sum(x * x.detach()), {x});
  EXPECT_EQ(values(g[0]), (std::vector<float>{2, 3}));
  Tensor realized = from_vector<float>({1, 2}).requires_grad_();
  eval(realized);
  Tensor alias = detach(realized);
  EXPECT_FALSE(alias.requires_grad());
  EXPECT_TRUE(realized.requires_grad()) << "detach leaves the original's flag alone";
}

TEST_F(Grad, CompoundAssignmentOnAParameterIsAnUpdate) {
  Tensor w = from_vector<float>({1, 2}).requires_grad_();
  Tensor before = w;
  for (int step = 0; step < 3; ++step) {
    Tensor g = grad(sum(w * w), {w})[0];
    w -= 0.25f * g; // w = w - 0.5 w
    EXPECT_TRUE(w.requires_grad()) << "still a parameter after step " << step;
  }
  EXPECT_EQ(values(w), (std::vector<float>{0.125f, 0.25f}));
  EXPECT_EQ(values(before), (std::vector<float>{1, 2})) << "rebinding leaves other handles";
  // A value computed from a parameter is differentiable through compound assignment as usual.
  Tensor p = from_vector<float>({3}).requires_grad_();
  Tensor y = p * 2.0f;
  y += p;
  EXPECT_EQ(values(grad(sum(y), {p})[0]), (std::vector<float>{3}));
}

TEST_F(Grad, TiesAreSharedAsDocumented) {
  Tensor x = from_vector<float>({1, 3, 3, 2}).requires_grad_();
  EXPECT_EQ(values(grad(max(x), {x})[0]), (std::vector<float>{0, 0.5f, 0.5f, 0}));
  Tensor a = from_vector<float>({1, 2}).requires_grad_();
  Tensor b = from_vector<float>({1, 1}).requires_grad_();
  auto g = grad(sum(maximum(a, b)), {a, b});
  EXPECT_EQ(values(g[0]), (std::vector<float>{0.5f, 1}));
  EXPECT_EQ(values(g[1]), (std::vector<float>{0.5f, 0}));
  Tensor c = from_vector<float>({-1, -0.5f, 0, 0.5f, 1}).requires_grad_();
  EXPECT_EQ(values(grad(sum(clamp(c, -0.5, 0.5)), {c})[0]), (std::vector<float>{0, 1, 1, 1, 0}));
  EXPECT_EQ(values(grad(sum(relu(c)), {c})[0]), (std::vector<float>{0, 0, 0, 1, 1}));
  EXPECT_EQ(values(grad(sum(abs(c)), {c})[0]), (std::vector<float>{-1, -1, 0, 1, 1}));
}

TEST_F(Grad, GradientsHaveTheInputsDtype) {
  Tensor h = randn({4}, DType::f16).requires_grad_();
  Tensor f = randn({4}).requires_grad_();
  auto g = grad(sum(cast(h, DType::f32) * f), {h, f});
  EXPECT_EQ(g[0].dtype(), DType::f16);
  EXPECT_EQ(g[1].dtype(), DType::f32);
  EXPECT_EQ(values(g[0]), values(f.astype(DType::f16)));
}

TEST_F(Grad, ValueAndGradDifferentiatesPlainArguments) {
  Tensor w = from_vector<float>({1, -2, 3});
  auto f = value_and_grad([](const std::vector<Tensor>& p) { return sum(p[0] * p[0] * p[0]); });
  auto [value, grads] = f({w});
  EXPECT_FALSE(w.requires_grad()) << "the caller's tensor is not marked";
  EXPECT_EQ(value.item<float>(), 1 - 8 + 27);
  EXPECT_EQ(values(grads[0]), (std::vector<float>{3, 12, 27}));
}

// Whether records hold forward values: with the history retained, the values it saved are
// live handles and are written to memory; freed by grad(), they can stay in registers.
struct WriteHeld { // every held value written, as before deferred held values (A/B)
  WriteHeld() { set_write_held_values(true); }
  ~WriteHeld() { set_write_held_values(false); }
};

// (With held values deferred, the default, saved values stay pending either way.)
TEST_F(Grad, FreedHistoryLetsSavedValuesStayInRegisters) {
  WriteHeld all;
  auto materialized = [](bool retain) {
    Tensor x = randn({256}).requires_grad_();
    eval(x);
    Tensor loss = sum(sin(exp(x * 0.5f) * x) * 2.0f);
    GradOptions o;
    o.retain_graph = retain;
    Tensor g = grad(loss, {x}, o)[0];
    reset_stats();
    eval(loss, g);
    return stats().buffers_materialized;
  };
  const int64_t retained = materialized(true), freed = materialized(false);
  EXPECT_LT(freed, retained) << "retained " << retained << ", freed " << freed;
}

TEST_F(Grad, FreeingALongHistoryDoesNotRecurse) {
  Tensor x = ones({1}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) {
    y = y * 1.0f;
    if (i % 100 == 0) eval(y); // short plans: each value in the history is held, so written
  }
  y = Tensor(); // frees 100,000 records, each holding the previous value
  SUCCEED();
}

std::vector<Tensor> grads_of_rnn(bool eager_mode) {
  EagerGuard mode(eager_mode);
  manual_seed(7);
  Tensor wx = (randn({4, 8}) * 0.5f).requires_grad_();
  Tensor wh = (randn({8, 8}) * 0.3f).requires_grad_();
  Tensor b = zeros({8}).requires_grad_();
  Tensor wo = (randn({8, 1}) * 0.5f).requires_grad_();
  Tensor xs = randn({6, 2, 4});
  Tensor h = zeros({2, 8});
  Tensor loss = zeros({});
  for (int t = 0; t < 6; ++t) {
    h = tanh(matmul(slice(xs, 0, t, t + 1).reshape({2, 4}), wx) + matmul(h, transpose(wh, 0, 1)) +
             b); // W^T as nn::Linear
    Tensor err = matmul(h, wo) - 0.5f;
    loss = loss + mean(err * err);
  }
  return grad(loss, {wx, wh, b, wo});
}

TEST_F(Grad, LazyAndEagerGradientsAreBitIdentical) {
  std::vector<Tensor> lazy = grads_of_rnn(false), eager = grads_of_rnn(true);
  for (size_t i = 0; i < lazy.size(); ++i) {
    std::vector<float> l = values(lazy[i]), e = values(eager[i]);
    ASSERT_EQ(l.size(), e.size());
    EXPECT_EQ(std::memcmp(l.data(), e.data(), l.size() * sizeof(float)), 0) << "gradient " << i;
  }
}

// Two identical ops on a parameter (a cell's gates written twice): lazily they were one node
// (CSE), so the gradients of both uses were summed before tanh's backward and the matmul's,
// eagerly after: in f16 the weight's gradient came out an ulp apart in some elements (found by
// kiln_fuzz --mode loops --train 1, seed 522). Nodes that record history are never merged.
TEST_F(Grad, IdenticalOpsOnAParameterGiveEagerGradients) {
  auto grads = [](bool eager) {
    set_eager(eager);
    manual_seed(522);
    const Tensor x = randn({3, 8}, DType::f16);
    Tensor w = randn({8, 8}, DType::f16) * 0.125f;
    eval(x, w);
    w.requires_grad_();
    const Tensor a = tanh(matmul(x, w)), b = tanh(matmul(x, w));
    const Tensor c = tanh(matmul(a, matmul(transpose(b, 0, 1), b)) * 0.1f);
    const Tensor loss = mean(a * a) + mean(b * b) + mean(c * c);
    std::vector<float> g = grad(loss, {w})[0].to_vector<float>();
    set_eager(false);
    return g;
  };
  const std::vector<float> lazy = grads(false), eager = grads(true);
  EXPECT_EQ(lazy, eager);
}

// An LSTM cell unrolled over 3 steps, every parameter, in f64.
TEST_F(Grad, LstmOverThreeStepsMatchesFiniteDifferences) {
  manual_seed(3);
  const int64_t in = 3, hid = 4, batch = 2;
  Tensor xs = input({3, batch, in}, -1, 1);
  Fn lstm = [&](const std::vector<Tensor>& p) {
    Tensor h = zeros({batch, hid}, DType::f64), c = zeros({batch, hid}, DType::f64);
    for (int t = 0; t < 3; ++t) {
      Tensor x = reshape(slice(xs, 0, t, t + 1), {batch, in});
      Tensor gates = matmul(x, transpose(p[0], 0, 1)) + matmul(h, transpose(p[1], 0, 1)) + p[2];
      auto g = chunk(gates, 4, 1);
      c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      h = sigmoid(g[3]) * tanh(c);
    }
    return h;
  };
  EXPECT_TRUE(matches_finite_differences(lstm, {input({4 * hid, in}, -0.5, 0.5),
                                                input({4 * hid, hid}, -0.5, 0.5),
                                                input({4 * hid}, -0.5, 0.5)}));
}

TEST_F(Grad, GruCellAndSoftmaxClassifierMatchFiniteDifferences) {
  manual_seed(5);
  Tensor x = input({2, 3}, -1, 1), h0 = input({2, 4}, -1, 1);
  Fn gru = [&](const std::vector<Tensor>& p) {
    auto gi = chunk(matmul(x, p[0]), 3, 1), gh = chunk(matmul(h0, p[1]), 3, 1);
    Tensor r = sigmoid(gi[0] + gh[0]), z = sigmoid(gi[1] + gh[1]);
    Tensor n = tanh(gi[2] + r * gh[2]);
    Tensor h = (1.0 - z) * n + z * h0;
    Tensor target = from_vector<double>({1, 0, 0, 0, 0, 0, 1, 0}, {2, 4});
    return -sum(log_softmax(h, 1) * target) / 2.0;
  };
  EXPECT_TRUE(matches_finite_differences(gru, {input({3, 12}, -1, 1), input({4, 12}, -1, 1)}));
}

} // namespace

namespace {

// The gradients of a value's chunks are placed by one concat (4 pieces), not padded with
// zeros one by one (4 concats of up to 3 pieces each, then added up).
// An f32 or f64 tanh or sigmoid is differentiated by one node (tanh_grad, sigmoid_grad), not a
// chain of three; f16 keeps the chain, which rounds after each op as f16 arithmetic does.
TEST_F(Grad, ActivationDerivativesAreOneNodeInF32AndAChainInF16) {
  for (DType dt : {DType::f32, DType::f16}) {
    Tensor x = randn({3, 4}).astype(dt).requires_grad_();
    eval(x);
    Tensor g = grad(sum(tanh(x) * sigmoid(x)), {x})[0];
    eval(g);
    const std::string plan = last_plan();
    const bool fused = dt == DType::f32;
    EXPECT_EQ(plan.find("tanh_grad") != std::string::npos, fused) << plan;
    EXPECT_EQ(plan.find("sigmoid_grad") != std::string::npos, fused) << plan;
    std::vector<float> xv = x.astype(DType::f32).to_vector<float>();
    std::vector<float> gv = g.astype(DType::f32).to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i) {
      const double t = std::tanh(xv[i]), s = 1 / (1 + std::exp(-double(xv[i])));
      const double want = (1 - t * t) * s + t * s * (1 - s);
      EXPECT_NEAR(gv[i], want, fused ? 1e-6 : 2e-2) << i;
    }
  }
}

// A parameter read by a matmul at every step of a window gets its gradient from one matmul over
// the steps' rows stacked, not a small matmul and an add per step.
TEST_F(Grad, WeightGradientOverStepsIsOneStackedProduct) {
  // Counted as GEMMs: in-kernel dot products (the GPU's default for small ones) are not.
  struct BlasMatmuls {
    SmallMatmul before = small_matmul();
    BlasMatmuls() { set_small_matmul(SmallMatmul::blas); }
    ~BlasMatmuls() { set_small_matmul(before); }
  } blas;
  Tensor w = randn({8, 5}).requires_grad_();
  Tensor u = randn({5, 8}).requires_grad_(); // read untransposed: x @ u
  Tensor xs = randn({6, 3, 5});
  eval(w, u, xs);
  Tensor loss;
  for (int64_t t = 0; t < 6; ++t) {
    Tensor x = reshape(slice(xs, 0, t, t + 1), {3, 5});
    Tensor y = tanh(matmul(x, transpose(w, 0, 1))) + sigmoid(matmul(x, u));
    loss = loss.defined() ? loss + sum(y * y) : sum(y * y);
  }
  eval(loss); // the forward, so that the evaluation below is the backward alone
  std::vector<Tensor> g = grad(loss, {w, u});
  reset_stats();
  eval(g[0], g[1]);
  EXPECT_EQ(stats().gemms_run, 2) << "one product per parameter over the 6 steps";
  // against the per-step sum in double on the host
  std::vector<float> xv = xs.to_vector<float>(), wv = w.to_vector<float>(),
                     uv = u.to_vector<float>(), gw = g[0].to_vector<float>(),
                     gu = g[1].to_vector<float>();
  std::vector<double> ww(40, 0), wu(40, 0);
  for (int r = 0; r < 18; ++r) {
    const float* x = &xv[r * 5];
    for (int o = 0; o < 8; ++o) {
      double a = 0, b = 0;
      for (int k = 0; k < 5; ++k) {
        a += double(x[k]) * wv[o * 5 + k];
        b += double(x[k]) * uv[k * 8 + o];
      }
      const double ta = std::tanh(a), sb = 1 / (1 + std::exp(-b)), y = ta + sb;
      for (int k = 0; k < 5; ++k) {
        ww[o * 5 + k] += 2 * y * (1 - ta * ta) * x[k];
        wu[k * 8 + o] += 2 * y * sb * (1 - sb) * x[k];
      }
    }
  }
  for (int i = 0; i < 40; ++i) {
    EXPECT_NEAR(gw[i], ww[i], 1e-4 * std::max(1.0, std::fabs(ww[i]))) << i;
    EXPECT_NEAR(gu[i], wu[i], 1e-4 * std::max(1.0, std::fabs(wu[i]))) << i;
  }
}

// A large stack is summed in chunks of whole steps (autograd.cpp, stack_chunks), so that a
// chunk's product runs as soon as its steps' backward has: 8 steps of 256 rows, a weight of
// 256 x 64 and a bias of 256, are four products and four reductions of two steps each, whose
// stacks the weight and the bias share (one concat per chunk).
TEST_F(Grad, LargeStacksAreSummedInChunksOfSteps) {
  struct BlasMatmuls {
    SmallMatmul before = small_matmul();
    BlasMatmuls() { set_small_matmul(SmallMatmul::blas); }
    ~BlasMatmuls() { set_small_matmul(before); }
  } blas;
  constexpr int64_t kSteps = 8, kRows = 256, kIn = 64, kOut = 256;
  Tensor w = (randn({kOut, kIn}) * 0.1f).detach().requires_grad_();
  Tensor b = randn({kOut}).requires_grad_();
  Tensor xs = randn({kSteps, kRows, kIn});
  eval(w, b, xs);
  Tensor loss;
  for (int64_t t = 0; t < kSteps; ++t) {
    Tensor x = reshape(slice(xs, 0, t, t + 1), {kRows, kIn});
    Tensor y = tanh(matmul(x, transpose(w, 0, 1)) + b);
    loss = loss.defined() ? loss + sum(y * y) : sum(y * y);
  }
  eval(loss);
  std::vector<Tensor> g = grad(loss, {w, b});
  reset_stats();
  eval(g[0], g[1]);
  const std::string plan = last_plan();
  EXPECT_EQ(stats().gemms_run, 4) << plan;
  int sums = 0;
  for (size_t at = plan.find("(reduction) over (512, 256)"); at != std::string::npos;
       at = plan.find("(reduction) over (512, 256)", at + 1))
    ++sums;
  EXPECT_EQ(sums, 4) << plan;
  // the inputs' rows (slices of a realized tensor) are copied into each chunk's stack; the
  // gradient's rows are written there by the one kernel computing them
  EXPECT_EQ(stats().copies_run, 4) << plan;
  // the backward's kernel, the four reductions, and one kernel adding up the chunks' parts of
  // both gradients (copies count apart)
  EXPECT_EQ(stats().kernels_run, 1 + 4 + 1) << plan;
  std::vector<float> xv = xs.to_vector<float>(), wv = w.to_vector<float>(),
                     bv = b.to_vector<float>(), gw = g[0].to_vector<float>(),
                     gb = g[1].to_vector<float>();
  std::vector<double> want_w(kOut * kIn, 0), want_b(kOut, 0);
  for (int64_t r = 0; r < kSteps * kRows; ++r) {
    const float* x = &xv[r * kIn];
    for (int64_t o = 0; o < kOut; ++o) {
      double a = bv[o];
      for (int64_t k = 0; k < kIn; ++k) a += double(x[k]) * wv[o * kIn + k];
      const double y = std::tanh(a), dy = 2 * y * (1 - y * y);
      want_b[o] += dy;
      for (int64_t k = 0; k < kIn; ++k) want_w[o * kIn + k] += dy * x[k];
    }
  }
  for (int64_t i = 0; i < kOut * kIn; ++i)
    ASSERT_NEAR(gw[i], want_w[i], 1e-3 * std::max(1.0, std::fabs(want_w[i]))) << i;
  for (int64_t o = 0; o < kOut; ++o)
    ASSERT_NEAR(gb[o], want_b[o], 1e-3 * std::max(1.0, std::fabs(want_b[o]))) << o;
}

// At most 8 chunks (each one's part is a buffer of the parameter's size until the sum), and
// none in f16 / bf16 (the parts would round to the parameter's type before they are added).
TEST_F(Grad, StackChunksAreBoundedAndOnlyInF32OrF64) {
  struct BlasMatmuls {
    SmallMatmul before = small_matmul();
    BlasMatmuls() { set_small_matmul(SmallMatmul::blas); }
    ~BlasMatmuls() { set_small_matmul(before); }
  } blas;
  auto gemms_for = [](DType t, int64_t steps) {
    Tensor w = cast(randn({256, 16}) * 0.1f, t).detach().requires_grad_();
    Tensor xs = cast(randn({steps, 256, 16}), t);
    eval(w, xs);
    Tensor loss;
    for (int64_t s = 0; s < steps; ++s) {
      Tensor y = matmul(reshape(slice(xs, 0, s, s + 1), {256, 16}), transpose(w, 0, 1));
      Tensor l = sum(cast(y * y, DType::f32));
      loss = loss.defined() ? loss + l : l;
    }
    eval(loss);
    Tensor g = grad(loss, {w})[0];
    reset_stats();
    eval(g);
    return stats().gemms_run;
  };
  EXPECT_EQ(gemms_for(DType::f32, 8), 4);  // 2,048 rows: chunks of 512
  EXPECT_EQ(gemms_for(DType::f32, 40), 8); // 10,240 rows: 20 chunks of 512, capped at 8
  EXPECT_EQ(gemms_for(DType::f16, 8), 1);  // one product, one rounding
}

// A bias broadcast over the batch at every step of a window gets its gradient from one
// reduction over the steps' rows stacked, not a reduction and an add per step.
TEST_F(Grad, BiasGradientOverStepsIsOneStackedSum) {
  Tensor b = randn({4}).requires_grad_();
  Tensor c = randn({2, 4}).requires_grad_(); // broadcast over a leading dim of [3, 2, 4]
  Tensor xs = randn({5, 3, 4}), ys = randn({5, 3, 2, 4});
  eval(b, c, xs, ys);
  Tensor loss;
  for (int64_t t = 0; t < 5; ++t) {
    Tensor x = reshape(slice(xs, 0, t, t + 1), {3, 4});
    Tensor y = reshape(slice(ys, 0, t, t + 1), {3, 2, 4});
    Tensor l = sum(tanh(x + b) * x) + sum(sigmoid(y + c) * y);
    loss = loss.defined() ? loss + l : l;
  }
  eval(loss);
  std::vector<Tensor> g = grad(loss, {b, c});
  reset_stats();
  eval(g[0], g[1]);
  const std::string plan = last_plan();
  int reductions = 0;
  for (size_t at = plan.find("(reduction)"); at != std::string::npos;
       at = plan.find("(reduction)", at + 1))
    ++reductions;
  EXPECT_EQ(reductions, 2) << "one reduction per parameter over the 5 steps\n" << plan;
  // the steps' rows are written into the stack by the kernels computing them (a reshape too),
  // one kernel per shape: each parameter's rows, then its reduction
  EXPECT_EQ(stats().copies_run, 0) << plan;
  EXPECT_EQ(stats().kernels_run, 4) << plan;
  std::vector<float> xv = xs.to_vector<float>(), yv = ys.to_vector<float>(),
                     bv = b.to_vector<float>(), cv = c.to_vector<float>(),
                     gb = g[0].to_vector<float>(), gc = g[1].to_vector<float>();
  std::vector<double> wb(4, 0), wc(8, 0);
  for (int r = 0; r < 15; ++r)
    for (int j = 0; j < 4; ++j) {
      const double x = xv[r * 4 + j], t = std::tanh(x + bv[j]);
      wb[j] += (1 - t * t) * x;
    }
  for (int r = 0; r < 15; ++r)
    for (int j = 0; j < 8; ++j) {
      const double y = yv[r * 8 + j], s = 1 / (1 + std::exp(-(y + cv[j])));
      wc[j] += s * (1 - s) * y;
    }
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(gb[j], wb[j], 1e-4 * std::max(1.0, std::fabs(wb[j])));
  for (int j = 0; j < 8; ++j) EXPECT_NEAR(gc[j], wc[j], 1e-4 * std::max(1.0, std::fabs(wc[j])));
}

TEST_F(Grad, ChunkGradientsArePlacedByOneConcat) {
  Tensor x = randn({2, 8}).requires_grad_();
  eval(x);
  auto parts = chunk(x, 4, 1);
  Tensor loss = sum(parts[0] * parts[1] + tanh(parts[2]) - parts[3] * 3.0f);
  Tensor g = grad(loss, {x})[0];
  reset_stats();
  eval(g);
  EXPECT_EQ(stats().copies_run, 0) << "the pieces are written into their slices by their kernels";
  EXPECT_EQ(stats().kernels_run, 1);
  std::vector<float> xv = x.to_vector<float>(), gv = g.to_vector<float>();
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 2; ++j) {
      const float* row = &xv[r * 8];
      EXPECT_FLOAT_EQ(gv[r * 8 + j], row[2 + j]);
      EXPECT_FLOAT_EQ(gv[r * 8 + 2 + j], row[j]);
      EXPECT_NEAR(gv[r * 8 + 4 + j], 1 - std::tanh(row[4 + j]) * std::tanh(row[4 + j]), 1e-6);
      EXPECT_FLOAT_EQ(gv[r * 8 + 6 + j], -3.0f);
    }
}

} // namespace

// kiln::optim against scalar references of torch.optim's update rules, clipping, errors, and
// the property the issue asks for: a training step replays one cached plan every step.
#include "tests/ops/reference.h"

#include <kiln/optim.h>

#include <cmath>
#include <vector>

using namespace kiln;
using namespace kt;

namespace {

class Optim : public OpsTest {};

// One parameter [3] with a fixed gradient sequence; returns the values after `steps` steps.
template <class Opt, class... Args> std::vector<double> run(int steps, Args... args) {
  Tensor w = from_vector<double>({1, -2, 0.5}).requires_grad_();
  Opt opt(nn::ParamList{{"w", &w}}, args...);
  for (int s = 0; s < steps; ++s) {
    Tensor g = w * w * 0.5 + (s + 1) * 0.1; // depends on w: a real gradient sequence
    opt.step({g});
  }
  EXPECT_TRUE(w.requires_grad());
  return w.to_vector<double>();
}

std::vector<double> grad_of(const std::vector<double>& w, int s) {
  std::vector<double> g;
  for (double x : w) g.push_back(x * x * 0.5 + (s + 1) * 0.1);
  return g;
}

TEST_F(Optim, SgdWithMomentumAndNesterovFollowsTorch) {
  for (bool nesterov : {false, true}) {
    std::vector<double> w = {1, -2, 0.5}, v(3);
    const double lr = 0.1, mu = 0.9, wd = 0.01;
    for (int s = 0; s < 4; ++s) {
      std::vector<double> g = grad_of(w, s);
      for (int i = 0; i < 3; ++i) {
        double d = g[i] + wd * w[i];
        v[i] = s == 0 ? d : mu * v[i] + d;
        w[i] -= lr * (nesterov ? d + mu * v[i] : v[i]);
      }
    }
    std::vector<double> got = run<optim::SGD>(4, lr, optim::SGDOptions{mu, 0, wd, nesterov});
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], w[i], 1e-14) << "nesterov " << nesterov;
  }
}

TEST_F(Optim, AdamAndAdamWFollowTorch) {
  for (bool capturable : {false, true})
    for (bool decoupled : {false, true}) {
      std::vector<double> w = {1, -2, 0.5}, m(3), v(3);
      const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
      for (int s = 1; s <= 5; ++s) {
        std::vector<double> g = grad_of(w, s - 1);
        for (int i = 0; i < 3; ++i) {
          if (decoupled)
            w[i] *= 1 - lr * wd;
          else
            g[i] += wd * w[i];
          m[i] += (g[i] - m[i]) * (1 - b1);
          v[i] = v[i] * b2 + g[i] * g[i] * (1 - b2);
          double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, s)) + eps;
          w[i] -= m[i] / denom * (lr / (1 - std::pow(b1, s)));
        }
      }
      optim::AdamOptions o{b1, b2, eps, wd, decoupled, capturable};
      std::vector<double> got =
          decoupled ? run<optim::AdamW>(5, lr, o) : run<optim::Adam>(5, lr, o);
      for (int i = 0; i < 3; ++i)
        EXPECT_NEAR(got[i], w[i], 1e-14)
            << "decoupled " << decoupled << ", capturable " << capturable;
    }
}

// A schedule (set_lr between steps) and a resume (set_steps) give a capturable Adam the same
// updates as the default one (its rate and count are tensors kept up to date).
TEST_F(Optim, CapturableAdamFollowsSetLrAndSetSteps) {
  auto run_schedule = [](bool capturable) {
    Tensor w = from_vector<double>({1, -2, 0.5}).requires_grad_();
    optim::AdamOptions o;
    o.capturable = capturable;
    o.weight_decay = 0.1;
    o.decoupled_weight_decay = true;
    optim::Adam opt(nn::ParamList{{"w", &w}}, 0.05, o);
    (void)opt.state(); // the tensors made before any step, as a checkpoint's loader has them
    opt.set_steps(3);  // resumed after 3 steps
    for (int s = 0; s < 4; ++s) {
      opt.set_lr(0.05 / (s + 1));
      opt.step({w * w * 0.5 + (s + 1) * 0.1});
    }
    return w.to_vector<double>();
  };
  const std::vector<double> host = run_schedule(false), device = run_schedule(true);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(device[i], host[i], 1e-14);
}

TEST_F(Optim, ClipGradNormScalesOnlyAboveTheLimit) {
  std::vector<Tensor> g = {from_vector<float>({3, 0}), from_vector<float>({0, 4})};
  Tensor norm = optim::clip_grad_norm(g, 1.0);
  EXPECT_NEAR(norm.item<double>(), 5, 1e-12);
  EXPECT_NEAR(g[0].to_vector<float>()[0], 0.6f, 1e-6);
  EXPECT_NEAR(g[1].to_vector<float>()[1], 0.8f, 1e-6);
  EXPECT_EQ(g[0].dtype(), DType::f32);
  std::vector<Tensor> small = {from_vector<float>({0.3f, 0.4f})};
  optim::clip_grad_norm(small, 1.0);
  EXPECT_EQ(small[0].to_vector<float>(), (std::vector<float>{0.3f, 0.4f}));
}

TEST_F(Optim, BadStepsThrowNamingTheParameter) {
  Tensor w = zeros({2, 2}).requires_grad_();
  optim::SGD opt({{"layer.w", &w}}, 0.1);
  EXPECT_KILN_ERROR("[optim] step got 2 gradients for 1 parameters", opt.step({w, w}));
  EXPECT_KILN_ERROR("[optim] the gradient of 'layer.w' has shape (3,), the parameter (2, 2)",
                    opt.step({zeros({3})}));
  EXPECT_KILN_ERROR("[optim] learning rate must be >= 0", optim::Adam({{"w", &w}}, -1.0));
  EXPECT_EQ(opt.steps(), 0) << "a rejected step changes nothing";
}

// Fits y = 3x - 1 with a Linear layer and Adam. After warm-up every step (forward, backward,
// Adam with a new bias correction each step) reuses one cached plan.
TEST_F(Optim, TrainingConvergesAndEveryStepReusesOnePlan) {
  manual_seed(11);
  nn::Linear lin(1, 1);
  auto params = lin.parameters();
  optim::Adam opt(params, 0.05);
  Tensor x = reshape(arange(-1.0, 1.0, 0.125, DType::f32), {16, 1});
  Tensor y = x * 3.0f - 1.0f;
  float last = 0;
  Stats warm;
  for (int step = 0; step < 300; ++step) {
    Tensor loss = nn::mse_loss(lin(x), y);
    opt.step(grad(loss, optim::tensors(params)));
    if (step == 10) {
      reset_stats();
    }
    eval(lin.weight, lin.bias, loss);
    last = loss.item<float>();
  }
  warm = stats();
  EXPECT_LT(last, 1e-4);
  EXPECT_NEAR(lin.weight.item<float>(), 3.0f, 1e-2);
  EXPECT_EQ(warm.plan_misses, 0) << warm;
  EXPECT_GT(warm.plan_hits, 0);
}

} // namespace

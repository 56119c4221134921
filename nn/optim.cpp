// SGD, Adam and AdamW with PyTorch's update rules (torch.optim, single-tensor form), and
// gradient clipping by global norm. Updates are recorded under NoGradGuard; every
// hyperparameter and bias correction is a scalar operand, so it changes without replanning
// (except in a step kiln::compile replays, which fixes the values it was traced with).
#include <kiln/autograd.h>
#include <kiln/compile.h>
#include <kiln/engine.h>
#include <kiln/error.h>
#include <kiln/optim.h>

#include <cmath>
#include <string>

namespace kiln::optim {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw Error("[optim] " + what);
}

} // namespace

std::vector<Tensor> tensors(const nn::ParamList& params) {
  std::vector<Tensor> t;
  t.reserve(params.size());
  for (const nn::NamedParam& p : params) t.push_back(*p.tensor);
  return t;
}

Tensor clip_grad_norm(std::vector<Tensor>& grads, double max_norm) {
  if (grads.empty()) fail("clip_grad_norm: no gradients");
  NoGradGuard no_grad;
  Tensor squares;
  for (const Tensor& g : grads) {
    Tensor s = sum(g.astype(DType::f64) * g.astype(DType::f64));
    squares = squares.defined() ? squares + s : s;
  }
  Tensor norm = sqrt(squares);
  Tensor scale = minimum(max_norm / (norm + 1e-6), 1.0); // never scales up
  for (Tensor& g : grads) g = g * scale;
  return norm;
}

Optimizer::Optimizer(nn::ParamList params, double lr) : params_(std::move(params)), lr_(lr) {
  for (const nn::NamedParam& p : params_)
    if (p.tensor == nullptr || !p.tensor->defined())
      fail("parameter '" + p.name + "' is undefined");
  if (!(lr >= 0)) fail("learning rate must be >= 0, got " + std::to_string(lr));
}

void Optimizer::step(const std::vector<Tensor>& grads) {
  if (grads.size() != params_.size())
    fail("step got " + std::to_string(grads.size()) + " gradients for " +
         std::to_string(params_.size()) + " parameters");
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined() || grads[i].shape() != params_[i].tensor->shape())
      fail("the gradient of '" + params_[i].name + "' has shape " +
           (grads[i].defined() ? grads[i].shape().str() : std::string("(undefined)")) +
           ", the parameter " + params_[i].tensor->shape().str());
  {
    NoGradGuard no_grad;
    ++steps_;
    for (size_t i = 0; i < grads.size(); ++i) update(i, *params_[i].tensor, grads[i]);
  }
  // The end of a training step: the updates, and the loss and anything else the step computed,
  // are evaluated together, so every step is the same plan (one CUDA-graph replay) and its
  // values need not outlive it. On a GPU this queues the work and returns.
  flush();
}

SGD::SGD(nn::ParamList params, double lr, Options o)
    : Optimizer(std::move(params), lr), o_(o), velocity_(params_.size()) {
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    fail("SGD: nesterov needs momentum > 0 and dampening 0");
}

void SGD::update(size_t i, Tensor& param, const Tensor& grad) {
  Tensor d = o_.weight_decay != 0 ? grad + param * o_.weight_decay : grad;
  if (o_.momentum != 0) {
    if (steps_ == 1) refuse_replay("SGD's first step with momentum differs from the later ones");
    Tensor& v = velocity_[i];
    v = steps_ > 1 ? v * o_.momentum + d * (1 - o_.dampening) : d; // the first step: d
    d = o_.nesterov ? d + v * o_.momentum : v;
  }
  param -= d * lr_;
}

nn::ParamList SGD::state() {
  if (o_.momentum == 0) return {};
  nn::ParamList l;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!velocity_[i].defined()) velocity_[i] = zeros_like(*params_[i].tensor);
    l.push_back({"velocity." + params_[i].name, &velocity_[i]});
  }
  return l;
}

namespace {
// A capturable Adam's step count and bias correction: f64 for f64 parameters, else f32.
DType step_dtype(const Tensor& param) {
  return param.dtype() == DType::f64 ? DType::f64 : DType::f32;
}
} // namespace

Adam::Adam(nn::ParamList params, double lr, Options o)
    : Optimizer(std::move(params), lr), o_(o), m_(params_.size()), v_(params_.size()),
      step_(params_.size()) {
  if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1))
    fail("Adam: betas must be in [0, 1), got " + std::to_string(o.beta1) + " and " +
         std::to_string(o.beta2));
}

void Adam::update(size_t i, Tensor& param, const Tensor& grad) {
  Tensor g = grad;
  if (o_.weight_decay != 0) {
    if (o_.decoupled_weight_decay)
      param *= 1 - lr_ * o_.weight_decay;
    else
      g = g + param * o_.weight_decay;
  }
  Tensor& m = m_[i];
  Tensor& v = v_[i];
  if (!m.defined()) m = zeros_like(param), v = zeros_like(param);
  m = m + (g - m) * (1 - o_.beta1); // torch's lerp
  v = v * o_.beta2 + g * g * (1 - o_.beta2);
  if (o_.capturable) {
    // The count and the correction on the device: the same ops every step.
    Tensor& t = step_[i];
    const DType ct = step_dtype(param);
    if (!t.defined()) t = zeros({}, ct, param.device());
    t = t + 1.0f;
    const Tensor c1 = 1.0f - pow(full({}, o_.beta1, ct, param.device()), t);
    const Tensor c2 = 1.0f - pow(full({}, o_.beta2, ct, param.device()), t);
    Tensor denom = sqrt(v) / sqrt(c2) + o_.eps;
    param -= m / denom * (lr_ / c1);
    return;
  }
  // A host scalar of this step: a trace would fix it.
  refuse_replay("Adam's bias correction changes every step (AdamOptions::capturable keeps it "
                "on the device)");
  const double t = static_cast<double>(steps_);
  const double correction1 = 1 - std::pow(o_.beta1, t);
  const double correction2 = 1 - std::pow(o_.beta2, t);
  Tensor denom = sqrt(v) / std::sqrt(correction2) + o_.eps;
  param -= m / denom * (lr_ / correction1);
}

nn::ParamList Adam::state() {
  nn::ParamList l;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!m_[i].defined()) m_[i] = zeros_like(*params_[i].tensor);
    if (!v_[i].defined()) v_[i] = zeros_like(*params_[i].tensor);
    l.push_back({"m." + params_[i].name, &m_[i]});
    l.push_back({"v." + params_[i].name, &v_[i]});
    if (!o_.capturable) continue;
    const Tensor& p = *params_[i].tensor;
    if (!step_[i].defined())
      step_[i] = full({}, static_cast<double>(steps_), step_dtype(p), p.device());
    l.push_back({"step." + params_[i].name, &step_[i]});
  }
  return l;
}

AdamW::AdamW(nn::ParamList params, double lr, Options o)
    : Adam(std::move(params), lr, [&] {
        o.decoupled_weight_decay = true;
        return o;
      }()) {}

} // namespace kiln::optim

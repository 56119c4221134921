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
      step_(params_.size()), lr_t_(params_.size()) {
  if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1))
    fail("Adam: betas must be in [0, 1), got " + std::to_string(o.beta1) + " and " +
         std::to_string(o.beta2));
}

// Weight decay and the moments' update, the same in both forms but for the rate the decoupled
// decay uses: `lr`, a capturable Adam's tensor, or (null) the host's.
void Adam::update_moments(size_t i, Tensor& param, const Tensor& grad, const Tensor* lr) {
  Tensor g = grad;
  if (o_.weight_decay != 0) {
    if (!o_.decoupled_weight_decay)
      g = g + param * o_.weight_decay;
    else if (lr)
      param *= 1.0f - *lr * o_.weight_decay;
    else
      param *= 1 - lr_ * o_.weight_decay;
  }
  Tensor& m = m_[i];
  Tensor& v = v_[i];
  if (!m.defined()) m = zeros_like(param), v = zeros_like(param);
  m = m + (g - m) * (1 - o_.beta1); // torch's lerp
  v = v * o_.beta2 + g * g * (1 - o_.beta2);
}

void Adam::update(size_t i, Tensor& param, const Tensor& grad) {
  if (o_.capturable) return update_on_device(i, param, grad);
  // Host scalars of this step: a trace would fix them.
  refuse_replay("Adam's bias correction changes every step (AdamOptions::capturable keeps it "
                "on the device)");
  update_moments(i, param, grad, nullptr);
  const Tensor& m = m_[i];
  const Tensor& v = v_[i];
  const double t = static_cast<double>(steps_);
  const double correction1 = 1 - std::pow(o_.beta1, t);
  const double correction2 = 1 - std::pow(o_.beta2, t);
  Tensor denom = sqrt(v) / std::sqrt(correction2) + o_.eps;
  param -= m / denom * (lr_ / correction1);
}

// The same update with the step count and the learning rate as tensors (capturable): the same
// ops every step.
void Adam::update_on_device(size_t i, Tensor& param, const Tensor& grad) {
  const DType ct = step_dtype(param);
  const Device dev = param.device();
  Tensor& t = step_[i];
  Tensor& lr = lr_t_[i];
  if (!t.defined()) t = full({}, static_cast<double>(steps_ - 1), ct, dev);
  if (!lr.defined()) lr = full({}, lr_, ct, dev);
  update_moments(i, param, grad, &lr);
  const Tensor& m = m_[i];
  const Tensor& v = v_[i];
  t = t + 1.0f;
  const Tensor c1 = 1.0f - pow(full({}, o_.beta1, ct, dev), t);
  const Tensor c2 = 1.0f - pow(full({}, o_.beta2, ct, dev), t);
  Tensor denom = sqrt(v) / sqrt(c2) + o_.eps;
  param -= m / denom * (lr / c1);
}

void Adam::set_lr(double lr) {
  Optimizer::set_lr(lr);
  for (size_t i = 0; i < lr_t_.size(); ++i)
    if (lr_t_[i].defined()) lr_t_[i] = full({}, lr, lr_t_[i].dtype(), lr_t_[i].device());
}

void Adam::set_steps(int64_t steps) {
  Optimizer::set_steps(steps);
  for (size_t i = 0; i < step_.size(); ++i)
    if (step_[i].defined())
      step_[i] = full({}, static_cast<double>(steps), step_[i].dtype(), step_[i].device());
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
    if (!lr_t_[i].defined()) lr_t_[i] = full({}, lr_, step_dtype(p), p.device());
    l.push_back({"step." + params_[i].name, &step_[i]});
    l.push_back({"lr." + params_[i].name, &lr_t_[i]});
  }
  return l;
}

AdamW::AdamW(nn::ParamList params, double lr, Options o)
    : Adam(std::move(params), lr, [&] {
        o.decoupled_weight_decay = true;
        return o;
      }()) {}

} // namespace kiln::optim

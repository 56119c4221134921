#pragma once
// Optimizers over a named parameter list (kiln/nn.h). step(grads) takes the gradients in the
// list's order (as kiln::grad returns them for the list's tensors) and rebinds each parameter
// to its updated value, recorded lazily and without gradient history. Hyperparameters may
// change between steps (a learning-rate schedule): their values reach the compiled kernels at
// run time, so the step still replays one cached plan.
#include <kiln/nn.h>

#include <vector>

namespace kiln::optim {

/// The parameters' tensors, in order: what kiln::grad differentiates with respect to.
std::vector<Tensor> tensors(const nn::ParamList& params);

/// Scales the gradients in place so that their global L2 norm is at most max_norm
/// (torch.nn.utils.clip_grad_norm_, without a host sync); returns the norm before clipping.
Tensor clip_grad_norm(std::vector<Tensor>& grads, double max_norm);

class Optimizer {
public:
  explicit Optimizer(nn::ParamList params, double lr);
  virtual ~Optimizer() = default;
  /// One update of every parameter from its gradient. It ends the training step: the updates
  /// and everything else pending that a handle holds (the step's loss) are evaluated
  /// (kiln::flush: on a GPU queued, without waiting), so each step runs as one cached plan.
  void step(const std::vector<Tensor>& grads);
  double lr() const { return lr_; }
  /// The learning rate of the following steps (a schedule). In a step kiln::compile replays it
  /// reaches the update only where the optimizer keeps it on the device (AdamOptions::capturable).
  virtual void set_lr(double lr) { lr_ = lr; }
  const nn::ParamList& parameters() const { return params_; }
  int64_t steps() const { return steps_; }
  /// The optimizer's state as named tensors ("m.<param>", "v.<param>" for Adam, "velocity.<param>"
  /// for SGD with momentum), created as zeros when no step has made them yet: save them beside
  /// the parameters (nn::save) and load them back with set_steps to resume training exactly.
  virtual nn::ParamList state() { return {}; }
  virtual void set_steps(int64_t steps) { steps_ = steps; }

protected:
  virtual void update(size_t i, Tensor& param, const Tensor& grad) = 0;
  nn::ParamList params_;
  double lr_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

/// torch.optim.SGD: v = momentum * v + (1 - dampening) * (g + weight_decay * p), then p -= lr *
/// v (or lr * (g + momentum * v) with nesterov).
class SGD : public Optimizer {
public:
  using Options = SGDOptions;
  SGD(nn::ParamList params, double lr, Options o = {});
  nn::ParamList state() override;

private:
  void update(size_t i, Tensor& param, const Tensor& grad) override;
  Options o_;
  std::vector<Tensor> velocity_;
};

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false; // AdamW
  /// Keep the step count and the learning rate in tensors per parameter (0-d, f32; f64 for f64
  /// parameters) and compute the bias correction from them on the parameter's device (PyTorch's
  /// `capturable`), so that the update is the same computation every step: a step kiln::compile
  /// traces can then be replayed, set_lr and set_steps included (both are state:
  /// "step.<param>" and "lr.<param>" in state()). By default the correction and the rate are
  /// host scalars of each step (in double, as torch.optim.Adam), which a trace would fix, so a
  /// traced Adam step is not replayed.
  bool capturable = false;
};

/// torch.optim.Adam (and AdamW with decoupled weight decay), with PyTorch's bias correction.
class Adam : public Optimizer {
public:
  using Options = AdamOptions;
  Adam(nn::ParamList params, double lr = 1e-3, Options o = {});
  nn::ParamList state() override;
  void set_lr(double lr) override;
  void set_steps(int64_t steps) override;

private:
  void update(size_t i, Tensor& param, const Tensor& grad) override;
  void update_on_device(size_t i, Tensor& param, const Tensor& g);
  void update_moments(size_t i, Tensor& param, const Tensor& grad, const Tensor* lr);
  Options o_;
  std::vector<Tensor> m_, v_;
  // capturable: each parameter's step count and learning rate (0-d; f64 for f64 parameters)
  std::vector<Tensor> step_, lr_t_;
};

/// torch.optim.AdamW: Adam whose weight decay shrinks the parameters directly (default 1e-2).
class AdamW : public Adam {
public:
  AdamW(nn::ParamList params, double lr = 1e-3, Options o = {.weight_decay = 1e-2});
};

} // namespace kiln::optim

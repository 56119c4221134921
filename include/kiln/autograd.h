#pragma once
// Reverse-mode automatic differentiation (docs/autograd.md).
//
// Mark the values to differentiate with respect to (`w.requires_grad_()`), compute a scalar
// from them with ordinary ops, and ask for the gradients:
//
//   auto loss = mean((matmul(x, w) + b - y) * (matmul(x, w) + b - y));
//   auto g = kiln::grad(loss, {w, b}); // g[0] has w's shape, g[1] has b's
//
// The backward ops are recorded lazily like any others, so the forward and backward of a step
// are planned, fused and replayed together. Gradients are values without history (no
// higher-order derivatives).
#include <kiln/tensor.h>

#include <functional>
#include <utility>
#include <vector>

namespace kiln {

struct GradOptions {
  /// The gradient of `output` to start from (its shape); undefined: 1 for a one-element output.
  Tensor grad_output;
  /// Keep the history for another grad() through the same ops. By default grad() frees it, so
  /// the values it saved need not be written to memory.
  bool retain_graph = false;
};

/// d output / d input for each input, in the order given, each of its input's shape and dtype.
/// Every input must require grad; one that `output` does not depend on gets zeros. Throws when
/// `output` does not require grad, when it has more than one element and no grad_output is
/// given, and when the history was freed by an earlier grad() (detach() values carried from one
/// step to the next, or pass retain_graph).
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const GradOptions& options = {});

/// The same value without gradient history.
Tensor detach(const Tensor& t);

/// Whether ops record gradient history on this thread now.
bool is_grad_enabled();

/// While alive, ops record no gradient history (torch.no_grad): for updates of parameters,
/// evaluation, and anything else that is not to be differentiated.
class NoGradGuard {
public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
  bool previous_;
};

/// A function returning f's value and its gradients with respect to its arguments, as
/// jax.value_and_grad: the arguments need not require grad (f sees detached copies that do).
/// f maps a vector of tensors to a one-element tensor.
template <class F> auto value_and_grad(F f) {
  return [f = std::move(f)](const std::vector<Tensor>& args) {
    std::vector<Tensor> leaves;
    leaves.reserve(args.size());
    for (const Tensor& a : args) leaves.push_back(a.detach().requires_grad_());
    Tensor value = f(leaves);
    std::vector<Tensor> grads = grad(value, leaves);
    return std::pair<Tensor, std::vector<Tensor>>(value.detach(), std::move(grads));
  };
}

} // namespace kiln

// kiln::grad: walks the gradient records from the output, newest first, and records the
// backward ops. Also the autodiff API on Tensor (requires_grad_, detach) and NoGradGuard.
#include "engine/autograd.h"
#include "engine/ops_common.h"

#include <kiln/autograd.h>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>

namespace kiln {

using namespace detail;

namespace {

Tensor handle_to(Node* n) {
  retain_handle(n);
  return Tensor(n);
}

// The nodes `out` depends on through gradient records, newest (largest id) first: every
// consumer of a node comes before it, so its gradient is complete when it is reached.
std::vector<Node*> history(Node* out) {
  std::vector<Node*> order;
  llvm::DenseSet<Node*> seen{out};
  std::vector<Node*> stack{out};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    if (!n->grad_record) {
      if (n->grad_freed)
        fail("grad",
             "the history of a value of shape {} was freed by an earlier grad(): detach() values "
             "carried from one step to the next, or pass retain_graph to the earlier call",
             n->shape());
      continue; // a leaf
    }
    for (const GradInput& in : n->grad_record->inputs)
      if (in.requires_grad && seen.insert(in.value.node()).second) stack.push_back(in.value.node());
  }
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->id > b->id; });
  return order;
}

Tensor seed_gradient(Node* out, const Tensor& given) {
  if (!given.defined()) {
    if (out->numel() != 1)
      fail("grad", "the output has shape {} ({} elements): pass grad_output for a non-scalar",
           out->shape(), out->numel());
    return ones(out->shape(), out->dtype, out->device);
  }
  Node* g = arg(given, "grad");
  if (g->shape() != out->shape())
    fail("grad", "grad_output has shape {}, but the output has shape {}", g->shape(), out->shape());
  same_device("grad", out, g);
  return cast(given.detach(), out->dtype);
}

void check_inputs(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    Node* n = arg(inputs[i], "grad");
    if (!n->requires_grad)
      fail("grad", "input {} (shape {}, {}) does not require grad: mark it with requires_grad_()",
           i, n->shape(), dtype_name(n->dtype));
  }
}

} // namespace

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const GradOptions& options) {
  Node* out = arg(output, "grad");
  check_inputs(inputs);
  if (!out->requires_grad)
    fail("grad",
         "the output (shape {}) does not require grad: no tensor it was computed from "
         "was marked with requires_grad_(), or it was computed under NoGradGuard",
         out->shape());
  const std::vector<Node*> order = history(out);
  std::vector<Tensor> keep; // holds every node of the walk until the records are freed
  keep.reserve(order.size());
  for (Node* n : order) keep.push_back(handle_to(n));

  llvm::DenseMap<Node*, Tensor> grads;
  {
    NoGradGuard no_grad;
    grads[out] = seed_gradient(out, options.grad_output);
    for (Node* n : order) {
      auto it = grads.find(n);
      if (!n->grad_record || it == grads.end()) continue;
      const Tensor g = it->second;
      GradRecord& r = *n->grad_record;
      restore_scalar_operands(r);
      llvm::SmallVector<Tensor, 3> in_grads = backward_rule(r, handle_to(n), g);
      drop_scalar_operands(r);
      for (size_t i = 0; i < r.inputs.size(); ++i) {
        if (!r.inputs[i].requires_grad) continue;
        Tensor& acc = grads[r.inputs[i].value.node()];
        acc = acc.defined() ? acc + in_grads[i] : in_grads[i];
      }
    }
  }
  std::vector<Tensor> result;
  result.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    auto it = grads.find(in.node());
    result.push_back(it != grads.end() ? it->second : zeros_like(in));
  }
  if (!options.retain_graph) {
    for (Node* n : order) {
      if (!n->grad_record) continue;
      free_grad_record(std::exchange(n->grad_record, nullptr));
      n->grad_freed = true;
    }
  }
  return result;
}

Tensor detach(const Tensor& t) {
  Node* in = arg(t, "detach");
  if (in->realized()) return publish(new_realized(in->dtype, in->device, in->buffer, in->layout));
  // A pending value gets an identity view: free, and a node whose grad flags are its own.
  Node* n = new_node(OpCode::view, in->dtype, in->device, in->shape());
  n->layout = in->layout;
  n->view.kind = ViewPrim::Kind::expand;
  n->view.shape = in->shape();
  n->distinct = true;
  add_input(n, in);
  NoGradGuard no_grad;
  return publish(n);
}

bool is_grad_enabled() {
  return grad_enabled();
}

NoGradGuard::NoGradGuard() : previous_(grad_enabled()) {
  set_grad_enabled(false);
}
NoGradGuard::~NoGradGuard() {
  set_grad_enabled(previous_);
}

bool Tensor::requires_grad() const {
  return arg(*this, "requires_grad")->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  Node* n = arg(*this, "requires_grad_");
  if (on && !is_floating(n->dtype))
    fail("requires_grad_", "only floating-point tensors can require grad, got {} (shape {})",
         dtype_name(n->dtype), n->shape());
  if (!on && n->grad_record)
    fail("requires_grad_",
         "the value (shape {}) was computed from tensors that require grad; "
         "use detach() for a copy without history",
         n->shape());
  n->requires_grad = on;
  return *this;
}

Tensor Tensor::detach() const {
  return kiln::detach(*this);
}

} // namespace kiln

// kiln::grad: walks the gradient records from the output, newest first, and records the
// backward ops. Also the autodiff API on Tensor (requires_grad_, detach) and NoGradGuard.
#include "engine/autograd.h"
#include "engine/graph.h"
#include "engine/ops_common.h"
#include "engine/plan_key.h"

#include <kiln/autograd.h>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <optional>

namespace kiln {

using namespace detail;

namespace {

// The nodes `out` depends on through gradient records, newest (largest id) first: every
// consumer of a node comes before it, so its gradient is complete when it is reached.
std::vector<Node*> history(Node* out) {
  std::vector<Node*> order;
  const uint64_t seen = next_walk_stamp();
  out->walk_stamp = seen;
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
    for (const GradInput& in : n->grad_record->inputs) {
      Node* v = in.value.node();
      if (in.requires_grad && v->walk_stamp != seen) {
        v->walk_stamp = seen;
        stack.push_back(v);
      }
    }
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

// Gradients arriving through slices of one value (chunk's or split's pieces, an LSTM's four
// gates) are gathered and placed with one concat, rather than each padded with zeros by a
// concat of its own and the padded copies added up.
class SliceGrads {
public:
  void add(Node* input, const GradInput& in, const ViewPrim& p, Tensor g) {
    auto& list = pending_[input];
    list.shape = in.shape;
    list.pieces.push_back({p, std::move(g)});
  }

  /// The gradient of `input` gathered so far through slices (undefined without any).
  Tensor take(Node* input) {
    auto it = pending_.find(input);
    if (it == pending_.end()) return Tensor();
    Pending list = std::move(it->second);
    pending_.erase(it);
    if (auto joined = join(list)) return *joined;
    Tensor sum;
    for (const Piece& p : list.pieces) {
      Tensor g = slice_backward(p.g, list.shape, p.view);
      sum = sum.defined() ? sum + g : g;
    }
    return sum;
  }

private:
  struct Piece {
    ViewPrim view;
    Tensor g;
  };
  struct Pending {
    Shape shape;
    std::vector<Piece> pieces;
  };

  // One concat of the pieces and zeros for the gaps, when they are unit-step slices of one dim
  // that do not overlap.
  static std::optional<Tensor> join(Pending& list) {
    auto& ps = list.pieces;
    const int dim = ps[0].view.dim;
    for (const Piece& p : ps)
      if (p.view.dim != dim || (p.view.step != 1 && p.view.length > 1)) return std::nullopt;
    std::sort(ps.begin(), ps.end(),
              [](const Piece& a, const Piece& b) { return a.view.start < b.view.start; });
    std::vector<Tensor> parts;
    int64_t at = 0;
    auto gap = [&](int64_t n, const Tensor& like) {
      Shape s = like.shape();
      s[dim] = n;
      parts.push_back(zeros(s, like.dtype(), like.device()));
    };
    for (const Piece& p : ps) {
      if (p.view.start < at) return std::nullopt; // overlapping slices
      if (p.view.start > at) gap(p.view.start - at, p.g);
      parts.push_back(p.g);
      at = p.view.start + p.view.length;
    }
    if (at < list.shape[dim]) gap(list.shape[dim] - at, ps[0].g);
    return parts.size() == 1 ? parts[0] : concat(parts, dim);
  }

  llvm::DenseMap<Node*, Pending> pending_;
};

// The stacks below are summed in chunks of consecutive steps (backward order) once they are
// large: a chunk's product or reduction can run as soon as the backward has passed its steps,
// beside the steps still to come, where one over the whole stack waited for the last step and
// then ran alone (an LSTM at batch 32, hidden 256, window 64: its weight's 1024 x 256 x 2048
// GEMM took 39 us after the recurrence; in chunks the step took 1.017 ms instead of 1.030,
// bench/results/2026-11-26-h100-session23.md). A chunk is whole steps of at least
// kStackChunkRows rows, at most kMaxStackChunks of them (each chunk's part is a buffer the size
// of the parameter until the sum). Stacks stay whole below two chunks' rows or below
// kStackChunkMinElems elements in the widest operand (`cols`: a chunk would not be worth its
// launch), and in f16/bf16 (their parts would round to the parameter's type before the sum).
// A weight's product and a bias's sum over one stack (an RNN's gate gradients) chunk it alike
// where their widest operands agree, and then share each chunk's concat (CSE).
constexpr int64_t kStackChunkRows = 512;
constexpr int64_t kMaxStackChunks = 8;
constexpr int64_t kStackChunkMinElems = int64_t(1) << 19;

// The ranges [first, last) of `pieces` (steps, in backward order, each [rows, ...]) summed as
// one; `cols`: the widest operand's columns.
std::vector<std::pair<size_t, size_t>> stack_chunks(const std::vector<Tensor>& pieces,
                                                    int64_t cols) {
  int64_t rows = 0;
  for (const Tensor& t : pieces) rows += t.shape()[0];
  const DType t = pieces[0].dtype();
  if (rows < 2 * kStackChunkRows || rows * cols < kStackChunkMinElems ||
      (t != DType::f32 && t != DType::f64))
    return {{0, pieces.size()}};
  const int64_t n = std::min(rows / kStackChunkRows, kMaxStackChunks);
  const int64_t target = rows / n; // equal chunks of whole steps
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t first = 0;
  int64_t in_chunk = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    in_chunk += pieces[i].shape()[0];
    // the last of the n chunks takes the rest
    const bool full = in_chunk >= target && static_cast<int64_t>(chunks.size()) + 1 < n;
    if (full || i + 1 == pieces.size()) {
      chunks.push_back({first, i + 1});
      first = i + 1;
      in_chunk = 0;
    }
  }
  return chunks;
}

Tensor stacked(const std::vector<Tensor>& pieces, std::pair<size_t, size_t> range) {
  if (range.second - range.first == 1) return pieces[range.first];
  return concat(std::vector<Tensor>(pieces.begin() + range.first, pieces.begin() + range.second),
                0);
}

// A parameter's gradient summed over the steps of a recurrence (an RNN's weights over a
// window): each step's matmul contribution P_t^T Q_t is kept as its factors, and the sum is one
// matmul over the steps' rows stacked, concat(P)^T concat(Q) (per chunk, above), instead of a
// small matmul and an add per step.
class StackedProducts {
public:
  /// Whether r's contribution to its right operand, a parameter (no history of its own), was
  /// taken as factors; then the rule need not compute it.
  bool take(const GradRecord& r, const Tensor& g) {
    if (r.op != OpCode::matmul || !r.inputs[1].requires_grad) return false;
    Node* target = gradient_target(r, 1);
    if (target->grad_record) return false;
    auto factors = weight_gradient_factors(r, g);
    if (!factors) return false;
    Factors& f = factors_[target];
    // every product must stack with the first (one orientation of the parameter, one dtype)
    auto fits = [](const Tensor& a, const Tensor& b) {
      return a.shape()[1] == b.shape()[1] && a.dtype() == b.dtype();
    };
    if (!f.p.empty() && !(fits(f.p[0], factors->first) && fits(f.q[0], factors->second)))
      return false;
    f.p.push_back(factors->first);
    f.q.push_back(factors->second);
    return true;
  }
  /// The sum of the products taken for `n` (undefined without any).
  Tensor sum(Node* n) {
    auto it = factors_.find(n);
    if (it == factors_.end()) return Tensor();
    const Factors& f = it->second;
    Tensor total;
    const int64_t cols = std::max(f.p[0].shape()[1], f.q[0].shape()[1]);
    for (auto range : stack_chunks(f.p, cols)) {
      Tensor part = matmul(transpose(stacked(f.p, range), 0, 1), stacked(f.q, range));
      total = total.defined() ? total + part : part;
    }
    factors_.erase(it);
    return total;
  }

private:
  struct Factors {
    std::vector<Tensor> p, q;
  };
  llvm::DenseMap<Node*, Factors> factors_;
};

// A parameter's gradient summed over the steps of a recurrence where an add broadcasts it over
// leading dims (an RNN's biases over a window): each step's contribution is kept as its rows
// (g as [rows, parameter elements]), and the gradient is one reduction over every step's rows
// stacked, sum(concat(rows), 0) (per chunk), instead of a reduction and an add per step. The stack
// is the same concat as the weights' stacked products (StackedProducts' P), which CSE then shares.
class StackedSums {
public:
  /// Whether r's contribution to input i, a parameter broadcast over g's leading dims, was taken.
  bool take(const GradRecord& r, unsigned i, const Tensor& g) {
    const GradInput& in = r.inputs[i];
    if (r.op != OpCode::add || !in.requires_grad || in.scalar_operand ||
        in.value.node()->grad_record || in.dtype != g.dtype())
      return false;
    const Shape& to = in.shape;
    const Shape& s = g.shape();
    const int lead = s.size() - to.size();
    if (to.size() == 0 || lead < 1) return false;
    for (int d = 0; d < to.size(); ++d)
      if (s[lead + d] != to[d]) return false; // broadcast within: unbroadcast's sum
    const int64_t cols = to.numel();
    Tensor rows = s.size() == 2 ? g : reshape(g, {s.numel() / std::max<int64_t>(cols, 1), cols});
    std::vector<Tensor>& list = rows_[in.value.node()];
    if (!list.empty() && list[0].shape()[1] != cols) return false;
    list.push_back(rows);
    return true;
  }
  /// The sum of the rows taken for `n`, shaped as n (undefined without any).
  Tensor sum(Node* n) {
    auto it = rows_.find(n);
    if (it == rows_.end()) return Tensor();
    const std::vector<Tensor>& list = it->second;
    Tensor total;
    for (auto range : stack_chunks(list, list[0].shape()[1])) {
      Tensor part = kiln::sum(stacked(list, range), {0});
      total = total.defined() ? total + part : part;
    }
    rows_.erase(it);
    return reshape(total, n->shape());
  }

private:
  llvm::DenseMap<Node*, std::vector<Tensor>> rows_;
};

bool is_slice(const GradRecord& r) {
  return r.op == OpCode::view && r.attrs.view.kind == ViewPrim::Kind::slice &&
         r.inputs[0].requires_grad;
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
  // The backward ops are part of the step: not cut early even where the forward was computed
  // already (a loss read before grad()), and not noted by the loop detector.
  const BackwardRecording backward;
  std::vector<Tensor> keep; // holds every node of the walk until the records are freed
  keep.reserve(order.size());
  for (Node* n : order) keep.push_back(handle_to(n));

  // Each node's gradient so far, at its position in `order` (Node::grad_slot): a map from nodes
  // to gradients was a sixth of a training step's backward outside its rules.
  std::vector<Tensor> grads(order.size());
  for (size_t i = 0; i < order.size(); ++i) order[i]->grad_slot = static_cast<uint32_t>(i);
  Tensor outside; // the gradient of an input the history does not reach: none
  auto grad_of = [&](Node* n) -> Tensor& {
    const uint32_t i = n->grad_slot;
    if (i < order.size() && order[i] == n) return grads[i];
    outside = Tensor();
    return outside;
  };
  SliceGrads slices;
  StackedProducts products;
  StackedSums sums;
  // n's gradient once every consumer has contributed (they all come before n in `order`).
  auto complete = [&](Node* n) -> Tensor {
    Tensor& acc = grad_of(n);
    if (Tensor s = slices.take(n); s.defined()) acc = acc.defined() ? acc + s : s;
    if (Tensor s = products.sum(n); s.defined()) acc = acc.defined() ? acc + s : s;
    if (Tensor s = sums.sum(n); s.defined()) acc = acc.defined() ? acc + s : s;
    return acc;
  };
  {
    NoGradGuard no_grad;
    grad_of(out) = seed_gradient(out, options.grad_output);
    for (Node* n : order) {
      if (!n->grad_record) continue;
      const Tensor g = complete(n);
      if (!g.defined()) continue;
      GradRecord& r = *n->grad_record;
      if (is_slice(r)) {
        slices.add(r.inputs[0].value.node(), r.inputs[0], r.attrs.view, g);
        continue;
      }
      restore_scalar_operands(r);
      unsigned taken = products.take(r, g) ? 2u : 0u; // input 1's contribution
      for (unsigned i = 0; i < r.inputs.size() && r.op == OpCode::add; ++i)
        if (sums.take(r, i, g)) taken |= 1u << i;
      llvm::SmallVector<Tensor, 3> in_grads = backward_rule(r, handle_to(n), g, taken);
      drop_scalar_operands(r);
      for (size_t i = 0; i < r.inputs.size(); ++i) {
        if (!r.inputs[i].requires_grad || (taken & (1u << i))) continue;
        Tensor& acc = grad_of(gradient_target(r, i));
        acc = acc.defined() ? acc + in_grads[i] : in_grads[i];
      }
    }
  }
  std::vector<Tensor> result;
  result.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    NoGradGuard no_grad;
    Tensor g = complete(in.node());
    result.push_back(g.defined() ? g : zeros_like(in));
  }
  engine().step_open = true; // no early flush before the step's update (adaptive_flush.cpp)
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
  if (in->realized()) {
    Tensor alias = publish(new_realized(in->dtype, in->device, in->buffer, in->layout));
    note_view(alias.node(), in);
    return alias;
  }
  // A pending value gets an identity view: free, and a node whose grad flags are its own.
  Node* n = new_node(OpCode::view, in->dtype, in->device, in->layout);
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

// Planner passes 1 and 2: collect the pending nodes an evaluation needs, and mark those that
// must be written to memory, each with the reason why (the first reason wins).
#include "engine/graph.h"
#include "engine/planner_impl.h"

#include <llvm/ADT/SmallPtrSet.h>

namespace kiln::detail {

PlanGraph collect(const Walk& w) {
  PlanGraph pg(w);
  // The walk lists the pending nodes in creation (= topological) order, realized ones among them.
  for (Node* n : w.nodes)
    if (!n->realized()) {
      pg.index[n] = static_cast<unsigned>(pg.infos.size());
      pg.infos.emplace_back().n = n;
    }
  for (Info& in : pg.infos)
    for (Node* x : in.n->inputs)
      if (Info* xi = pg.info(x)) xi->consumers.push_back(in.n);
  return pg;
}

void PlanGraph::mark(Node* n, Why reason) {
  Node* r = view_root(n);
  Info* ri = info(r);
  if (!ri || ri->materialize) return; // realized, or already marked (first reason wins)
  ri->materialize = true;             // for a view, its root: the view then reads the root's buffer
  ri->reason = reason;
}

namespace {

// The most ops a held value may take to recompute and still stay pending.
constexpr int kMaxDeferredOps = 32;

// Whether held value n may stay pending after this evaluation: an elementwise value whose
// computation in this plan (through values not written) is at most kMaxDeferredOps cheap ops
// on values that stay in memory anyway: realized or written values that a tensor holds, not
// memory a user handed kiln. Then nothing it needs is freed early or changes under it, and
// reading it later costs one small kernel.
bool deferrable(const PlanGraph& pg, Node* n) {
  llvm::SmallVector<Node*, 16> stack{n};
  llvm::SmallPtrSet<Node*, 16> seen{n};
  int ops = 0;
  while (!stack.empty()) {
    Node* x = stack.pop_back_val();
    const Info* xi = pg.info(x);
    const bool in_memory = !xi || (xi->materialize && x != n);
    if (in_memory) {
      if (view_root(x)->handles == 0 && x->handles == 0) return false; // freed but for n
      // Adopted memory (from_blob) is the user's, who may change it after this evaluation.
      if (x->realized() && x->buffer && x->buffer->external()) return false;
      continue;
    }
    const OpKind k = op_kind(x->op);
    if (x->op == OpCode::view || (!is_elementwise(k) && k != OpKind::Source) ||
        ++ops > kMaxDeferredOps)
      return false;
    for (Node* in : x->inputs)
      if (seen.insert(in).second) stack.push_back(in);
  }
  return true;
}

} // namespace

void mark_all(PlanGraph& pg, llvm::ArrayRef<Node*> targets) {
  auto mark = [&](Node* n, Why reason) { pg.mark(n, reason); };
  for (Node* t : targets) mark(t, Why::requested);
  llvm::SmallVector<Node*, 8> held; // decided once every other reason is known
  for (Info& in : pg.infos) {
    Node* n = in.n;
    if (n->handles > 0 && !n->internal) {
      if (n->op != OpCode::view && engine().defer_held)
        held.push_back(n);
      else
        mark(n, n->op == OpCode::view ? Why::viewed_by_live_tensor : Why::live_handle);
    }
    // An op's own constant that ops outside this evaluation read too (a loop's shared scalar,
    // graph.h loop_constant) stays pending: each kernel reading it computes it.
    if (n->uses > in.consumers.size() && !(n->op == OpCode::constant && n->internal))
      mark(n, Why::used_outside);
    switch (op_kind(n->op)) {
    case OpKind::Gemm:
      if (!fused_matmul(n)) mark(n, Why::gemm_result);
      for (Node* x : n->inputs) mark(x, Why::gemm_operand);
      break;
    case OpKind::Concat:
      mark(n, Why::concat_result);
      for (Node* x : n->inputs) mark(x, Why::concat_input);
      break;
    case OpKind::Transfer:
      mark(n, Why::device_transfer);
      mark(n->inputs[0], Why::copied_to_device);
      break;
    case OpKind::Index: // an unfused step: the positions it reads are known only at run time
      mark(n, Why::index_result);
      for (Node* x : n->inputs) mark(x, Why::index_operand);
      break;
    default:
      break;
    }
  }
  for (Node* n : held)
    if (!pg.info(n)->materialize && !deferrable(pg, n)) mark(n, Why::live_handle);
}

} // namespace kiln::detail

// Planner passes 1 and 2: collect the pending nodes an evaluation needs, and mark those that
// must be written to memory, each with the reason why (the first reason wins).
#include "engine/planner_impl.h"

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

void mark_all(PlanGraph& pg, llvm::ArrayRef<Node*> targets) {
  auto mark = [&](Node* n, Why reason) { pg.mark(n, reason); };
  for (Node* t : targets) mark(t, Why::requested);
  for (Info& in : pg.infos) {
    Node* n = in.n;
    if (n->handles > 0 && !n->internal)
      mark(n, n->op == OpCode::view ? Why::viewed_by_live_tensor : Why::live_handle);
    if (n->uses > in.consumers.size()) mark(n, Why::used_outside);
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
}

} // namespace kiln::detail

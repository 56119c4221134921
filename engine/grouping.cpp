// Planner pass 3: nodes into groups, one kernel (or GEMM, concat, transfer) each, walking
// consumers before producers (see planner.cpp for the rule); sibling_fusion.cpp merges
// sibling kernels.
#include "engine/planner_impl.h"

#include <functional>

#include <algorithm>

namespace kiln::detail {

namespace {

// A constant, or one cheap op (a cast, a comparison, add/sub/mul/neg) of values in memory
// or constants: recomputing it in each kernel that reads it costs less than a kernel writing
// it and each reading it back (common subexpression elimination shares such nodes, e.g. one
// cast read by two kernels). Transcendentals are not cheap: read through a broadcast they
// would be recomputed once per element of the larger space.
bool cheap_to_recompute(Node* n) {
  OpKind k = op_kind(n->op);
  if (k == OpKind::Source) return n->op == OpCode::constant;
  bool cheap = k == OpKind::Cast || k == OpKind::Compare || k == OpKind::Logical ||
               n->op == OpCode::add || n->op == OpCode::sub || n->op == OpCode::mul ||
               n->op == OpCode::neg;
  if (!cheap) return false;
  for (Node* x : n->inputs)
    if (!x->realized() && x->op != OpCode::constant) return false;
  return true;
}

} // namespace

void consumer_groups(const PlanGraph& pg, Node* n, llvm::SmallVectorImpl<int>& out,
                     bool& through_view) {
  for (Node* c : pg.info(n)->consumers) {
    if (pg.info(c)->recompute) {
      consumer_groups(pg, c, out, through_view);
      continue;
    }
    if (c->op == OpCode::view) {
      through_view = true;
      consumer_groups(pg, c, out, through_view);
      continue;
    }
    int g = pg.info(c)->group;
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
}

namespace {

int new_group(std::vector<Group>& groups, Node* root) {
  Group g;
  OpKind k = op_kind(root->op);
  g.kind = k == OpKind::Reduce                        ? Group::Kind::reduce
           : k == OpKind::Gemm && !fused_matmul(root) ? Group::Kind::gemm
           : k == OpKind::Concat                      ? Group::Kind::concat
           : k == OpKind::Transfer                    ? Group::Kind::transfer
           : k == OpKind::Index                       ? Group::Kind::index
                                                      : Group::Kind::elementwise;
  g.shape = g.kind == Group::Kind::reduce ? root->inputs[0]->layout.shape : root->shape();
  if (g.kind == Group::Kind::reduce) g.axes = root->axes;
  g.roots.push_back(root);
  groups.push_back(std::move(g));
  return static_cast<int>(groups.size()) - 1;
}

// A reduction whose consumers all sit in one kernel over the reduction's own input space
// (softmax's max and sum, layer_norm's mean and variance) joins that kernel: the kernel walks
// each output row once per reduction level and the result never goes to memory, unless a
// handle holds it (then it is also a per-row output of the kernel).
bool join_consumer_kernel(const PlanGraph& pg, std::vector<Group>& groups, Info& in) {
  Node* n = in.n;
  if (in.no_merge) return false;
  llvm::SmallVector<int, 4> cg;
  bool through_view = false;
  consumer_groups(pg, n, cg, through_view);
  if (cg.size() != 1) return false;
  Group& g = groups[cg[0]];
  bool fits =
      g.shape == n->inputs[0]->shape() &&
      (g.kind == Group::Kind::elementwise || (g.kind == Group::Kind::reduce && g.axes == n->axes));
  if (!fits) return false;
  g.kind = Group::Kind::reduce;
  g.axes = n->axes;
  in.group = cg[0];
  if (in.materialize) g.roots.push_back(n);
  return true;
}

// A group built as a FusedKernel, which can write more outputs (not a GEMM, concat, transfer or
// gather/scatter step, whose operands must be in memory before it runs).
bool is_kernel(Group::Kind k) {
  return k == Group::Kind::elementwise || k == Group::Kind::reduce;
}

// The group among n's readers `cg` that runs first (the highest index: a group runs before the
// groups created ahead of it), when n can be one more output of it: an elementwise kernel over
// n's own space that reads n at its own index. Then a value several kernels read (an LSTM's
// gate activations, read by the forward step and by the backward) is written by a kernel that
// runs anyway, not by a kernel of its own.
int first_reader(const std::vector<Group>& groups, const Info& in, llvm::ArrayRef<int> cg,
                 bool through_view) {
  if (through_view || in.no_merge || cg.empty()) return -1;
  const int g = *std::max_element(cg.begin(), cg.end());
  const Group& grp = groups[g];
  if (grp.kind != Group::Kind::elementwise || grp.shape != in.n->shape() ||
      grp.roots[0]->device != in.n->device)
    return -1;
  return g;
}

// When n's readers cannot all be one kernel (a later one depends on an earlier one's result, as
// the next time step of an LSTM's backward depends on this step's gate gradients), the readers
// that run first may still be: merges the largest such set, highest indices first, and returns
// n's readers afresh (merging renumbers groups).
void merge_first_readers(PlanGraph& pg, std::vector<Group>& groups, Node* n,
                         llvm::SmallVectorImpl<int>& cg) {
  llvm::SmallVector<int, 4> order(cg.begin(), cg.end());
  std::sort(order.begin(), order.end(), std::greater<>());
  for (size_t k = order.size() - 1; k >= 2; --k)
    if (merge_siblings(pg, groups, llvm::ArrayRef<int>(order).take_front(k)) >= 0) {
      bool through_view = false;
      cg.clear();
      consumer_groups(pg, n, cg, through_view);
      return;
    }
}

// The elementwise kernels computing pieces of one concat over one space become one kernel,
// which writes every piece into its slice of the concat (concat_slices.cpp). A piece that is
// a view (a reshape) is computed by its root's kernel.
void merge_concat_pieces(PlanGraph& pg, std::vector<Group>& groups) {
  auto computed = [&](Node* x) { return pg.info(x->op == OpCode::view ? view_root(x) : x); };
  for (Info& in : pg.infos) {
    if (in.n->op != OpCode::concat) continue;
    for (Node* x : in.n->inputs) { // each piece's shape in turn: merging renumbers groups
      Info* xi = computed(x);
      if (!xi || xi->group < 0 || groups[xi->group].kind != Group::Kind::elementwise) continue;
      llvm::SmallVector<int, 4> gs;
      for (Node* y : in.n->inputs) {
        Info* yi = computed(y);
        if (yi && yi->group >= 0 && groups[yi->group].kind == Group::Kind::elementwise &&
            groups[yi->group].shape == groups[xi->group].shape &&
            std::find(gs.begin(), gs.end(), yi->group) == gs.end())
          gs.push_back(yi->group);
      }
      if (gs.size() > 1) merge_siblings(pg, groups, gs);
    }
  }
}

} // namespace

std::vector<Group> group_all(PlanGraph& pg) {
  std::vector<Group> groups;
  for (Info& in : pg.infos) {
    in.group = -1;
    in.recompute = false;
    // Decided afresh in every pass (a retry changes who reads what), unless a retry pinned it.
    if (in.reason == Why::several_kernels && !in.no_merge) {
      in.materialize = false;
      in.reason = Why::none;
    }
  }
  for (auto it = pg.infos.rbegin(); it != pg.infos.rend(); ++it) {
    Info& in = *it;
    Node* n = in.n;
    if (n->op == OpCode::view) continue; // views are index maps, never computed
    bool elementwise = is_elementwise(op_kind(n->op)) || n->op == OpCode::copy || fused_matmul(n);
    llvm::SmallVector<int, 4> cg;
    bool through_view = false;
    if (elementwise) consumer_groups(pg, n, cg, through_view);
    if (elementwise && !in.materialize) {
      if (cg.size() == 1) {
        in.group = cg[0];
        continue;
      }
      if (int g = merge_siblings(pg, groups, cg);
          g >= 0) { // one kernel computes n once for all of them
        in.group = g;
        continue;
      }
      if (cheap_to_recompute(n)) {
        in.recompute = true;
        continue;
      }
      in.materialize = true;
      in.reason = Why::several_kernels;
      if (!through_view && !in.no_merge && cg.size() > 2) merge_first_readers(pg, groups, n, cg);
      if (int g = first_reader(groups, in, cg, through_view); g >= 0) {
        in.group = g; // computed by the reader that runs first, which writes it for the others
        groups[g].roots.push_back(n);
        continue;
      }
    }
    if (elementwise && !in.no_merge && cg.size() == 1 && !through_view &&
        is_kernel(groups[cg[0]].kind) && groups[cg[0]].shape == n->shape()) {
      in.group = cg[0];
      groups[cg[0]].roots.push_back(n); // multi-output: written by its consumers' kernel
      continue;
    }
    if (op_kind(n->op) == OpKind::Reduce) {
      if (join_consumer_kernel(pg, groups, in)) continue;
      if (!in.materialize) {
        in.materialize = true;
        in.reason = in.consumers.empty() ? Why::reduction_result : Why::reduction_shared;
      }
    }
    in.group = new_group(groups, n);
  }
  merge_concat_pieces(pg, groups);
  return groups;
}

} // namespace kiln::detail

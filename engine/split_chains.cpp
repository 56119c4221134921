// A planner pass between marking and grouping: chains one kernel could not hold are cut.
#include "engine/planner_impl.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <vector>

namespace kiln::detail {

// Chains that one kernel could not hold are cut before grouping, in one pass over the nodes in
// creation (topological) order: each cut is a kernel of its own. The builder would find the
// cuts one per planning pass over the whole graph, which made planning quadratic (100,000
// chained ops: 34 s). Two measures, each the heaviest chain of pending inputs below a node:
// - depth, its ops (views excepted: index maps, not computed), at most kMaxChainDepth; a chain
//   ends at a value read from memory (a cut, or a matmul's operand);
// - the Params fields of its leaves (each distinct view of a realized value or of a cut: its
//   pointer and strides; each constant: two), cut at kMaxParamFields - 64 (the node that
//   crosses that line still fits, with the leaves it adds). A loop such as `y = y * 0.5f + x[i]`
//   reads a new input every op. Leaves are counted once per segment of chain (between cuts); where
//   branches join, only the heaviest is followed, so the estimate is exact for chains and the
//   builder still splits what it misses (Builder::spend).
void split_long_chains(PlanGraph& pg) {
  constexpr int64_t kFieldBudget = kMaxParamFields - 64;
  struct Chain {
    uint32_t depth = 0;
    int64_t fields = 0;
    size_t segment = 0; // the node that started this chain's segment
  };
  std::vector<Chain> chain(pg.infos.size());
  llvm::DenseSet<std::pair<size_t, Node*>> counted; // (segment, leaf)
  // Whether x is read from memory: a realized value or a cut (a kernel's root), seen through
  // views.
  auto in_memory = [&](Node* x) {
    const Info* ri = pg.info(view_root(x));
    return !ri || ri->no_merge;
  };
  // The Params fields of x if this kernel reads it as a leaf (from memory, or a constant), else
  // 0: x is computed in the kernel.
  auto leaf_fields = [&](Node* x) -> int64_t {
    if (in_memory(x)) return 1 + int64_t(x->shape().size());
    return op_kind(x->op) == OpKind::Source ? 2 : 0;
  };
  for (size_t i = 0; i < pg.infos.size(); ++i) {
    Info& in = pg.infos[i];
    Chain c{0, 0, i};
    // A matmul's operands are in memory (a dot product's, or a BLAS call's), as is a kernel
    // root's value: the chains below them are other kernels', and counting them cut an LSTM's
    // training step wherever 512 ops of its time steps added up.
    const bool operands_in_memory = in.n->op == OpCode::matmul;
    for (Node* x : in.n->inputs) {
      auto it = pg.index.find(x);
      if (it == pg.index.end() || operands_in_memory) continue;
      const Chain& below = chain[it->second];
      if (!in_memory(x)) c.depth = std::max(c.depth, below.depth); // constants too
      if (leaf_fields(x) == 0 && below.fields >= c.fields) {
        c.fields = below.fields;
        c.segment = below.segment;
      }
    }
    for (Node* x : in.n->inputs) {
      const int64_t f = operands_in_memory ? 1 + int64_t(x->shape().size()) : leaf_fields(x);
      if (f > 0 && counted.insert({c.segment, x}).second) c.fields += f;
    }
    if (in.n->op != OpCode::view) ++c.depth;
    if (c.depth >= kMaxChainDepth || c.fields >= kFieldBudget) {
      // n is a kernel's root: it and the chain below it
      in.materialize = true;
      in.no_merge = true;
      in.reason = c.depth >= kMaxChainDepth ? Why::long_chain : Why::chain_inputs;
      c = Chain{0, 0, i};
    }
    chain[i] = c;
  }
}

} // namespace kiln::detail

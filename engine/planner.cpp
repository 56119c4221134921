// The fusion planner: pending graph -> Schedule.
//
// 1. collect   the pending nodes the targets depend on, in creation (= topological) order;
// 2. mark      the nodes that must be written to memory, each with the reason why
//              (requested, live handle, used outside this evaluation, reduction/GEMM result,
//              GEMM/concat operand, used by several kernels);
// 3. group     walking consumers before producers: an unmarked elementwise node joins the one
//              kernel all its consumers are in (diamonds included); a marked elementwise node
//              whose consumers all sit in one kernel over the same space joins it as an extra
//              output (multi-output fusion); a reduction whose consumers all sit in one kernel
//              over its input's space joins it (softmax, layer_norm: one kernel that walks each
//              row once per reduction level); anything else starts a kernel;
// 4. build     each group's FusedKernel (kernel_builder.cpp). Views and broadcasts become index
//              maps on the loads. If a view cannot be expressed that way the builder asks for
//              one more node to be marked, and planning starts again from step 3;
// Steps come out in dependency order (see build_all).
#include "engine/planner_impl.h"

#include "engine/graph.h"
#include "ir/errors.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>

namespace kiln::detail {

// Small matmuls: a floating matmul with at most kDotRows output rows (batch x M: a matrix
// times a vector, an RNN cell at batch 1), K <= kDotMaxK and at most kDotMaxMacs
// multiply-adds is not a BLAS call but a value of the kernel that reads it, each element one
// dot product (FusedKernel::dots). Such a GEMM is too small to fill the GPU either way, and as
// a separate cuBLAS call it costs a launch (a graph node), a written result, and a staged
// operand whenever its input moves; fused, `x @ wx + h @ wh + b` and the gates that follow are
// one kernel. Past these bounds cuBLAS's GEMV is faster than the generated dot layout, which
// reads B once per row and leaves each element's K to one block, or one cluster of at most 8
// on sm_90 (bench/cuda/matmul_gpu on the H100, before clusters: 1 x 256 x 1024 f32 3.6 us
// fused vs 4.1 through cuBLAS; 1 x 1024 x 4096 8.7 vs 6.0; 1 x 4096 x 256 bf16 10.0 vs 6.5;
// 4 x 4096 x 4096 bf16 55 vs 9.8; bench/results/2026-11-22-h100-small-matmul.md).
//
// More rows (tiled matmuls): with more than kDotRows columns too, K <= kDotMaxK and at most
// kTileMaxMacs multiply-adds, an f32 or f64 matmul read at its own (row, column) by an
// elementwise kernel is computed there, tile by tile (the GEMM-tile layout,
// codegen/cuda_emit_gemm.cpp): the seed loop's 256 x 256 x 256 step is one kernel. Read any other
// way (through a view such as the LSTM's chunk of its gates, by a reduction, transposed) the
// value the view reads gets a GEMM-tile kernel of its own (never a cuBLAS call, whose rounding
// differs: the choice must not depend on the reader, or lazy and eager would differ). Measured
// on the H100, an LSTM step at batch 32 as one kernel of eight tiled dots was slower than
// cuBLAS's two GEMMs and a kernel (21.6 vs 19.7 us per step), f16/bf16 GEMMs run on cuBLAS's tensor
// cores at about half the generated tiles' time (bf16 256 x 256 x 256: 4.1 vs 7.9 us), and larger
// GEMMs fill the GPU, where cuBLAS's kernels are faster than the generated tiles
// (bench/results/2026-11-22-h100-gemm-tile.md).
constexpr int64_t kDotRows = 4;
constexpr int64_t kDotMaxK = 1024;
constexpr int64_t kDotMaxMacs = int64_t(1) << 20;
constexpr int64_t kTileMaxMacs = int64_t(1) << 24;

bool Planner::small_matmul(const Node* n) {
  if (n->op != OpCode::matmul || !is_floating(n->dtype)) return false;
  const int mode = engine().small_matmul;
  if (mode == 0 || (mode == 1 && !n->device.is_cuda())) return false;
  const Shape& s = n->shape();
  const int64_t N = s[s.size() - 1], K = n->inputs[0]->shape()[s.size() - 1];
  if (N <= 0 || K > kDotMaxK) return false;
  if (!tiled_matmul(n)) return s.numel() * K <= kDotMaxMacs;
  // Many matrices of at most kDotRows rows each: cuBLAS's batched GEMM (the GEMM-tile layout
  // wants more rows per matrix, choose_gemm_tile).
  if (s[s.size() - 2] <= kDotRows) return false;
  // A few columns: cuBLAS's GEMV. f16/bf16: cuBLAS's tensor-core kernels, even with the
  // epilogue as a kernel of its own.
  return N > kDotRows && s.numel() * K <= kTileMaxMacs &&
         (n->dtype == DType::f32 || n->dtype == DType::f64);
}

bool Planner::tiled_matmul(const Node* n) {
  const Shape& s = n->shape();
  const int64_t N = s.size() > 0 ? s[s.size() - 1] : 1;
  return N > 0 && s.numel() / N > kDotRows;
}

Node* Planner::joined_reduction(int g) {
  for (Info& in : infos_)
    if (in.group == g && op_kind(in.n->op) == OpKind::Reduce && groups_[g].roots[0] != in.n &&
        !in.no_merge)
      return in.n;
  return nullptr;
}

Info* Planner::info(Node* n) {
  auto it = index_.find(n);
  return it == index_.end() ? nullptr : &infos_[it->second];
}

void Planner::collect() {
  // The walk lists the pending nodes in creation (= topological) order, realized ones among them.
  for (Node* n : walk_.nodes)
    if (!n->realized()) {
      index_[n] = static_cast<unsigned>(infos_.size());
      infos_.emplace_back().n = n;
    }
  for (Info& in : infos_)
    for (Node* x : in.n->inputs)
      if (Info* xi = info(x)) xi->consumers.push_back(in.n);
}

Buffer* Planner::leaf_buffer(int slot) const {
  int leaf = sched_.slots[slot].leaf;
  return leaf < 0 ? nullptr : node(leaf)->buffer.get();
}

void Planner::mark(Node* n, Why reason) {
  Node* r = view_root(n);
  Info* ri = info(r);
  if (!ri || ri->materialize) return; // realized, or already marked (first reason wins)
  ri->materialize = true;             // for a view, its root: the view then reads the root's buffer
  ri->reason = reason;
}

void Planner::mark_all(llvm::ArrayRef<Node*> targets) {
  for (Node* t : targets) mark(t, Why::requested);
  for (Info& in : infos_) {
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
    default:
      break;
    }
  }
}

// Chains that one kernel could not hold are cut before grouping, in one pass over the nodes in
// creation (topological) order: each cut is a kernel of its own. The builder would find the
// cuts one per planning pass over the whole graph, which made planning quadratic (100,000
// chained ops: 34 s). Two measures, each the heaviest chain of pending inputs below a node:
// - depth, its ops (views excepted: index maps, not computed), at most kMaxChainDepth;
// - the Params fields of its leaves (each distinct view of a realized value or of a cut: its
//   pointer and strides; each constant: two), cut at kMaxParamFields - 64 (the node that
//   crosses that line still fits, with the leaves it adds). A loop such as `y = y * 0.5f + x[i]`
//   reads a new input every op. Leaves are counted once per segment of chain (between cuts); where
//   branches join, only the heaviest is followed, so the estimate is exact for chains and the
//   builder still splits what it misses (Builder::spend).
void Planner::split_long_chains() {
  constexpr int64_t kFieldBudget = kMaxParamFields - 64;
  struct Chain {
    uint32_t depth = 0;
    int64_t fields = 0;
    size_t segment = 0; // the node that started this chain's segment
  };
  std::vector<Chain> chain(infos_.size());
  llvm::DenseSet<std::pair<size_t, Node*>> counted; // (segment, leaf)
  // The Params fields of x if this kernel reads it as a leaf (from memory: a realized value,
  // or a cut, seen through views; or a constant), else 0: x is computed in the kernel.
  auto leaf_fields = [&](Node* x) -> int64_t {
    Info* ri = info(view_root(x));
    if (!ri || ri->no_merge) return 1 + int64_t(x->shape().size());
    return op_kind(x->op) == OpKind::Source ? 2 : 0;
  };
  for (size_t i = 0; i < infos_.size(); ++i) {
    Info& in = infos_[i];
    Chain c{0, 0, i};
    for (Node* x : in.n->inputs) {
      auto it = index_.find(x);
      if (it == index_.end()) continue;
      const Chain& below = chain[it->second];
      c.depth = std::max(c.depth, below.depth); // constants too: the builder recurses into them
      if (leaf_fields(x) == 0 && below.fields >= c.fields) {
        c.fields = below.fields;
        c.segment = below.segment;
      }
    }
    for (Node* x : in.n->inputs)
      if (int64_t f = leaf_fields(x); f > 0 && counted.insert({c.segment, x}).second) c.fields += f;
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

// A constant, or one cheap op (a cast, a comparison, add/sub/mul/neg) of values in memory
// or constants: recomputing it in each kernel that reads it costs less than a kernel writing
// it and each reading it back (common subexpression elimination shares such nodes, e.g. one
// cast read by two kernels). Transcendentals are not cheap: read through a broadcast they
// would be recomputed once per element of the larger space.
bool Planner::cheap_to_recompute(Node* n) {
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

// Groups of the kernels that consume n, looking through views and recomputed values.
void Planner::consumer_groups(Node* n, llvm::SmallVectorImpl<int>& out, bool& through_view) {
  for (Node* c : info(n)->consumers) {
    if (info(c)->recompute) {
      consumer_groups(c, out, through_view);
      continue;
    }
    if (c->op == OpCode::view) {
      through_view = true;
      consumer_groups(c, out, through_view);
      continue;
    }
    int g = info(c)->group;
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
}

int Planner::new_group(Node* root) {
  Group g;
  OpKind k = op_kind(root->op);
  g.kind = k == OpKind::Reduce                        ? Group::Kind::reduce
           : k == OpKind::Gemm && !fused_matmul(root) ? Group::Kind::gemm
           : k == OpKind::Concat                      ? Group::Kind::concat
           : k == OpKind::Transfer                    ? Group::Kind::transfer
                                                      : Group::Kind::elementwise;
  g.shape = g.kind == Group::Kind::reduce ? root->inputs[0]->layout.shape : root->shape();
  if (g.kind == Group::Kind::reduce) g.axes = root->axes;
  g.roots.push_back(root);
  groups_.push_back(std::move(g));
  return static_cast<int>(groups_.size()) - 1;
}

// A reduction whose consumers all sit in one kernel over the reduction's own input space
// (softmax's max and sum, layer_norm's mean and variance) joins that kernel: the kernel walks
// each output row once per reduction level and the result never goes to memory, unless a
// handle holds it (then it is also a per-row output of the kernel).
bool Planner::join_consumer_kernel(Info& in) {
  Node* n = in.n;
  if (in.no_merge) return false;
  llvm::SmallVector<int, 4> cg;
  bool through_view = false;
  consumer_groups(n, cg, through_view);
  if (cg.size() != 1) return false;
  Group& g = groups_[cg[0]];
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

void Planner::group_all() {
  groups_.clear();
  for (Info& in : infos_) {
    in.group = -1;
    in.recompute = false;
  }
  for (auto it = infos_.rbegin(); it != infos_.rend(); ++it) {
    Info& in = *it;
    Node* n = in.n;
    if (n->op == OpCode::view) continue; // views are index maps, never computed
    bool elementwise = is_elementwise(op_kind(n->op)) || n->op == OpCode::copy || fused_matmul(n);
    llvm::SmallVector<int, 4> cg;
    bool through_view = false;
    if (elementwise) consumer_groups(n, cg, through_view);
    if (elementwise && !in.materialize) {
      if (cg.size() == 1) {
        in.group = cg[0];
        continue;
      }
      if (int g = merge_siblings(cg); g >= 0) { // one kernel computes n once for all of them
        in.group = g;
        continue;
      }
      if (cheap_to_recompute(n)) {
        in.recompute = true;
        continue;
      }
      in.materialize = true;
      in.reason = Why::several_kernels;
    }
    if (elementwise && !in.no_merge && cg.size() == 1 && !through_view &&
        groups_[cg[0]].kind != Group::Kind::gemm && groups_[cg[0]].shape == n->shape() &&
        groups_[cg[0]].kind != Group::Kind::concat &&
        groups_[cg[0]].kind != Group::Kind::transfer) {
      in.group = cg[0];
      groups_[cg[0]].roots.push_back(n); // multi-output: written by its consumers' kernel
      continue;
    }
    if (op_kind(n->op) == OpKind::Reduce) {
      if (join_consumer_kernel(in)) continue;
      if (!in.materialize) {
        in.materialize = true;
        in.reason = in.consumers.empty() ? Why::reduction_result : Why::reduction_shared;
      }
    }
    in.group = new_group(n);
  }
}

Schedule plan(const Walk& w) {
  llvm::SmallVector<Node*, 4> targets;
  for (int t : w.targets) targets.push_back(w.nodes[t]);
  Planner p(w);
  p.collect();
  p.mark_all(targets);
  p.split_long_chains();
  // Each retry marks one more node, so the loop ends within one pass per node.
  for (size_t attempt = 0;; ++attempt) {
    p.group_all();
    if (auto retry = p.build_all()) {
      if (attempt > targets.size() + p.size())
        fail("eval", "internal error: the planner did not converge ({})", why_text(retry->reason));
      engine().stats.plan_retries++;
      Info* ri = p.info(retry->node);
      ri->materialize = true;
      ri->no_merge = true;
      ri->reason = retry->reason;
      continue;
    }
    p.reuse_buffers();
    return p.take();
  }
}

} // namespace kiln::detail

// Building the steps of a plan: one FusedKernel per elementwise/reduce group (views and
// broadcasts pushed down to the loads as index maps), in dependency order. GEMM, integer
// matmul, transfer and index steps: unfused_steps.cpp; concats: concat_slices.cpp.
#include "engine/step_builder.h"

#include <algorithm>

namespace kiln::detail {

IndexClass classify(const Shape& shape, const Shape& strides) {
  bool scalar = true;
  for (int i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != 0) scalar = false;
  if (scalar) return IndexClass::scalar;
  return is_contiguous(Layout{shape, strides, 0}) ? IndexClass::contiguous : IndexClass::strided;
}

Origin origin(Node* n) {
  return {n->id, n->op};
}

// Why fusion stopped at an input: it is in memory already, or an earlier step wrote it.
void note_input(StepBuilder& p, Step& st, int slot, Origin what) {
  int producer = p.sched.slots[slot].producer;
  st.notes.push_back(
      {what, false, producer >= 0 ? p.info(p.node(producer))->reason : Why::realized_before});
}

// Slot and layout of an operand that is realized or reached through views of a written root.
std::pair<int, Layout> operand(StepBuilder& p, Node* x) {
  Node* r = view_root(x);
  return {p.slot_for_leaf(r), x->layout};
}

void note_outputs(StepBuilder& p, Step& st) {
  for (int i : st.realizes) {
    Node* n = p.node(i);
    st.notes.push_back({origin(n), true, p.info(n)->reason});
  }
}

namespace {

// A shape without its dims of one.
Shape squeezed(const Shape& s) {
  Shape out;
  for (int d = 0; d < s.size(); ++d)
    if (s[d] != 1) out.push_back(s[d]);
  return out;
}

// A chain of views applied between a kernel's iteration space and a value, outermost first.
struct Transform {
  int parent = -1; // -1: identity
  ViewPrim prim;
  Node* at = nullptr; // the node whose input is being viewed (for retry on failure)
};

class Builder {
public:
  Builder(StepBuilder& p, int group, FusedKernel& k) : p_(p), group_(group), k_(k) {}

  // Value of n evaluated at the kernel's index mapped through transform t.
  int value(Node* n, int t) {
    // A pending constant is emitted at each read, as if every reader had a constant of its own:
    // a loop's readers share one node (graph.h, loop_constant), and their kernels must be the
    // ones compiled before the loop was found, not variants that need compiling again.
    if (n->op == OpCode::constant && !n->realized()) return compute(n, t);
    auto key = std::make_pair(n, t);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    // Another chain of views that reads the same element of n at every index (a transpose of
    // a reshape that undoes it, views that differ only in dims of one) is the same value.
    if (int v = same_elements(n, t); v >= 0) return memo_[key] = v;
    if (retry) return 0;
    int v = compute(n, t);
    memo_[key] = v;
    if (!retry) computed_at_[n].push_back(ComputedAt{t, v, std::nullopt});
    return v;
  }

  // The folded value of reduction n (a node of this kernel over its whole space).
  int reduction(Node* n) {
    if (auto it = reduced_.find(n); it != reduced_.end()) return it->second;
    if (n->inputs[0]->shape() != k_.shape || n->axes != k_.reduce_axes) {
      retry = Retry{n, Why::reduction_other_space};
      return 0;
    }
    if (reduction_units_ + reduction_units(n) > kMaxKernelReductions) {
      split_reductions(n);
      return 0;
    }
    reduction_units_ += reduction_units(n);
    if (!p_.info(n)->materialize) fused.push_back(n);
    TapeInst inst;
    inst.op = n->op;
    inst.dtype = n->dtype;
    inst.a = value(n->inputs[0], -1);
    if (retry) return 0;
    int v = emit(inst);
    reduced_[n] = v;
    return v;
  }

  std::optional<Retry> retry;
  // Retries that do not stop the build: an operand a dot reads from memory is in any case
  // read from its slot, so the rest of the kernel (earlier steps of a loop) is still looked at.
  std::vector<Retry> more;
  std::vector<Node*> fused;           // nodes computed in registers
  std::vector<ConstantUse> constants; // where constant nodes' values sit in the tape (step -1)

private:
  int emit(TapeInst inst) {
    k_.tape.push_back(inst);
    return static_cast<int>(k_.tape.size()) - 1;
  }

  int push(int t, const ViewPrim& prim, Node* at) {
    // The same broadcast of one value by several consumers is one transform, so the value is
    // computed once (memo_ is keyed by transform). Only broadcasts: they never fail, so the
    // node a failed transform names for a retry does not matter.
    if (prim.kind == ViewPrim::Kind::expand)
      for (size_t i = 0; i < transforms_.size(); ++i)
        if (transforms_[i].parent == t && transforms_[i].prim.kind == prim.kind &&
            transforms_[i].prim.shape == prim.shape)
          return static_cast<int>(i);
    transforms_.push_back({t, prim, at});
    return static_cast<int>(transforms_.size()) - 1;
  }

  // Which element of n transform t reads at each index of the iteration space: the map's offset
  // and strides into n's elements in row-major order (the strides of dims of one zero: they
  // never move). Empty where a view cannot be expressed with strides (then compute's map_out
  // asks for a retry).
  llvm::SmallVector<int64_t, 8> index_map(Node* n, int t) const {
    Layout l = contiguous_layout(n->shape());
    for (int i = t; i >= 0; i = transforms_[i].parent) {
      std::optional<Layout> next = apply_view(l, transforms_[i].prim);
      if (!next) return {};
      l = *next;
    }
    llvm::SmallVector<int64_t, 8> map{l.offset};
    for (int d = 0; d < l.shape.size(); ++d) map.push_back(l.shape[d] == 1 ? 0 : l.strides[d]);
    return map;
  }

  // The value of n already computed at the elements transform t reads, else -1 (a retry where n
  // would be computed at more than kMaxIndexMaps maps). Most values are read through one
  // transform: their maps are never worked out. Not inlined: value() recurses once per op of
  // a chain (up to kMaxChainDepth), and the maps in its frame overflowed the stack under
  // AddressSanitizer.
  [[gnu::noinline]] int same_elements(Node* n, int t) {
    auto it = computed_at_.find(n);
    if (it == computed_at_.end()) return -1;
    const llvm::SmallVector<int64_t, 8> map = index_map(n, t);
    if (map.empty()) return -1;
    for (ComputedAt& c : it->second) {
      if (!c.map) c.map = index_map(n, c.transform);
      if (*c.map == map) return c.value;
    }
    if (computes_here(n) && it->second.size() >= kMaxIndexMaps)
      retry = Retry{n, Why::many_index_maps};
    return -1;
  }

  // Whether value(n) computes n in this kernel (rather than loading it, or reading through it).
  bool computes_here(Node* n) const {
    if (n->realized() || n->op == OpCode::view) return false;
    const Info* in = p_.info(n);
    return in && in->group == group_;
  }

  // Layout l of a value, seen from the iteration space through transform t (t is the innermost
  // transform; its parents lead out to the iteration space). Sets `retry` on failure.
  Layout map_out(Layout l, int t) {
    for (int i = t; i >= 0; i = transforms_[i].parent) {
      const Transform& tr = transforms_[i];
      auto next = apply_view(l, tr.prim);
      if (!next) {
        retry = Retry{view_root(tr.at->inputs[0]), Why::reshape_not_strided};
        return l;
      }
      l = *next;
    }
    return l;
  }

  // Whether transform t reads reduction n's result at each element's own output row: the
  // result's index map over the iteration space is the projection onto the kept dims.
  [[gnu::noinline]] bool reads_own_row(Node* n, int t) {
    Layout l = map_out(Layout{n->shape(), contiguous_strides(n->shape()), 0}, t);
    if (retry || l.shape != k_.shape || l.offset != 0) return false;
    Shape kept;
    for (int d = 0; d < k_.shape.size(); ++d)
      if (!(k_.reduce_axes & (1u << d))) kept.push_back(k_.shape[d]);
    Shape ks = contiguous_strides(kept);
    for (int d = 0, j = 0; d < k_.shape.size(); ++d) {
      bool reduced = k_.reduce_axes & (1u << d);
      int64_t want = reduced ? 0 : ks[j++];
      if (k_.shape[d] != 1 && l.strides[d] != want) return false;
    }
    return true;
  }

  [[gnu::noinline]] int load(Node* n, int slot, Layout l, int t) {
    int idx = input(n, slot, l, t);
    if (retry) return 0;
    TapeInst ld;
    ld.op = OpCode::load;
    ld.dtype = n->dtype;
    ld.a = idx;
    return emit(ld);
  }

  // The kernel input reading slot through layout l of value n, carried out to the iteration
  // space through transform t (an existing input when one reads the same map).
  int input(Node* n, int slot, Layout l, int t) {
    l = map_out(l, t);
    if (retry) return 0;
    if (l.shape != k_.shape) { // cannot happen: transforms end in the iteration space
      retry = Retry{n, Why::index_map_mismatch};
      return 0;
    }
    int idx = -1;
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      const KernelInput& in = k_.inputs[i];
      if (in.slot == slot && in.strides == l.strides && in.offset == l.offset) idx = int(i);
    }
    if (idx < 0) {
      KernelInput in;
      in.slot = slot;
      in.dtype = n->dtype;
      in.strides = l.strides;
      in.offset = l.offset;
      in.cls = classify(k_.shape, l.strides);
      in.origin = origin(n);
      k_.inputs.push_back(in);
      idx = static_cast<int>(k_.inputs.size()) - 1;
      spend(1 + l.shape.size()); // its pointer and at most one stride per dim
    }
    return idx;
  }

  // Params fields (8 bytes each: codegen/cuda_params.cpp) counted as they are added. Past the
  // budget the kernel is split: the innermost value of this kernel being computed, not yet an
  // output, is materialized (a retry) and becomes a kernel of its own. A loop recorded without
  // evaluation can otherwise chain thousands of ops and inputs into one kernel, past the 32 KB
  // CUDA allows for kernel parameters (and the time NVRTC takes grows with it).
  void spend(int64_t fields) {
    fields_ += fields;
    if (fields_ <= kMaxParamFields || retry) return;
    split(Why::params_over_budget);
  }

  // Over a budget at `n`: materialize a value this kernel has already computed beside n (an
  // operand of the innermost value being computed around n, such as the partial sum before
  // `acc + a @ b`), so that the work done so far becomes a kernel of its own and this one
  // continues from its result. Without one, split().
  void split_before(Node* n, Why reason) {
    if (stop_at_more()) return;
    if (Node* x = computed_beside(n)) {
      retry = Retry{x, reason};
      return;
    }
    split(reason);
  }

  // The operand of the innermost value being computed around n that this kernel has computed
  // already and may write (split_before), or null.
  Node* computed_beside(Node* n) const {
    for (auto it = computing_.rbegin(); it != computing_.rend(); ++it) {
      if (*it == n || p_.info(*it)->materialize) continue;
      for (Node* x : (*it)->inputs) {
        const Info* xi = p_.info(x);
        if (x == n || !xi || xi->group != group_ || xi->materialize || !computed(x)) continue;
        return x;
      }
      break; // only the innermost value: splitting further out would leave n's kernel as big
    }
    return nullptr;
  }

  // Over a budget at n, which therefore cannot be computed in this kernel: split_before, and
  // where that names nothing (every value being computed is an output already: a loop's flush
  // cut inside its second softmax requested the row max and what reads it), n gets a kernel of
  // its own. The caller's value then stands for nothing in the tape: a retry must be set.
  void split_off(Node* n, Why reason) {
    split_before(n, reason);
    if (!retry) retry = Retry{n, reason};
  }

  // Over the reductions' budget at n: write the outermost value being computed that holds
  // none of the reductions this kernel has counted (none were counted since it was entered), so
  // that n and the rest of that value's work become a kernel of their own in one round. An
  // accumulator that reads a new softmax every step is then cut once a step, not once per node
  // of each softmax, each cut a round of planning the whole graph (quadratic in the steps;
  // bench/results/2026-11-28-h100-session40.md). Where only n qualifies (a chain of softmaxes
  // within the kernel), split_off writes the value before n instead.
  void split_reductions(Node* n) {
    for (size_t i = 1; i + 1 < computing_.size(); ++i) { // not the kernel's root, nor n
      if (units_at_entry_[i] != reduction_units_ || p_.info(computing_[i])->materialize) continue;
      if (stop_at_more()) return;
      retry = Retry{computing_[i], Why::too_many_reductions};
      return;
    }
    split_off(n, Why::too_many_reductions);
  }

  bool computed(Node* x) const {
    for (const auto& [key, value] : memo_)
      if (key.first == x) return true;
    return false;
  }

  // Materialize the innermost value of this kernel being computed that is not an output yet:
  // it becomes a kernel of its own, and this one loads it.
  void split(Why reason) {
    if (stop_at_more()) return;
    for (auto it = computing_.rbegin(); it != computing_.rend(); ++it)
      if (!p_.info(*it)->materialize) {
        retry = Retry{*it, reason};
        return;
      }
  }

  // A kernel that grew past a budget after a retry that did not stop it (more) was larger than
  // it will be once that retry's node is written: the build stops there, with no retry of its
  // own, which could cut the kernel where the planner would not.
  bool stop_at_more() {
    if (more.empty()) return false;
    retry = more.front();
    more.erase(more.begin());
    return true;
  }

  // The group nodes whose compute() is running, outermost first.
  // n on the stack of values being computed, with the reduction units counted when it was
  // entered (split_reductions).
  struct Computing {
    Builder& b;
    Computing(Builder& builder, Node* n) : b(builder), n(n) {
      b.computing_.push_back(n);
      b.units_at_entry_.push_back(b.reduction_units_);
      b.dots_around_.try_emplace(n, b.k_.dots.size(), b.k_.dots.size());
    }
    ~Computing() {
      b.computing_.pop_back();
      b.units_at_entry_.pop_back();
      b.dots_around_[n].second = b.k_.dots.size();
    }
    Node* n;
  };

  // Over the dots' budget at n: the cut a round of planning would make (split_off) is made as
  // a retry that does not stop the build (`more`), and the count goes on without the dots that
  // leave the kernel with it, so that one round finds every cut. One cut a round took a round
  // per cut, each grouping the whole graph again: 48 rounds for a plan of an LSTM's training
  // step at batch 1, where a kernel reads a dot of each of its 64 time steps. Only the
  // cuts whose dots are known: n itself (the value split() would write), or the partial sum
  // beside n (`acc + a @ b`) when every dot counted since the last cut is in it or after it;
  // else false, and the caller cuts as before. Only while `more` holds nothing but such cuts.
  bool cut_for_dots(Node* n) {
    for (const Retry& r : more)
      if (r.reason != Why::too_many_dots) return false;
    if (Node* x = computed_beside(n)) {
      const auto it = dots_around_.find(x);
      if (it == dots_around_.end() || it->second.first != dots_cut_) return false;
      more.push_back(Retry{x, Why::too_many_dots});
      dots_cut_ = it->second.second; // x's dots leave; those after it stay
      return true;
    }
    for (auto it = computing_.rbegin(); it != computing_.rend(); ++it)
      if (!p_.info(*it)->materialize) {
        if (*it != n) return false;
        more.push_back(Retry{n, Why::too_many_dots});
        ++dots_cut_; // n's own dot, added next, leaves
        return true;
      }
    return false;
  }

  // A small matmul n (small_matmul.cpp) read through transform t: one dot product per
  // element. One that cannot be computed where it is read (by a reduction, through a
  // broadcast, a tiled one through another view) or is split off for other reasons (its
  // result is another dot's operand, the parameter budget) gets a kernel of its own (the
  // GEMM-tile layout for a tiled one), never a cuBLAS call: eagerly it is computed alone, and
  // the two must round alike. Its operands are in memory (marked as GEMM operands).
  // Where element i's row of A and column of B start are index maps like a load's: A's layout
  // with the stride of n's last dim (N) set to 0, B's with that of M set to 0, carried out
  // through t.
  // What to write to memory when matmul n, reached through transform t, cannot be computed
  // there: the value the innermost view op reads (n, or the elementwise value around n that
  // the view reads, such as an LSTM's gates, so that one kernel computes them all at their own
  // rows and columns). An op's implicit broadcast of its operand is a transform too, but not a
  // view op: then n itself.
  Node* viewed(Node* n, int t) const {
    if (t < 0 || transforms_[t].at->op != OpCode::view) return n;
    Node* v = view_root(transforms_[t].at->inputs[0]);
    const Info* vi = p_.info(v);
    return vi && !vi->no_merge ? v : n;
  }

  // Not inlined (nor load, reads_own_row): compute() recurses once per op of a chain (up to
  // kMaxChainDepth), and their layouts in its frame took 9.6 KB of stack a level under
  // AddressSanitizer, past an 8 MB stack.
  [[gnu::noinline]] int dot(Node* n, int t) {
    if (k_.kind != FusedKernel::Kind::elementwise) { // the reduce layouts have no dots
      // Split the matmul off; if it already is a kernel's own output, a reduction joined that
      // kernel (its reader's other input, softmax's sum say): split that off instead.
      Node* joined = p_.info(n)->no_merge ? p_.joined_reduction(group_) : nullptr;
      retry = Retry{joined ? joined : n, Why::small_matmul_reduced};
      return 0;
    }
    Layout out = map_out(contiguous_layout(n->shape()), t);
    if (retry) return 0;
    for (int d = 0; d < k_.shape.size(); ++d)
      if (k_.shape[d] > 1 && out.strides[d] == 0) {
        retry = Retry{viewed(n, t), Why::small_matmul_broadcast};
        return 0;
      }
    // An operand is read at other elements' indices, so it must be in memory before the kernel
    // starts: never an output of the same kernel (a multi-output root of this group).
    for (Node* x : n->inputs)
      if (Info* xi = p_.info(view_root(x)); xi && xi->group == group_ && !xi->recompute)
        more.push_back(Retry{view_root(x), Why::dot_operand_same_kernel});
    if (k_.dots.size() - dots_cut_ >= max_kernel_dots() && !cut_for_dots(n)) {
      split_off(n, Why::too_many_dots);
      return 0;
    }
    const int r = n->shape().size();
    auto [sa, la] = operand(p_, n->inputs[0]);
    auto [sb, lb] = operand(p_, n->inputs[1]);
    Shape as = la.strides, bs = lb.strides;
    as[r - 1] = 0; // A[..., m, :] does not move with n
    bs[r - 2] = 0; // B[..., :, n] does not move with m
    KernelDot d;
    d.a = input(n->inputs[0], sa, Layout{n->shape(), as, la.offset}, t);
    d.b = input(n->inputs[1], sb, Layout{n->shape(), bs, lb.offset}, t);
    if (retry) return 0;
    // A tiled matmul (tiled_matmul) is read at its own (row, column), or what the
    // view reads is written by a kernel of its own (after the retry).
    const int kr = k_.shape.size();
    if (tiled_matmul(n) && (t != -1 || kr < 2 || k_.inputs[d.a].strides[kr - 1] != 0 ||
                            k_.inputs[d.b].strides[kr - 2] != 0)) {
      retry = Retry{viewed(n, t), Why::tiled_matmul_elsewhere};
      return 0;
    }
    // So is a few-column one, except through a view that only adds or drops dims of one (a
    // matrix times a vector): the dot layout splits K by the kernel's size (small_matmul.cpp).
    if (few_column_matmul(n) && t != -1 && squeezed(k_.shape) != squeezed(n->shape())) {
      retry = Retry{viewed(n, t), Why::few_column_matmul_viewed};
      return 0;
    }
    d.K = la.shape[r - 1];
    d.a_k = la.strides[r - 1];
    d.b_k = lb.strides[r - 2];
    d.same_k = static_cast<int>(k_.dots.size());
    for (size_t j = 0; j < k_.dots.size(); ++j)
      if (k_.dots[j].K == d.K) {
        d.same_k = static_cast<int>(j);
        break;
      }
    k_.dots.push_back(d);
    spend(3); // K and the two strides
    if (!p_.info(n)->materialize) fused.push_back(n);
    TapeInst inst;
    inst.op = OpCode::matmul;
    inst.dtype = n->dtype;
    inst.a = static_cast<int>(k_.dots.size()) - 1;
    return emit(inst);
  }

  int compute(Node* n, int t) {
    if (retry) return 0;
    if (n->realized()) return load(n, p_.slot_for_leaf(n), n->layout, t);
    if (n->op == OpCode::view) return value(n->inputs[0], push(t, n->view, n));
    Info* in = p_.info(n);
    if (in->group != group_ && !in->recompute)
      return load(n, p_.slot_for_leaf(n), contiguous_layout(n->shape()), t);
    Computing on_stack(*this, n);
    if (computing_.size() > kMaxChainDepth) {
      split(Why::long_chain);
      if (retry) return 0;
    }
    if (op_kind(n->op) == OpKind::Reduce) {
      if (!reads_own_row(n, t)) {
        if (!retry) retry = Retry{n, Why::reduction_read_elsewhere};
        return 0;
      }
      return reduction(n);
    }
    if (in->materialize && t != -1) { // an output of this kernel read at another index
      retry = Retry{n, Why::view_of_own_output};
      return 0;
    }
    if (op_kind(n->op) == OpKind::Gemm) return dot(n, t); // a small matmul
    if (!in->materialize && !in->counted) fused.push_back(n);
    in->counted = in->recompute || n->op == OpCode::constant; // counted once, emitted per read
    TapeInst inst;
    inst.op = n->op;
    inst.dtype = n->dtype;
    switch (op_kind(n->op)) {
    case OpKind::Source:
      spend(2); // its constant, or an iota's start and step, or rand's key and counter
      if (n->op != OpCode::constant && (t != -1 || k_.kind != FusedKernel::Kind::elementwise)) {
        retry = Retry{n, Why::source_through_view};
        return 0;
      }
      inst.imm = n->scalar;
      inst.iimm = n->iscalar;
      inst.imm2 = n->scalar2;
      inst.seed = n->seed;
      inst.counter = n->counter;
      if (n->op == OpCode::constant)
        constants.push_back(
            {static_cast<int>(n->walk_index), -1, static_cast<int>(k_.tape.size())});
      return emit(inst);
    default: {
      int ops[3] = {-1, -1, -1};
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        Node* x = n->inputs[i];
        int tx = t;
        if (x->shape() != n->shape()) {
          ViewPrim b;
          b.kind = ViewPrim::Kind::expand;
          b.shape = n->shape();
          tx = push(t, b, n);
        }
        ops[i] = value(x, tx);
      }
      inst.a = ops[0];
      inst.b = ops[1];
      inst.c = ops[2];
      return emit(inst);
    }
    }
  }

  StepBuilder& p_;
  int group_;
  FusedKernel& k_;
  std::vector<Transform> transforms_;
  llvm::DenseMap<std::pair<Node*, int>, int> memo_; // (node, transform) -> tape value
  struct ComputedAt {
    int transform = 0;
    int value = 0;
    std::optional<llvm::SmallVector<int64_t, 8>> map; // index_map, once another transform asks
  };
  llvm::DenseMap<Node*, llvm::SmallVector<ComputedAt, 1>> computed_at_; // values computed per node
  llvm::DenseMap<Node*, int> reduced_; // reduction -> its tape value
  int reduction_units_ = 0;            // their shared memory (reduction_units)
  llvm::SmallVector<Node*, 32> computing_;
  llvm::SmallVector<int, 32> units_at_entry_; // reduction_units_ when computing_[i] was entered
  // Per value computed: the dots counted when its computing began and when it ended
  // (cut_for_dots); dots_cut_: those counted up to the last such cut.
  llvm::DenseMap<Node*, std::pair<size_t, size_t>> dots_around_;
  size_t dots_cut_ = 0;
  int64_t fields_ = 0;
};

} // namespace

Node* StepBuilder::joined_reduction(int g) {
  for (Info& in : pg.infos)
    if (in.group == g && op_kind(in.n->op) == OpKind::Reduce && groups[g].roots[0] != in.n &&
        !in.no_merge)
      return in.n;
  return nullptr;
}

// A realized node gets a slot of its own, even where others share its buffer (the rows x[t] of
// a sequence): each slot's base moves with its own node's offset, so a plan does not depend on
// where the nodes sit relative to each other (a loop's flush that wraps around its sequence is
// the same plan as one that does not).
int StepBuilder::slot_for_leaf(Node* n) {
  if (auto it = slot_of.find(n); it != slot_of.end()) return it->second;
  Slot s;
  if (n->realized()) {
    s.leaf = static_cast<int>(n->walk_index);
    s.leaf_offset = n->layout.offset;
    sched.slots.push_back(s);
    const int id = static_cast<int>(sched.slots.size()) - 1;
    slot_of[n] = id;
    return id;
  }
  s.bytes = static_cast<size_t>(n->nbytes());
  s.producer = static_cast<int>(n->walk_index);
  sched.slots.push_back(s);
  int id = static_cast<int>(sched.slots.size()) - 1;
  slot_of[n] = id;
  return id;
}

// An elementwise or reduce group: one fused kernel writing the group's roots.
std::optional<Retry> StepBuilder::kernel_step(int g) {
  const Group& grp = groups[g];
  Step st;
  st.device = grp.roots[0]->device;
  FusedKernel& k = st.kernel()->kernel;
  k.shape = grp.shape;
  k.kind =
      grp.kind == Group::Kind::reduce ? FusedKernel::Kind::reduce : FusedKernel::Kind::elementwise;
  k.reduce_axes = grp.axes;
  Builder b(*this, g, k);
  Shape kept;
  for (int i = 0; i < k.shape.size(); ++i)
    if (!(k.reduce_axes & (1u << i))) kept.push_back(k.shape[i]);
  for (Node* root : grp.roots) {
    bool reduced = op_kind(root->op) == OpKind::Reduce;
    int v = reduced ? b.reduction(root) : b.value(root, -1);
    if (b.retry) break;
    k.outputs.push_back(output_for(st, root, v, reduced ? kept : k.shape, reduced));
    if (auto it = copies.find(root); it != copies.end())
      for (const Slice& s : it->second) k.outputs.push_back(slice_output(st, root, v, s, reduced));
  }
  if (!b.more.empty()) {
    if (b.retry) b.more.push_back(*b.retry);
    b.retry = b.more.front();
    more_retries.insert(more_retries.end(), b.more.begin() + 1, b.more.end());
  }
  if (b.retry) {
    // Kept in place, unfinished, so that the steps of the groups built after it are where
    // the schedule's indices say (build_all goes on to find the other groups' retries).
    sched.steps.push_back(std::move(st));
    return b.retry;
  }
  for (Node* n : b.fused) st.fused.push_back(static_cast<int>(n->walk_index));
  for (ConstantUse c : b.constants) {
    c.step = static_cast<int>(sched.steps.size()); // the index st takes below
    sched.constants.push_back(c);
  }
  for (const KernelInput& in : k.inputs) note_input(*this, st, in.slot, in.origin);
  note_outputs(*this, st);
  sched.steps.push_back(std::move(st));
  return std::nullopt;
}

std::optional<Retry> StepBuilder::build_group(int g) {
  const Group& grp = groups[g];
  Node* root = grp.roots[0];
  switch (grp.kind) {
  case Group::Kind::gemm:
    sched.steps.push_back(is_floating(root->dtype) ? gemm_step(root) : integer_matmul(root));
    return std::nullopt;
  case Group::Kind::transfer:
    sched.steps.push_back(transfer_step(root));
    return std::nullopt;
  case Group::Kind::concat:
    concat_steps(root);
    return std::nullopt;
  case Group::Kind::index:
    sched.steps.push_back(index_step(root));
    return std::nullopt;
  case Group::Kind::elementwise:
  case Group::Kind::reduce:
    break;
  }
  return kernel_step(g);
}

std::variant<Schedule, std::vector<Retry>> build_all(PlanGraph& pg,
                                                     const std::vector<Group>& groups) {
  StepBuilder b(pg, groups);
  for (Info& in : pg.infos) in.counted = false;
  b.plan_slices();
  // Groups were created consumers-first; a group reads only the primary outputs of groups
  // whose primary node is older, so building in reverse creation order is a topological order.
  // A group that fails does not stop the others: a flush of many loop bodies has the same
  // failure in every body, and planning again once per failure would cost the whole graph each
  // time (slots are made on first use, so a group reading a failed one still builds).
  std::vector<Retry> retries;
  for (int g = static_cast<int>(groups.size()) - 1; g >= 0; --g)
    if (auto r = b.build_group(g)) retries.push_back(*r);
  retries.insert(retries.end(), b.more_retries.begin(), b.more_retries.end());
  if (!retries.empty()) return retries;
  // Pending views that must survive are realized as aliases of their (now written) roots.
  for (Info& in : pg.infos) {
    Node* n = in.n;
    if (n->op == OpCode::view && n->handles > 0) {
      b.sched.aliases.push_back(static_cast<int>(n->walk_index));
      b.sched.alias_ids.push_back(n->id);
    }
  }
  return std::move(b.sched);
}

} // namespace kiln::detail

#include "engine/trace.h"

#include "engine/adaptive_flush.h"
#include "engine/executor.h"
#include "engine/graph.h"
#include "engine/owner_thread.h"
#include "ir/errors.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <stdexcept>

namespace kiln::detail {

namespace {

// Why the evaluation of `pending` (walked in `w`) could not be replayed, known before planning;
// empty if it can.
std::string unreplayable(const Walk& w, llvm::ArrayRef<Node*> pending) {
  for (const Node* n : w.nodes)
    if (n->op == OpCode::rand_uniform || n->op == OpCode::rand_normal)
      return "it draws random numbers (every replay would draw the same ones)";
  for (const Node* t : pending)
    if (t->grad_record) return "a result carries gradient history";
  return "";
}

int index_of(llvm::ArrayRef<Node*> nodes, const Node* n) {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == n) return static_cast<int>(i);
  return -1;
}

// Uses a replay holds on the nodes it makes, released however the replay ends: a node the plan
// did not realize (a step failed) then dies unseen.
struct HeldUses {
  llvm::SmallVector<Node*, 16> nodes;
  HeldUses() = default;
  HeldUses(const HeldUses&) = delete;
  HeldUses& operator=(const HeldUses&) = delete;
  ~HeldUses() {
    for (Node* n : nodes) release_use(n);
  }
};

} // namespace

TracedEval::~TracedEval() {
  for (Node* n : captured_) release_handle(n);
}

TracedEval::Source TracedEval::source_of(Node* n, llvm::ArrayRef<Node*> known) {
  if (int j = index_of(known, n); j >= 0) return {Source::known, j};
  // A view the function made of an input is realized when made, sharing the input's buffer (a
  // detach(), a transpose): a replay makes it again from the call's input. Which node a view
  // was made of is remembered while tracing (note_view); sharing a buffer is not enough (a
  // captured tensor may hold the memory an input is a slice of).
  const auto& views = engine().trace_views;
  uint64_t root = n->id;
  for (auto it = views.find(root); it != views.end(); it = views.find(root)) root = it->second;
  for (size_t j = 0; root != n->id && j < known.size(); ++j) {
    if (!known[j] || known[j]->id != root) continue;
    for (size_t a = 0; a < aliases_.size(); ++a)
      if (aliases_[a].traced == n) return {Source::alias, static_cast<int>(a)};
    aliases_.push_back(
        {static_cast<int>(j), n->layout, known[j]->layout.offset, n->dtype, n->device, n});
    return {Source::alias, static_cast<int>(aliases_.size() - 1)};
  }
  int c = index_of(captured_, n);
  if (c < 0) {
    retain_handle(n); // read by every replay: kept as it is now
    c = static_cast<int>(captured_.size());
    captured_.push_back(n);
  }
  return {Source::captured, c};
}

Node* TracedEval::leaf_node(const Source& s, llvm::ArrayRef<Node*> known) const {
  return s.kind == Source::known ? known[s.index] : captured_[s.index];
}

// The alias again, over the call's node (moved with it when it sits elsewhere in its buffer).
Node* TracedEval::make_alias(const Alias& a, llvm::ArrayRef<Node*> known) const {
  const Node* of = known[a.known];
  Layout l = a.layout;
  l.offset += of->layout.offset - a.known_offset;
  return new_realized(a.dtype, a.device, of->buffer, l);
}

std::string TracedEval::trace(llvm::ArrayRef<Node*> targets, llvm::ArrayRef<Node*> known,
                              llvm::ArrayRef<int> held) {
  check_owner_thread("compile");
  if (engine().flushing) fail("compile", "called while a plan is running");
  llvm::SmallVector<Node*, 8> pending;
  for (Node* t : targets)
    if (!t->realized()) pending.push_back(t);
  // A realized result may carry history too (a view of an input that requires grad).
  bool history = false;
  for (const Node* t : targets) history |= t->realized() && t->grad_record;
  // Where each target will come from, taken before they are realized.
  aliases_.clear();
  targets_.clear();
  target_requires_grad_.clear();
  for (Node* t : targets) target_requires_grad_.push_back(t->requires_grad);
  for (Node* t : targets) targets_.push_back(t->realized() ? source_of(t, known) : Source{});
  std::string why = pending.empty() ? "" : plan_traced(pending, known, held);
  if (why.empty() && history) why = "a result carries gradient history";
  for (Alias& a : aliases_) a.traced = nullptr;
  if (!why.empty()) { // never replayed: nothing to keep
    plan_.reset();
    for (Node* n : captured_) release_handle(n);
    captured_.clear();
  }
  return why;
}

std::string TracedEval::plan_traced(llvm::ArrayRef<Node*> pending, llvm::ArrayRef<Node*> known,
                                    llvm::ArrayRef<int> held) {
  Walk w; // keyed by words: tokens only find the plan a walk expects
  walk_pending(pending, w, {}, /*spell_out=*/true);
  if (std::string why = unreplayable(w, pending); !why.empty()) {
    realize(pending);
    return why;
  }
  // Realized values the function read that are not its inputs are captured: their handles are
  // part of the key (they are not written in place), so the walk is keyed again.
  const size_t captured_before = captured_.size();
  for (Node* n : w.nodes)
    if (n->realized()) (void)source_of(n, known);
  if (captured_.size() != captured_before) walk_pending(pending, w, {}, /*spell_out=*/true);
  plan_ = plan_for(w);
  describe(w, known, held);
  // Results that are views of pending values are realized as aliases of their roots, as
  // realize() does; a replay makes the same aliases of its roots.
  llvm::SmallVector<Node*, 4> view_results;
  views_.clear();
  for (size_t i = 0, p = 0; i < targets_.size(); ++i) {
    if (targets_[i].kind != Source::produced) continue;
    Node* t = pending[p++];
    if (t->op != OpCode::view) {
      targets_[i].index = static_cast<int>(t->walk_index);
      continue;
    }
    // The root's offset in its buffer once realized: a realized root's own, a computed one's 0
    // (realized contiguous). Taken now: after the run nothing may hold the root any more.
    Node* root = view_root(t);
    const int64_t root_offset = root->realized() ? root->layout.offset : 0;
    targets_[i] = {Source::view, static_cast<int>(views_.size())};
    views_.push_back({static_cast<int>(root->walk_index), {}, root_offset, t->dtype, t->device});
    view_results.push_back(t); // held by the caller's results
  }
  // A replay makes nodes only for the values read after its run (the results, the roots of
  // results that are views) and those that carry a constant's value for the kernels' tapes;
  // the rest (most of a training step's hundreds of intermediates) it binds to no node.
  llvm::DenseSet<int> read_after;
  for (const Source& t : targets_)
    if (t.kind == Source::produced) read_after.insert(t.index);
  for (const View& v : views_) read_after.insert(v.root);
  for (Produced& p : produced_) p.kept = p.constant >= 0 || read_after.contains(p.walk);
  run_plan(*plan_, w.nodes);
  for (size_t v = 0; v < view_results.size(); ++v) {
    Node* t = view_results[v];
    if (!t->realized()) { // a pending view holds its root (through its inputs)
      Node* root = view_root(t);
      if (root->realized()) mark_realized(t, root->buffer);
    }
    if (!t->realized()) return "a result was left pending";
    views_[v].layout = t->layout;
  }
  note_flushed();
  for (const Produced& p : produced_)
    if (p.op == OpCode::view) return "a value is realized as a view of another";
  for (const Node* t : pending)
    if (!t->realized()) return "a result was left pending";
  return "";
}

// What a replay needs of the walk, taken before the run realizes its nodes.
void TracedEval::describe(const Walk& w, llvm::ArrayRef<Node*> known, llvm::ArrayRef<int> held) {
  walk_size_ = w.nodes.size();
  leaves_.clear();
  leaf_sources_.clear();
  llvm::SmallVector<Node*, 16> leaves;
  llvm::SmallVector<bool, 16> others;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    Node* n = w.nodes[i];
    if (!n->realized()) continue;
    const Source src = source_of(n, known);
    const int own = src.kind == Source::known ? held[src.index] : 0;
    leaves_.push_back(static_cast<int>(i));
    leaf_sources_.push_back(src);
    leaves.push_back(n);
    others.push_back(static_cast<int>(n->uses) - own != static_cast<int>(w.uses[i]));
  }
  leaf_key_.clear();
  leaf_key(leaves, others, leaf_key_);
  const Schedule& s = *plan_->schedule;
  produced_.clear();
  for (const Step& st : s.steps)
    for (int i : st.realizes) {
      const Node* n = w.nodes[i];
      produced_.push_back({i, n->op, n->dtype, n->device, n->shape()});
    }
  constants_.clear();
  for (const ConstantUse& c : s.constants) {
    if (!constants_.empty() && constants_.back().walk == c.node) continue;
    auto v = std::make_unique<Node>();
    v->scalar = w.nodes[c.node]->scalar;
    v->iscalar = w.nodes[c.node]->iscalar;
    constants_.push_back({c.node, std::move(v)});
  }
  // A constant the plan also writes to memory (a matmul operand, a result) is a value a replay
  // makes a node for: that node carries the constant's value for the kernels' tapes.
  llvm::DenseMap<int, int> constant_at;
  for (size_t k = 0; k < constants_.size(); ++k)
    constant_at[constants_[k].walk] = static_cast<int>(k);
  for (Produced& p : produced_)
    if (auto it = constant_at.find(p.walk); it != constant_at.end()) p.constant = it->second;
}

// A replay's result (other than a view of an input, made before the run): a handle to the value
// the run realized or the caller gave, or a new view of a value the run realized.
Tensor TracedEval::result(const Source& s, llvm::ArrayRef<Node*> nodes,
                          llvm::ArrayRef<Node*> known) const {
  if (s.kind == Source::view) {
    const View& v = views_[s.index];
    const Node* root = nodes[v.root];
    if (!root->realized()) throw std::logic_error("kiln::compile: a replay left a root pending");
    Layout l = v.layout;
    l.offset += root->layout.offset - v.root_offset;
    return publish(new_realized(v.dtype, v.device, root->buffer, l));
  }
  Node* n = s.kind == Source::produced ? nodes[s.index] : leaf_node(s, known);
  if (!n->realized()) throw std::logic_error("kiln::compile: a replay left a result pending");
  expose(n); // a node the replay made was internal until now
  return handle_to(n);
}

bool TracedEval::replay(llvm::ArrayRef<Node*> known, llvm::ArrayRef<int> held,
                        std::vector<Tensor>& out) {
  check_owner_thread("compile");
  EngineState& e = engine();
  if (e.flushing) fail("compile", "called while a plan is running");
  // Results that are views the function made of its inputs existed when the trace was keyed
  // (the function returned them), holding their buffers: made first here too, so that the
  // buffers' reference counts key alike.
  std::vector<Tensor> early(targets_.size());
  for (size_t i = 0; i < targets_.size(); ++i)
    if (targets_[i].kind == Source::alias)
      early[i] = publish(make_alias(aliases_[targets_[i].index], known));
  llvm::SmallVector<Node*, 16> leaves;
  llvm::SmallVector<bool, 16> others;
  HeldUses made; // the aliases and placeholders made here
  for (const Source& s : leaf_sources_) {
    Node* n;
    int own = 0;
    if (s.kind == Source::alias) {
      n = make_alias(aliases_[s.index], known);
      retain_use(n);
      made.nodes.push_back(n);
      own = 1;
    } else {
      n = leaf_node(s, known);
      if (s.kind == Source::known) own = held[s.index];
    }
    if (!n->realized()) return false;
    leaves.push_back(n);
    others.push_back(static_cast<int>(n->uses) - own != 0);
  }
  static std::vector<uint64_t> key; // one replay at a time (owner thread)
  key.clear();
  leaf_key(leaves, others, key);
  if (key != leaf_key_) return false;

  out.clear();
  std::vector<Node*> nodes;
  if (plan_) {
    nodes.assign(walk_size_, unbound_node());
    for (size_t i = 0; i < leaves_.size(); ++i) nodes[leaves_[i]] = leaves[i];
    for (const Constant& c : constants_) nodes[c.walk] = c.value.get();
    for (const Produced& p : produced_) {
      if (!p.kept) continue; // unbound: written and freed by the run
      Node* n = new_placeholder(p.op, p.dtype, p.device, p.shape);
      if (p.constant >= 0) {
        n->scalar = constants_[p.constant].value->scalar;
        n->iscalar = constants_[p.constant].value->iscalar;
      }
      retain_use(n);
      made.nodes.push_back(n);
      nodes[p.walk] = n;
    }
  }
  auto take_targets = [&] {
    for (size_t i = 0; i < targets_.size(); ++i) {
      out.push_back(early[i].defined() ? std::move(early[i]) : result(targets_[i], nodes, known));
      // A value the replay made is marked as the function's was (an update keeps a parameter
      // marked; a view the function marked); one the caller gave or the trace captured keeps
      // its own flags.
      const Source::Kind k = targets_[i].kind;
      if (target_requires_grad_[i] &&
          (k == Source::produced || k == Source::view || k == Source::alias))
        out.back().node()->requires_grad = true;
    }
  };
  if (!plan_) {
    take_targets();
    return true;
  }
  run_plan(*plan_, nodes, take_targets);
  note_flushed();
  return true;
}

} // namespace kiln::detail

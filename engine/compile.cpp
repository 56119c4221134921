// kiln::compile (include/kiln/compile.h): traces per input signature (engine/trace.h), and the
// bookkeeping of a call: evaluating pending inputs, standing the state in for the function's
// rebinding, and calling the function where a trace cannot be replayed.
#include "engine/graph.h"
#include "engine/ops_common.h"
#include "engine/owner_thread.h"
#include "engine/plan_key.h"
#include "engine/trace.h"
#include "ir/errors.h"

#include <kiln/autograd.h>
#include <kiln/compile.h>
#include <kiln/engine.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

namespace {

using detail::Node;

// Past this many signatures a call just calls the function: a trace holds a plan and its
// captured values, and a function called with ever new shapes would pile them up.
constexpr size_t kMaxTraces = 8;
constexpr size_t kTracesPerSignature = 2;

struct Trace {
  std::vector<uint64_t> signature;
  detail::TracedEval eval;
  std::string why_not;       // why it cannot be replayed; empty if it can
  std::vector<bool> rebound; // per state tensor: whether the function assigned it
  size_t outputs = 0;
};

// What a trace is chosen by: the settings that change planning, whether gradients are recorded,
// and per input and state tensor its dtype, device, shape, strides, whether it requires grad,
// and which earlier one is the same value (if any).
void signature(llvm::ArrayRef<Node*> nodes, std::vector<uint64_t>& sig) {
  sig.clear();
  sig.push_back(detail::planning_flags() | uint64_t(is_grad_enabled()) << 32);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    size_t same = i;
    for (size_t j = 0; j < i; ++j)
      if (nodes[j] == n) same = j;
    sig.push_back(static_cast<uint64_t>(n->dtype) | static_cast<uint64_t>(n->device.kind) << 8 |
                  static_cast<uint64_t>(static_cast<uint8_t>(n->device.index)) << 16 |
                  static_cast<uint64_t>(n->shape().size()) << 24 |
                  static_cast<uint64_t>(n->requires_grad) << 31 | uint64_t(same) << 32);
    for (int64_t d : n->shape()) sig.push_back(static_cast<uint64_t>(d));
    for (int64_t d : n->layout.strides) sig.push_back(static_cast<uint64_t>(d));
  }
}

struct TracingGuard {
  TracingGuard() {
    detail::EngineState& e = detail::engine();
    if (e.tracing++ == 0) {
      e.trace_refusal.clear();
      e.trace_views.clear();
    }
  }
  ~TracingGuard() { detail::engine().tracing--; }
  TracingGuard(const TracingGuard&) = delete;
  TracingGuard& operator=(const TracingGuard&) = delete;
};

// An input as the function is given it. One that requires grad (while gradients are recorded)
// is an identity view recording history, so that gradients reach the caller's tensor; its
// results have history, which a replay would not give, so such a trace is not replayed anyway.
Tensor fresh_input(const Tensor& x) {
  if (x.requires_grad() && is_grad_enabled()) {
    detail::ViewPrim identity;
    identity.kind = detail::ViewPrim::Kind::expand;
    identity.shape = x.shape();
    return detail::make_view(x, identity, x.node()->layout);
  }
  return detail::handle_to(detail::new_alias(x.node()));
}

// What a call hands the function, or a replay its plan, for the inputs and the state: fresh
// nodes over their values (detail::new_alias). Through them the function's reads of its inputs
// and state are told from reads of the same values through other variables (which a trace
// captures as they are), and a trace and its replays see the same number of nodes on every
// buffer. The state's values before the call and their fresh nodes are held as uses until the
// call ends, so a plan never writes them in place.
struct Fresh {
  std::vector<Tensor> inputs; // one handle each, as the function's argument vector holds them
  std::vector<Node*> state;   // per state tensor
  std::vector<Node*> before;  // per state tensor: its value before the call
  Fresh(const std::vector<Tensor>& in, const std::vector<Tensor*>& st) {
    for (const Tensor& x : in) inputs.push_back(fresh_input(x));
    for (const Tensor* s : st) {
      before.push_back(s->node());
      detail::retain_use(s->node());
      // A parameter the function differentiates and updates stays itself: gradients of results
      // with history then reach the caller's tensor, and an update keeps it a leaf.
      const bool trained = s->requires_grad() && is_grad_enabled();
      state.push_back(trained ? s->node() : detail::new_alias(s->node()));
      detail::retain_use(state.back());
    }
  }
  Fresh(const Fresh&) = delete;
  Fresh& operator=(const Fresh&) = delete;
  ~Fresh() {
    for (Node* n : state) detail::release_use(n);
    for (Node* n : before) detail::release_use(n);
  }
  // The nodes a trace names leaves by: the inputs', then the state's; and the uses held on each.
  void known(std::vector<Node*>& nodes, std::vector<int>& held) const {
    nodes.clear();
    for (const Tensor& x : inputs) nodes.push_back(x.node());
    nodes.insert(nodes.end(), state.begin(), state.end());
    held.assign(inputs.size(), 0);
    for (size_t i = 0; i < state.size(); ++i) held.push_back(state[i] == before[i] ? 2 : 1);
  }
};

// Copies requires_grad from the fresh nodes the function was given to the caller's tensors
// where the function changed it (requires_grad_() inside it); true if it did.
bool mark_changed(const Fresh& fresh, const std::vector<bool>& before,
                  const std::vector<Tensor>& inputs, const std::vector<Tensor*>& state) {
  bool changed = false;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const bool now = fresh.inputs[j].requires_grad();
    if (now == before[j]) continue;
    inputs[j].node()->requires_grad = now;
    changed = true;
  }
  for (size_t i = 0; i < state.size(); ++i) {
    const bool now = fresh.state[i]->requires_grad;
    if (now == before[inputs.size() + i] || state[i]->node() != fresh.before[i]) continue;
    fresh.before[i]->requires_grad = now;
    changed = true;
  }
  return changed;
}

} // namespace

struct Compiled::Impl {
  Function fn;
  std::vector<Tensor*> state;
  std::vector<std::unique_ptr<Trace>> traces;
  size_t last_replayed = 0; // index in traces
  Counts counts;
  std::string why_not;

  std::vector<Tensor> call(const std::vector<Tensor>& inputs);
  std::vector<Tensor> call_function(const std::vector<Tensor>& inputs);
  std::vector<Tensor> trace(std::vector<uint64_t> sig, const std::vector<Tensor>& inputs);
  bool replay(Trace& t, const std::vector<Tensor>& inputs, std::vector<Tensor>& out);
};

Compiled::Compiled(Function f, std::vector<Tensor*> state) : impl_(std::make_shared<Impl>()) {
  if (!f) detail::fail("compile", "the function is empty");
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state[i]) detail::fail("compile", "state tensor {} is a null pointer", i);
    for (size_t j = 0; j < i; ++j)
      if (state[j] == state[i])
        detail::fail("compile", "state tensors {} and {} are the same variable", j, i);
  }
  impl_->fn = std::move(f);
  impl_->state = std::move(state);
}

Compiled compile(Compiled::Function f, std::vector<Tensor*> state) {
  return Compiled(std::move(f), std::move(state));
}

bool compiling() {
  return detail::engine().tracing > 0;
}

void refuse_replay(const std::string& why) {
  detail::EngineState& e = detail::engine();
  if (e.tracing > 0 && e.trace_refusal.empty()) e.trace_refusal = why.empty() ? "refused" : why;
}

Compiled::Counts Compiled::counts() const {
  return impl_->counts;
}

std::string Compiled::why_not_replayed() const {
  return impl_->why_not;
}

std::vector<Tensor> Compiled::operator()(const std::vector<Tensor>& inputs) {
  return impl_->call(inputs);
}

std::vector<Tensor> Compiled::Impl::call(const std::vector<Tensor>& inputs) {
  detail::check_owner_thread("compile");
  std::vector<Tensor> pending;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) detail::fail("compile", "input {} is an undefined tensor", i);
    if (!inputs[i].node()->realized()) pending.push_back(inputs[i]);
  }
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state[i]->defined()) detail::fail("compile", "state tensor {} is undefined", i);
    if (!state[i]->node()->realized()) pending.push_back(*state[i]);
  }
  if (detail::engine().tracing > 0) { // called by a function being traced: part of its trace
    // Its state is not the outer function's: a replay of the outer trace would not update it.
    if (!state.empty())
      refuse_replay("it calls a compiled function that has state (list that state in this "
                    "function's state instead)");
    counts.calls++;
    return fn(inputs);
  }
  if (!pending.empty()) eval(pending); // a compiled call starts from realized values
  if (detail::engine().eager) return call_function(inputs);
  std::vector<Node*> nodes;
  for (const Tensor& t : inputs) nodes.push_back(t.node());
  for (const Tensor* s : state) nodes.push_back(s->node());
  std::vector<uint64_t> sig;
  signature(nodes, sig);
  // A signature may have several traces: the liveness of the inputs can differ between the
  // first call (the caller still holds the initial state) and the calls after it, and a first
  // trace may not be replayable where a later one is (an optimizer's first step differs).
  // The trace replayed last is tried first: after the first call, every call replays the same
  // one, and a try of another costs a key over every leaf of its plan.
  size_t same = 0;
  for (size_t k = 0; k < traces.size(); ++k) {
    const size_t i = (last_replayed + k) % traces.size();
    Trace& t = *traces[i];
    if (t.signature != sig) continue;
    ++same;
    std::vector<Tensor> out;
    if (t.why_not.empty() && replay(t, inputs, out)) {
      counts.replays++;
      last_replayed = i;
      return out;
    }
  }
  if (same < kTracesPerSignature && traces.size() < kMaxTraces)
    return trace(std::move(sig), inputs);
  if (same > 0 && why_not.empty())
    why_not = "the inputs key otherwise than the traces' (which other tensors hold or read "
              "them, docs/compile.md)";
  return call_function(inputs);
}

// The function called as is; its results and state evaluated, as a replay leaves them.
std::vector<Tensor> Compiled::Impl::call_function(const std::vector<Tensor>& inputs) {
  counts.calls++;
  std::vector<Tensor> out = fn(inputs);
  std::vector<Tensor> all = out;
  for (const Tensor* s : state)
    if (s->defined()) all.push_back(*s);
  eval(all);
  return out;
}

std::vector<Tensor> Compiled::Impl::trace(std::vector<uint64_t> sig,
                                          const std::vector<Tensor>& inputs) {
  auto t = std::make_unique<Trace>();
  t->signature = std::move(sig);
  Fresh fresh(inputs, state);
  for (size_t i = 0; i < state.size(); ++i) *state[i] = detail::handle_to(fresh.state[i]);
  // A state tensor the function did not assign holds its own value again.
  auto unassigned_back = [&] {
    for (size_t i = 0; i < state.size(); ++i)
      if (state[i]->node() == fresh.state[i]) *state[i] = detail::handle_to(fresh.before[i]);
  };
  std::vector<bool> marked_before;
  for (const Tensor& x : fresh.inputs) marked_before.push_back(x.requires_grad());
  for (Node* n : fresh.state) marked_before.push_back(n->requires_grad);
  const int64_t flushes = stats().flushes;
  std::vector<Tensor> out;
  std::string refused;
  try {
    TracingGuard tracing;
    out = fn(fresh.inputs);
    refused = std::exchange(detail::engine().trace_refusal, {});
  } catch (...) {
    unassigned_back();
    throw;
  }
  for (size_t i = 0; i < state.size(); ++i)
    t->rebound.push_back(state[i]->defined() && state[i]->node() != fresh.state[i]);
  unassigned_back();
  // The function marked (or unmarked) an input or a state tensor it kept for gradients: the
  // caller's tensor gets the flag, as calling the function would have set it; a replay would not.
  if (refused.empty() && mark_changed(fresh, marked_before, inputs, state))
    refused = "it changes whether an input or a state tensor requires grad";
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].defined()) detail::fail("compile", "result {} of the function is undefined", i);
  for (size_t i = 0; i < state.size(); ++i)
    if (!state[i]->defined())
      detail::fail("compile", "the function left state tensor {} undefined", i);
  std::vector<Node*> targets, known;
  std::vector<int> held;
  for (const Tensor& r : out) targets.push_back(r.node());
  t->outputs = out.size();
  for (size_t i = 0; i < state.size(); ++i)
    if (t->rebound[i]) targets.push_back(state[i]->node());
  fresh.known(known, held);
  if (stats().flushes != flushes)
    t->why_not = "the function evaluated a value itself (an eval, a read of a value, or the "
                 "pending-graph limits)";
  else if (!refused.empty())
    t->why_not = refused;
  if (!t->why_not.empty()) {
    std::vector<Tensor> all = out;
    for (const Tensor* s : state) all.push_back(*s);
    eval(all);
  } else {
    t->why_not = t->eval.trace(targets, known, held);
  }
  detail::engine().trace_views.clear();
  why_not = t->why_not;
  counts.traces++;
  traces.push_back(std::move(t));
  last_replayed = traces.size() - 1; // the next call most likely keys as this one
  return out;
}

bool Compiled::Impl::replay(Trace& t, const std::vector<Tensor>& inputs, std::vector<Tensor>& out) {
  Fresh fresh(inputs, state);
  std::vector<Node*> known;
  std::vector<int> held;
  fresh.known(known, held);
  // The state tensors the function assigns let go of their old values, as the function would
  // (which the call holds while the plan reads them).
  for (size_t i = 0; i < state.size(); ++i)
    if (t.rebound[i]) *state[i] = Tensor();
  auto restore = [&] {
    for (size_t i = 0; i < state.size(); ++i)
      if (t.rebound[i]) *state[i] = detail::handle_to(fresh.before[i]);
  };
  bool ran = false;
  try {
    ran = t.eval.replay(known, held, out);
  } catch (...) {
    restore();
    throw;
  }
  if (!ran) {
    restore();
    return false;
  }
  for (size_t i = 0, k = t.outputs; i < state.size(); ++i)
    if (t.rebound[i]) *state[i] = std::move(out[k++]);
  out.resize(t.outputs);
  return true;
}

} // namespace kiln

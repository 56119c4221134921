// kiln::compile (include/kiln/compile.h): traces per input signature (engine/trace.h), and the
// bookkeeping of a call: evaluating pending inputs, standing the state in for the function's
// rebinding, and calling the function where a trace cannot be replayed.
#include "engine/graph.h"
#include "engine/owner_thread.h"
#include "engine/plan_key.h"
#include "engine/trace.h"
#include "ir/errors.h"

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

// What a trace is chosen by: the settings that change planning, and per input and state tensor
// its dtype, device, shape, strides, and which earlier one is the same value (if any).
void signature(llvm::ArrayRef<Node*> nodes, std::vector<uint64_t>& sig) {
  sig.clear();
  sig.push_back(detail::planning_flags());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    size_t same = i;
    for (size_t j = 0; j < i; ++j)
      if (nodes[j] == n) same = j;
    sig.push_back(static_cast<uint64_t>(n->dtype) | static_cast<uint64_t>(n->device.kind) << 8 |
                  static_cast<uint64_t>(static_cast<uint8_t>(n->device.index)) << 16 |
                  static_cast<uint64_t>(n->shape().size()) << 24 | uint64_t(same) << 32);
    for (int64_t d : n->shape()) sig.push_back(static_cast<uint64_t>(d));
    for (int64_t d : n->layout.strides) sig.push_back(static_cast<uint64_t>(d));
  }
}

struct TracingGuard {
  TracingGuard() {
    if (detail::engine().tracing++ == 0) detail::engine().trace_refusal.clear();
  }
  ~TracingGuard() { detail::engine().tracing--; }
  TracingGuard(const TracingGuard&) = delete;
  TracingGuard& operator=(const TracingGuard&) = delete;
};

} // namespace

struct Compiled::Impl {
  Function fn;
  std::vector<Tensor*> state;
  std::vector<std::unique_ptr<Trace>> traces;
  Counts counts;
  std::string why_not;

  std::vector<Tensor> call(const std::vector<Tensor>& inputs);
  std::vector<Tensor> call_function(const std::vector<Tensor>& inputs);
  std::vector<Tensor> trace(std::vector<uint64_t> sig, const std::vector<Tensor>& inputs);
  bool replay(Trace& t, const std::vector<Tensor>& inputs, std::vector<Tensor>& out);
  void known_nodes(const std::vector<Tensor>& inputs, std::vector<Node*>& nodes) const;
};

Compiled::Compiled(Function f, std::vector<Tensor*> state) : impl_(std::make_shared<Impl>()) {
  if (!f) detail::fail("compile", "the function is empty");
  for (size_t i = 0; i < state.size(); ++i)
    if (!state[i]) detail::fail("compile", "state tensor {} is a null pointer", i);
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

// The inputs' nodes, then the state's.
void Compiled::Impl::known_nodes(const std::vector<Tensor>& inputs,
                                 std::vector<Node*>& nodes) const {
  nodes.clear();
  for (const Tensor& t : inputs) nodes.push_back(t.node());
  for (const Tensor* s : state) nodes.push_back(s->node());
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
  if (!pending.empty()) eval(pending); // a compiled call starts from realized values
  if (detail::engine().eager) return call_function(inputs);
  std::vector<Node*> nodes;
  known_nodes(inputs, nodes);
  std::vector<uint64_t> sig;
  signature(nodes, sig);
  // A signature may have several traces: the liveness of the inputs can differ between the
  // first call (the caller still holds the initial state) and the calls after it.
  size_t same = 0;
  for (auto& t : traces) {
    if (t->signature != sig) continue;
    if (!t->why_not.empty()) return call_function(inputs);
    ++same;
    std::vector<Tensor> out;
    if (replay(*t, inputs, out)) {
      counts.replays++;
      return out;
    }
  }
  if (same < kTracesPerSignature && traces.size() < kMaxTraces)
    return trace(std::move(sig), inputs);
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

namespace {

// Releases the uses a call holds on the state's old values.
struct StateHolds {
  std::vector<Node*> nodes;
  StateHolds() = default;
  StateHolds(const StateHolds&) = delete;
  StateHolds& operator=(const StateHolds&) = delete;
  ~StateHolds() {
    for (Node* n : nodes) detail::release_use(n);
  }
};

Tensor handle_to(Node* n) {
  detail::retain_handle(n);
  return Tensor(n);
}

} // namespace

std::vector<Tensor> Compiled::Impl::trace(std::vector<uint64_t> sig,
                                          const std::vector<Tensor>& inputs) {
  auto t = std::make_unique<Trace>();
  t->signature = std::move(sig);
  // The state's values before the call are held (as uses) until the trace is planned and run, as
  // a replay holds them: then no node the function frees is mistaken for one it makes at the
  // same address, and the plan never writes them in place (a replay's caller may still see them
  // if the replay does not run).
  StateHolds holds;
  for (Tensor* s : state) {
    detail::retain_use(s->node());
    holds.nodes.push_back(s->node());
  }
  const int64_t flushes = stats().flushes;
  std::vector<Tensor> out;
  std::string refused;
  {
    TracingGuard tracing;
    out = fn(inputs);
    refused = std::exchange(detail::engine().trace_refusal, {});
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].defined()) detail::fail("compile", "result {} of the function is undefined", i);
  for (size_t i = 0; i < state.size(); ++i)
    if (!state[i]->defined())
      detail::fail("compile", "the function left state tensor {} undefined", i);
  std::vector<Node*> targets, known;
  for (const Tensor& r : out) targets.push_back(r.node());
  t->outputs = out.size();
  for (size_t i = 0; i < state.size(); ++i) {
    t->rebound.push_back(state[i]->node() != holds.nodes[i]);
    if (t->rebound.back()) targets.push_back(state[i]->node());
  }
  for (const Tensor& x : inputs) known.push_back(x.node());
  known.insert(known.end(), holds.nodes.begin(), holds.nodes.end());
  std::vector<int> held(known.size(), 0);
  for (size_t j = 0; j < known.size(); ++j)
    for (Node* n : holds.nodes) held[j] += known[j] == n;
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
  why_not = t->why_not;
  counts.traces++;
  traces.push_back(std::move(t));
  return out;
}

bool Compiled::Impl::replay(Trace& t, const std::vector<Tensor>& inputs, std::vector<Tensor>& out) {
  std::vector<Node*> known;
  known_nodes(inputs, known);
  // The state tensors the function assigns: as it would, the call lets go of their old values,
  // which it holds (as uses, not handles) while the plan reads them.
  StateHolds holds;
  std::vector<int> held(known.size(), 0);
  for (size_t i = 0; i < state.size(); ++i) {
    if (!t.rebound[i]) continue;
    Node* n = state[i]->node();
    detail::retain_use(n);
    holds.nodes.push_back(n);
    *state[i] = Tensor();
  }
  for (size_t j = 0; j < known.size(); ++j)
    for (Node* n : holds.nodes) held[j] += known[j] == n;
  auto restore = [&] {
    for (size_t i = 0, k = 0; i < state.size(); ++i)
      if (t.rebound[i]) *state[i] = handle_to(holds.nodes[k++]);
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

#include "engine/graph.h"

#include "engine/adaptive_flush.h"
#include "engine/autograd.h"
#include "engine/cse.h"
#include "engine/loop_detect.h"
#include "engine/owner_thread.h"
#include "engine/plan_key.h"
#include "ir/errors.h"
#include "ir/settings.h"
#include "ir/shape_math.h"

#include <kiln/tensor.h>

#include <atomic>
#include <bit>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace kiln::detail {

namespace {

EngineState make_engine() {
  EngineState e;
  e.eager = setting_flag(Setting::eager).value_or(e.eager);
  const std::optional<std::string> dump = setting_text(Setting::dump);
  e.dump_plan = dump.has_value();
  e.dump_passes = dump == "passes";
  e.max_nodes = setting_int(Setting::max_pending_nodes).value_or(e.max_nodes);
  e.max_bytes = setting_int(Setting::max_pending_bytes).value_or(e.max_bytes);
  e.graphs = setting_flag(Setting::graphs).value_or(e.graphs);
  if (auto v = setting_text(Setting::small_matmul))
    e.small_matmul = *v == "0" ? 0 : *v == "all" ? 2 : 1;
  e.reproducible = setting_flag(Setting::reproducible).value_or(e.reproducible);
  e.group_launches = setting_flag(Setting::group_launches).value_or(e.group_launches);
  e.loop_flush = setting_flag(Setting::loop_flush).value_or(e.loop_flush);
  e.defer_held = !setting_flag(Setting::write_held).value_or(!e.defer_held);
  e.idle_flush_nodes = e.next_idle_check =
      setting_int(Setting::idle_flush).value_or(e.idle_flush_nodes);
  e.max_plans = setting_int(Setting::plan_cache).value_or(e.max_plans);
  e.loop_template = setting_flag(Setting::loop_template).value_or(e.loop_template);
  e.key_tokens = setting_flag(Setting::key_tokens).value_or(e.key_tokens);
  return e;
}

void link_pending(EngineState& e, Node* n) {
  n->next_pending = e.pending_head;
  if (e.pending_head) e.pending_head->prev_pending = n;
  e.pending_head = n;
  e.pending_nodes++;
}

// Pending bytes count the frontier of held results: pending values a user holds that no other
// pending node consumes yet. Intermediates whose handles are gone live in registers, and C++
// expression temporaries are consumed by the op that uses them before the expression ends, so
// neither counts; a loop that piles up held results does.
// The handle and use counts change on every op call: they look at the rest only where a count
// moves between 0 and 1, the only changes that can move a node in or out of the frontier.
bool counts_when_held(const Node* n) {
  return !n->realized() && n->op != OpCode::view && !n->internal;
}
bool counted(const Node* n) {
  return n->handles > 0 && n->uses == 0 && counts_when_held(n);
}

// Apply the change in counted(n) since `was` (its value before a count changed).
void recount(Node* n, bool was) {
  bool now = counted(n);
  if (was != now) engine().pending_bytes += now ? n->nbytes() : -n->nbytes();
}

void unlink_pending(EngineState& e, Node* n) {
  cse_erase(n); // no longer pending: identical ops recorded from now on compute afresh
  if (n->prev_pending)
    n->prev_pending->next_pending = n->next_pending;
  else
    e.pending_head = n->next_pending;
  if (n->next_pending) n->next_pending->prev_pending = n->prev_pending;
  n->prev_pending = n->next_pending = nullptr;
  e.pending_nodes--;
}

// A constant loop_constant may hand out is no longer pending.
void forget_loop_constant(EngineState& e, const Node* n) {
  for (Node*& c : e.loop_constants)
    if (c == n) c = nullptr;
}

// Destroy dead nodes iteratively: a long dead chain must not recurse once per node.
void destroy(Node* n) {
  EngineState& e = engine();
  llvm::SmallVector<Node*, 16> work{n};
  while (!work.empty()) {
    Node* d = work.pop_back_val();
    if (d->op == OpCode::constant) forget_loop_constant(e, d);
    if (!d->realized()) {
      unlink_pending(e, d);
      if (d->op != OpCode::view && !d->fused && !d->duplicate)
        e.stats.nodes_dropped++; // work never done
    }
    for (Node* in : d->inputs) { // release_use, with the dead queued instead of recursing
      if (--in->uses > 0) continue;
      if (in->handles == 0)
        work.push_back(in);
      else if (counts_when_held(in))
        e.pending_bytes += in->nbytes();
    }
    delete d;
  }
}

} // namespace

namespace {

// Set once the engine is made. engine() runs ~40 times per recorded step: a function-local
// static with make_engine inlined behind its guard cost 14 instructions a call (a stack frame
// on the fast path too), this test of a pointer 4.
std::atomic<EngineState*> the_engine{nullptr};

[[gnu::noinline]] EngineState& make_the_engine() {
  static EngineState e = make_engine();
  the_engine.store(&e, std::memory_order_release);
  return e;
}

} // namespace

EngineState& engine() {
  EngineState* e = the_engine.load(std::memory_order_acquire);
  return e ? *e : make_the_engine();
}

namespace {

// The extents are checked before a layout of them exists: contiguous strides of extents that
// overflow would overflow too. Front-ends check first, naming the user's op.
Node* checked_node(OpCode op, DType dtype, Device device, const Shape& shape) {
  check_owner_thread(op_name(op));
  check_extents(op_name(op), shape, dtype);
  Node* n = new Node;
  n->op = op;
  n->dtype = dtype;
  n->device = device;
  return n;
}

} // namespace

Node* new_node(OpCode op, DType dtype, Device device, const Shape& shape) {
  Node* n = checked_node(op, dtype, device, shape);
  set_contiguous(n->layout, shape);
  return n;
}

Node* new_node(OpCode op, DType dtype, Device device, const Layout& l) {
  Node* n = checked_node(op, dtype, device, l.shape);
  n->layout = l;
  return n;
}

Node* new_realized(DType dtype, Device device, BufferRef buf, const Layout& l) {
  check_owner_thread("view");
  check_extents("view", l.shape, dtype);
  Node* n = new Node;
  n->op = OpCode::buffer;
  n->dtype = dtype;
  n->device = device;
  n->layout = l;
  n->buffer = std::move(buf);
  return n;
}

Node* new_alias(Node* of) {
  Node* n = new_realized(of->dtype, of->device, of->buffer, of->layout);
  n->id = engine().next_id++;
  n->requires_grad = of->requires_grad;
  return n;
}

void note_view(const Node* alias, const Node* of) {
  EngineState& e = engine();
  if (e.tracing > 0) e.trace_views[alias->id] = of->id;
}

void note_host_read() {
  EngineState& e = engine();
  if (e.tracing > 0 && e.trace_refusal.empty())
    e.trace_refusal = "the function reads a value on the host (item, to_vector, copy_to, "
                      "data_ptr), which a replay would not read again";
}

Node* new_placeholder(OpCode op, DType dtype, Device device, const Shape& shape) {
  EngineState& e = engine();
  Node* n = new_node(op, dtype, device, shape);
  n->id = e.next_id++;
  n->internal = true; // nobody's value until it is realized: not counted as pending bytes
  link_pending(e, n);
  return n;
}

void add_input(Node* n, Node* input) {
  n->inputs.push_back(input);
  retain_use(input); // a consumed value is no longer counted
}

namespace {

// What publishing a user's value does: realize it in eager mode, or flush the pending graph
// when it is over its limits, or early while its device is idle (adaptive_flush.cpp).
void flush_if_needed(Node* n) {
  EngineState& e = engine();
  if (e.flushing) return;
  if (e.eager) {
    realize({n});
  } else if (e.pending_nodes > e.max_nodes || e.pending_bytes > e.max_bytes) {
    e.stats.auto_flushes++;
    flush_all();
  } else {
    maybe_flush_early(n);
  }
}

// `n` duplicates the pending node `same` (CSE): hand out `same` and free `n`. Its inputs are
// `same`'s inputs, so releasing n's uses on them destroys nothing, except constants, which
// match by value: the op's own constant then dies, as a duplicate rather than dropped work. A
// user's request for a node an op recorded for itself makes it a user's value (no longer
// internal).
Tensor merge_into(Node* same, Node* n, bool internal) {
  for (size_t i = 0; i < n->inputs.size(); ++i) {
    Node* in = n->inputs[i];
    if (in != same->inputs[i] && in->internal) in->duplicate = true; // an equal constant
    release_use(in);
  }
  delete n;
  engine().stats.ops_merged++;
  bool was = counted(same);
  same->handles++;
  if (!internal) same->internal = false;
  recount(same, was);
  return Tensor(same);
}

// A training step is never flushed early (adaptive_flush.cpp): its ops need no loop detection,
// which would only add to the host's cost of recording them.
bool loop_detected(const EngineState& e) {
  return e.loop_flush && !e.step_open && e.tracing == 0 && !history_recording();
}

void note_loop_op(EngineState& e, Node* n, uint64_t kind) {
  if (loop_detected(e)) e.loop.note(n, kind);
}

// Whether a training step is repeating: a history or a backward pass is being recorded, and the
// last evaluations (the steps before) reused their plans.
bool repeating_training_step(const EngineState& e) {
  return e.plans_reused_in_a_row >= 2 && e.loop_skips_cse && history_recording();
}

// Whether `n` goes through CSE: not in a confirmed loop or a repeating training step, unless ops
// of its kind merged before (engine/cse.h, cse_kind_merged). In a loop, one condition with
// publishes_as_known, so that a loop template makes a node only where publish would not look it
// up. A training step's ops that record history never go through it (publish).
bool wants_cse(const EngineState& e, const Node* n, uint64_t kind) {
  if (n->realized() || e.flushing || n->distinct) return false;
  if (repeating_training_step(e)) return cse_kind_merged(kind);
  return !publishes_as_known(e, kind);
}

} // namespace

Tensor publish(Node* n, bool internal) {
  EngineState& e = engine();
  e.stats.ops_recorded++;
  const bool grad = !n->realized() && !e.flushing && wants_grad_record(n->op, n->dtype, n->inputs);
  // Both CSE and the loop detector start from the op's kind: hashed once. Neither looks at a
  // node that records history (below; loop_detected).
  const uint64_t kind = n->realized() || e.flushing || grad ? 0 : op_kind_hash(n);
  // A node that records gradient history is never merged: two identical ops would then share
  // one history, and the gradients flowing back through both uses be summed before the op's
  // backward instead of after it, as eagerly (where nothing is pending to merge with) and in
  // PyTorch; in f16 the two orders round apart. So is a node without history never merged
  // into one with it (a different value to autodiff).
  if (!grad && wants_cse(e, n, kind)) {
    Node* same = cse_find_or_insert(n, kind);
    if (same != n && same->grad_record == nullptr) {
      cse_note_merged(kind);
      Tensor t = merge_into(same, n, internal);
      if (internal) return t;
      note_loop_op(e, same, kind);
      flush_if_needed(same);
      e.op_call_start = e.next_id;
      return t;
    }
  }
  n->id = e.next_id++;
  n->internal = internal;
  if (!n->realized()) link_pending(e, n);
  Tensor t(n);
  n->handles = 1;
  recount(n, false);
  if (grad) record_grad(n, n->op, *n, n->inputs);
  if (n->realized() || e.flushing || internal) return t;
  // Where a loop template could make the node (publishes_as_known's state), it is keyed by its
  // token as the template's nodes are, so that a flush's key does not depend on which made it.
  if (e.key_tokens && kind != 0 && skips_cse_in_loop(e)) n->key_token = static_words_token(n, kind);
  note_loop_op(e, n, kind);
  flush_if_needed(n);
  e.op_call_start = e.next_id;
  return t;
}

bool skips_cse_in_loop(const EngineState& e) {
  return !e.flushing && e.loop.period() > 0 && e.loop_skips_cse && loop_detected(e);
}

bool publishes_as_known(const EngineState& e, uint64_t kind) {
  return skips_cse_in_loop(e) && !cse_kind_merged(kind);
}

Tensor publish_known(Node* n, uint64_t kind, int64_t counted_bytes) {
  EngineState& e = engine();
  e.stats.ops_recorded++;
  e.stats.ops_from_template++;
  n->id = e.next_id++;
  link_pending(e, n);
  Tensor t(n);
  n->handles = 1;
  assert(counted_bytes == (counted(n) ? n->nbytes() : 0));
  e.pending_bytes += counted_bytes; // recount(n, false), without working out the bytes again
  e.loop.note(n, kind);
  if (publish_may_flush(e)) flush_if_needed(n);
  e.op_call_start = e.next_id;
  return t;
}

namespace {

bool shares_constants(const EngineState& e) {
  return e.loop_shares_constants && !e.flushing && e.loop.period() > 0 && loop_detected(e);
}

} // namespace

Node* loop_constant(DType dtype, Device device, double scalar, int64_t iscalar) {
  const EngineState& e = engine();
  if (!shares_constants(e)) return nullptr;
  for (Node* c : e.loop_constants)
    if (c && c->internal && c->dtype == dtype && c->device == device && c->iscalar == iscalar &&
        std::bit_cast<uint64_t>(c->scalar) == std::bit_cast<uint64_t>(scalar))
      return c;
  return nullptr;
}

void share_loop_constant(Node* n) {
  EngineState& e = engine();
  if (!shares_constants(e) || n->realized() || !n->internal) return;
  e.loop_constants[static_cast<size_t>(e.next_loop_constant)] = n;
  e.next_loop_constant = (e.next_loop_constant + 1) % static_cast<int>(e.loop_constants.size());
}

void expose(Node* n) {
  bool was = counted(n);
  n->internal = false;
  recount(n, was);
}

void retain_handle(Node* n) {
  if (n->handles++ == 0 && n->uses == 0 && counts_when_held(n))
    engine().pending_bytes += n->nbytes();
}
Tensor handle_to(Node* n) {
  retain_handle(n);
  return Tensor(n);
}

void release_handle(Node* n) {
  if (--n->handles > 0) return;
  if (n->uses == 0 && counts_when_held(n)) engine().pending_bytes -= n->nbytes();
  // Gradient history is reached through handles only (a user's, or a record's on its inputs):
  // with none left nothing can differentiate through n, so its record and what the record
  // saved go now, not when pending work (a detach() view, say) finally lets n die.
  if (n->grad_record) {
    free_grad_record(std::exchange(n->grad_record, nullptr));
    n->grad_freed = true;
  }
  if (n->uses == 0) destroy(n);
}
void retain_use(Node* n) {
  if (n->uses++ == 0 && n->handles > 0 && counts_when_held(n))
    engine().pending_bytes -= n->nbytes();
}
void release_use(Node* n) {
  if (--n->uses > 0) return;
  if (n->handles > 0) {
    if (counts_when_held(n)) engine().pending_bytes += n->nbytes();
  } else {
    destroy(n);
  }
}

void mark_realized(Node* n, BufferRef buf) {
  EngineState& e = engine();
  if (n->op == OpCode::constant) forget_loop_constant(e, n);
  if (counted(n)) e.pending_bytes -= n->nbytes(); // a realized value is no longer pending
  unlink_pending(e, n);
  if (n->op != OpCode::view) set_contiguous(n->layout, n->layout.shape);
  n->op = OpCode::buffer;
  n->buffer = std::move(buf);
  llvm::SmallVector<Node*, 3> inputs;
  inputs.swap(n->inputs);
  for (Node* in : inputs) release_use(in);
}

void flush_all() {
  check_owner_thread("sync");
  EngineState& e = engine();
  std::vector<Node*> live;
  for (Node* n = e.pending_head; n; n = n->next_pending)
    if (n->handles > 0 && !n->internal) live.push_back(n);
  if (!live.empty()) realize(live);
}

} // namespace kiln::detail

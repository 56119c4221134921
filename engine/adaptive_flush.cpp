#include "engine/adaptive_flush.h"
#include "engine/autograd.h"

#include "engine/graph.h"
#include "engine/plan_key.h"
#include "runtime/backend.h"

#include <algorithm>
#include <bit>

namespace kiln::detail {

namespace {

// A flush writes every pending value that has a live handle, where waiting might have fused it
// into later work. Early flushes are limited to what such a cut can cost: 1 MiB written and
// read back again is ~0.7 us of H100 memory traffic, about one kernel launch.
constexpr int64_t kMaxEarlyFlushBytes = int64_t(1) << 20;
// A loop's flushes hold a power of two of bodies, at most EngineState::loop_flush_nodes nodes
// (256 by default): then a flush is due whatever the device's state. Small, so that the pending
// graph stays in the host's caches: a flush's host work (walk, key, binding, realizing) grows
// faster than its nodes, and recording slows down as the graph grows (at 2048 nodes 0.17 us per
// node to flush on the H100's host, at 256 0.10). Measured in the same processes, A/B: the seeds'
// loop at d = 256 4.5-5.4 us per step against 4.6-8.2 at 2048, the LSTM at batch 32 10.1-10.2
// against 9.7-13.8, the GRU at batch 1 7.8-12.4 against 8.1-15.3
// (bench/results/2026-11-26-h100-session24.md); and at 64 or 128 nodes no faster for the seed
// loop, slower for the LSTM and GRU cells (bench/results/2026-11-27-h100-session31.md, call 8).

// An idle device is flushed early only after this many idle_flush_nodes intervals (1024 nodes
// by default, so only when set_idle_flush lowers the interval to 16 or fewer): a loop whose host
// is slower than its GPU finds the GPU idle at every check, and flushes of a body or two each
// cost the host its fixed work while the GPU waits anyway.
constexpr int64_t kMinLoopFlushChecks = 16;

DeviceState backend_state(Device d) {
  Backend& b = backend_for(d, "eval");
  if (!b.asynchronous()) return DeviceState::synchronous;
  return b.idle() ? DeviceState::idle : DeviceState::busy;
}

DeviceProbe& probe() {
  static DeviceProbe p = backend_state;
  return p;
}

// The last device asked whether its work runs synchronously, and the answer.
struct SynchronousCache {
  bool known = false;
  Device device;
  bool synchronous = false;
};

SynchronousCache& synchronous_cache() {
  static SynchronousCache c;
  return c;
}

// Whether work on `d` runs synchronously (the CPU): asked of the probe once per device (a
// backend's answer never changes; set_device_probe forgets it), as the real probe answers with
// a stream query.
bool synchronous(Device d) {
  SynchronousCache& c = synchronous_cache();
  if (!c.known || !(c.device == d)) c = {true, d, probe()(d) == DeviceState::synchronous};
  return c.synchronous;
}

// About the bytes a flush would write now: the pending values with a live handle (flush_all's
// targets; a view counts its own elements, the part of its root that it shows).
int64_t held_bytes(const EngineState& e) {
  int64_t bytes = 0;
  for (const Node* n = e.pending_head; n; n = n->next_pending)
    if (n->handles > 0 && !n->internal) bytes += n->nbytes();
  return bytes;
}

} // namespace

DeviceProbe set_device_probe(DeviceProbe p) {
  if (!p) p = backend_state;
  std::swap(probe(), p);
  synchronous_cache().known = false;
  return p;
}

void note_flushed() {
  EngineState& e = engine();
  e.next_idle_check = e.pending_nodes + e.idle_flush_nodes;
  e.step_open = false;
  note_history_evaluated();
  e.bodies_since_flush = 0;
  e.body_ends.clear();
}

namespace {

// Realize the pending nodes recorded before node id `cut` that anything recorded later reads,
// or that a handle holds: as if the evaluation had come just before node `cut` was recorded.
// Constants are left to the later ops' kernels (they fuse; a buffer of one value would not).
void flush_before(EngineState& e, uint64_t cut) {
  std::vector<Node*> targets;
  const uint64_t stamp = next_walk_stamp();
  auto add = [&](Node* n) {
    if (n->walk_stamp == stamp) return;
    n->walk_stamp = stamp;
    targets.push_back(n);
  };
  for (Node* n = e.pending_head; n; n = n->next_pending) {
    if (n->id < cut) {
      if (n->handles > 0 && !n->internal) add(n);
      continue;
    }
    for (Node* in : n->inputs)
      if (in->id < cut && !in->realized() && in->op != OpCode::constant) add(in);
  }
  if (!targets.empty()) realize(targets);
}

} // namespace

bool flush_whole_bodies(uint64_t read_key_hash) {
  EngineState& e = engine();
  std::vector<uint64_t> ends;
  ends.swap(e.body_ends); // each chunk's evaluation ends with note_flushed
  // Not on the CPU: its plans cost no graph builds, and an unrolled expression a read finds
  // whole (`acc = acc + x[i] * w[i]` over i) fuses more evaluated whole than cut in chunks.
  if (ends.empty() || e.flushing || !e.loop_flush || !e.loop.in_loop() || history_recording() ||
      e.step_open || synchronous(e.body_device))
    return false;
  // A read cut before that comes again is worth a plan of its own.
  if (e.reads_cut.size() > 4096) e.reads_cut.clear();
  if (!e.reads_cut.insert(read_key_hash).second) return false;
  for (size_t done = 0; done < ends.size();) {
    done += std::bit_floor(ends.size() - done);
    flush_before(e, ends[done - 1]);
  }
  return true;
}

namespace {

// The values a flush before the op call that returned `n` would write because a handle holds
// them, among those recorded since node id `since`.
int64_t held_values_before(const EngineState& e, const Node* n, uint64_t since) {
  int64_t held = 0;
  for (const Node* x = e.pending_head; x; x = x->next_pending)
    held += x != n && x->handles > 0 && !x->internal && x->id >= since && x->id < e.op_call_start;
  return held;
}

// Where a loop's bodies begin: before the op call at which a flush writes the fewest held values.
// The detector finds the repetition at whatever op of the user's step it happens to; a flush
// there writes every temporary the step's code still holds (an LSTM cell's gates and their
// chunks) and computes the ops that made them in kernels of their own: 1.5 kernels per LSTM
// step at batch 1 instead of 1 (bench/results/2026-11-26-h100-session24.md). Before the step's
// first op only the loop's state is held. Counted over the second body after the confirmation,
// among the values recorded within one body's length before each op (the first body notes where
// each op call began), so that values a loop keeps from every step (outputs pushed to a vector)
// count alike at every op. Returns whether the choice is made (once per confirmation; the count
// walks the pending nodes at each op of that body).
bool body_start_chosen(EngineState& e, const Node* n) {
  LoopDetector& l = e.loop;
  if (e.body_start_chosen_for == l.confirmations()) return true;
  const int64_t pos = l.position(), p = l.period();
  if (e.body_start_sampling_for != l.confirmations()) {
    e.body_start_sampling_for = l.confirmations();
    e.body_start_sampled_from = pos;
    e.body_start_fewest = INT64_MAX;
    e.body_start_ids.assign(static_cast<size_t>(p), 0);
  }
  const int64_t i = pos - e.body_start_sampled_from;
  if (p > 0 && i < 2 * p) { // (ops noted unseen here, or the repetition lost: decided now)
    uint64_t& started = e.body_start_ids[static_cast<size_t>(i % p)];
    if (i >= p) {
      const int64_t held = held_values_before(e, n, started);
      if (held < e.body_start_fewest) e.body_start_fewest = held, e.body_start_best = pos;
    }
    started = e.op_call_start;
    if (i + 1 < 2 * p) return false;
  }
  // Bodies start at every period from there (at_body_start counts from the anchor).
  if (e.body_start_fewest != INT64_MAX) l.anchor_at(e.body_start_best);
  e.body_start_chosen_for = l.confirmations();
  return true;
}

// In a loop (the user's ops repeat with period p): a flush only before a body's first op, after
// 2^j bodies (at least kMinLoopFlushChecks * idle_flush_nodes nodes) when the device is idle, or
// after the most bodies allowed. So a loop's flushes come in a few sizes, each the same plan every
// time.
void maybe_flush_loop(EngineState& e, Node* n) {
  if (!body_start_chosen(e, n)) return;
  // Once per body start (maybe_flush_early also runs for the op of a CSE merge, noted already).
  if (!e.loop.at_body_start() || e.loop.position() == e.loop_checked) return;
  e.loop_checked = e.loop.position();
  const int64_t p = e.loop.period();
  const int64_t k = ++e.bodies_since_flush;
  // What the body's first op call recorded (its node, casts of its operands) stays pending.
  const uint64_t cut = e.op_call_start;
  e.body_ends.push_back(cut);
  e.body_device = n->device;
  const int64_t most =
      std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(e.loop_flush_nodes / p, 1)));
  if (k < most) {
    // Early only on an asynchronous device that is idle (the CPU, synchronous, never is).
    if (!std::has_single_bit(static_cast<uint64_t>(k)) ||
        k * p < kMinLoopFlushChecks * e.idle_flush_nodes)
      return;
    const DeviceState state = probe()(n->device);
    if (state != DeviceState::idle) {
      if (state == DeviceState::busy) e.stats.busy_checks++;
      return;
    }
    e.stats.idle_flushes++;
  }
  e.stats.loop_flushes++;
  e.bodies_since_flush = 0; // first: if the flush fails (out of memory), it is not retried at once
  flush_before(e, cut);
  note_flushed(); // also where the flush had nothing to write
}

} // namespace

void maybe_flush_early(Node* n) {
  EngineState& e = engine();
  // A function being traced (kiln::compile) is evaluated whole, as one plan.
  if (e.idle_flush_nodes <= 0 || e.tracing > 0) return;
  // While a gradient history is recorded, or between grad() and the optimizer's update, the
  // step is not cut (see below).
  if (e.loop_flush && e.loop.in_loop() && !history_recording() && !e.step_open)
    return maybe_flush_loop(e, n);
  if (e.pending_nodes < e.next_idle_check) return;
  // While a gradient history is recorded, a flush would write every value it saved (they are
  // held) and cut the step where the idle check happens to fall, a new plan each time; after
  // grad() until the next evaluation it would cut the step between its backward and its
  // update. The step ends with its optimizer update instead (optim::Optimizer::step).
  if (history_recording() || e.step_open) {
    e.next_idle_check = e.pending_nodes + e.idle_flush_nodes;
    return;
  }
  const DeviceState state = probe()(n->device);
  if (state == DeviceState::idle) {
    // Too much would be cut: checked again only once the graph has doubled, so a large
    // pending graph is not walked every few nodes.
    if (held_bytes(e) > kMaxEarlyFlushBytes) {
      e.next_idle_check = std::max(e.pending_nodes * 2, e.pending_nodes + e.idle_flush_nodes);
      return;
    }
    e.stats.idle_flushes++;
    // Set first: if the flush fails (out of memory), later ops are not each made to retry it.
    e.next_idle_check = e.pending_nodes + e.idle_flush_nodes;
    flush_all(); // on success, counts from what is left pending (note_flushed)
    return;
  }
  if (state == DeviceState::busy) e.stats.busy_checks++; // let work pile up; look again later
  e.next_idle_check = e.pending_nodes + e.idle_flush_nodes;
}

} // namespace kiln::detail

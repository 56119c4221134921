#pragma once
// Adaptive batching: flushing the pending graph before anyone asks for a value. While the GPU
// has nothing to do, a loop that records many steps before it reads anything would leave it
// idle until the read (or the pending limits); flushing early lets the GPU start while the host
// records the rest. While the GPU is busy, flushing gains nothing, so work accumulates into
// larger batches (up to the pending limits). See docs/architecture.md "Adaptive batching".
#include "engine/graph.h"
#include "engine/node.h"

#include <functional>

namespace kiln::detail {

/// What the policy needs to know about the device an op runs on.
enum class DeviceState {
  synchronous, // runs work as it is issued (the CPU): never idle, so never flushed early
  idle,        // asynchronous, and everything issued so far has finished
  busy,        // asynchronous, still running earlier work
};

/// How the state is read: from the device's backend by default. Tests substitute their own
/// (the CPU backend is synchronous, so CI could not exercise the policy otherwise). An empty
/// function restores the default; returns the previous probe.
using DeviceProbe = std::function<DeviceState(Device)>;
DeviceProbe set_device_probe(DeviceProbe probe);

/// After the user's op `n` was published (and the hard pending limits did not flush): flush the
/// pending graph when a check is due, n's device is idle and the flush would write little.
void maybe_flush_early(Node* n);
/// Whether publishing the user's op just noted in a confirmed loop may flush or has a loop's
/// bookkeeping to do (flush_if_needed must run): in eager mode, over the pending limits, while
/// the bodies' start is being chosen, or at a body's first op. Else flush_if_needed would do
/// nothing, and a loop template's op skips it.
inline bool publish_may_flush(const EngineState& e) {
  return e.eager || e.pending_nodes > e.max_nodes || e.pending_bytes > e.max_bytes ||
         e.body_start_chosen_for != e.loop.confirmations() || e.loop.at_body_start();
}
/// After every evaluation: the next check comes `idle_flush_nodes` pending nodes later.
void note_flushed();
/// Before an evaluation that has no cached plan, in a loop whose early flushes fall before its
/// bodies: the whole bodies pending since the last flush are flushed first, in chunks of a power
/// of two of bodies, largest first (each chunk writes what later ops read and what handles
/// hold). Whatever the number of bodies a read finds pending, its flushes then come from a few
/// cached plans (one per chunk size, and one for the part of a body after the last body start)
/// instead of a new plan for each number (a plan, two direct runs and a graph build for hundreds
/// of nodes). A read whose plan is cached (an eval every step, or every k steps) is not cut,
/// nor one with the key of a read cut before (`read_key_hash`): one that recurs is planned
/// whole; nor one on the CPU, whose plans build no CUDA graphs (an unrolled expression then
/// fuses whole). Returns whether it flushed anything.
bool flush_whole_bodies(uint64_t read_key_hash);

} // namespace kiln::detail

// Public engine controls: eval, sync, eager mode, limits, stats, plan dump, version.
#include "engine/graph.h"
#include "engine/plan_cache.h"
#include "engine/schedule.h"
#include "ir/errors.h"
#include "runtime/memory_stats.h"

#include <kiln/engine.h>
#include <kiln/version.h>

#include <utility>

namespace kiln {

const char* version() {
  return KILN_VERSION_STRING;
}

void eval(const std::vector<Tensor>& ts) {
  std::vector<detail::Node*> nodes;
  for (const Tensor& t : ts) {
    if (!t.defined()) throw Error("[eval] argument is an undefined tensor");
    nodes.push_back(t.node());
  }
  detail::realize(nodes);
}

void sync() {
  detail::flush_all();
  detail::synchronize_all();
}

void flush() {
  if (detail::engine().tracing > 0) return; // the trace evaluates the function's results whole
  detail::flush_all();
}

void set_allow_tf32(bool on) {
  detail::allow_tf32() = on;
}

void set_cublas(bool on) {
  detail::cublas_enabled() = on; // part of every plan key (planning_flags)
}
bool cublas() {
  return detail::cublas_enabled();
}
void set_cublas_waits(bool wait) {
  detail::cublas_waits() = wait; // read at planning: plans made before keep their kernels
}
bool cublas_waits() {
  return detail::cublas_waits();
}

void set_eager(bool on) {
  detail::engine().eager = on;
}
bool eager() {
  return detail::engine().eager;
}

void set_pending_limits(int64_t max_nodes, int64_t max_bytes) {
  if (max_nodes < 1 || max_bytes < 1)
    throw Error(fmt::format("[set_pending_limits] limits must be positive, got {} nodes and {} "
                            "bytes",
                            max_nodes, max_bytes));
  detail::engine().max_nodes = max_nodes;
  detail::engine().max_bytes = max_bytes;
}

void set_idle_flush(int64_t nodes) {
  if (nodes < 0)
    throw Error(fmt::format("[set_idle_flush] the interval must be >= 0 nodes, got {}", nodes));
  detail::EngineState& e = detail::engine();
  e.idle_flush_nodes = nodes;
  e.next_idle_check = e.pending_nodes + nodes;
}
int64_t idle_flush() {
  return detail::engine().idle_flush_nodes;
}

void set_graphs(bool on) {
  detail::engine().graphs = on;
}
bool graphs() {
  return detail::engine().graphs;
}

void set_launch_thread(bool on) {
  detail::launch_thread() = on; // a batch run with it off first waits for the queued launches
}
bool launch_thread() {
  return detail::launch_thread();
}

void set_small_matmul(SmallMatmul mode) {
  detail::engine().small_matmul = static_cast<int>(mode); // part of every plan key
}
SmallMatmul small_matmul() {
  return static_cast<SmallMatmul>(detail::engine().small_matmul);
}

void set_loop_flush(bool on) {
  detail::EngineState& e = detail::engine();
  e.loop_flush = on;
  e.loop.reset();
  e.bodies_since_flush = 0;
  e.body_ends.clear();
  e.reads_cut.clear();
  e.loop_checked = -1;
  e.body_start_chosen_for = e.body_start_sampling_for = 0; // the detector counts from 0 again
}
bool loop_flush() {
  return detail::engine().loop_flush;
}

void set_merge_launches(bool on) {
  if (detail::merge_launches() == on) return;
  detail::merge_launches() = on;
  // A plan's batches decide their merges when first run: those prepared before go.
  detail::EngineState& e = detail::engine();
  const int64_t keep = std::exchange(e.max_plans, 0);
  detail::trim_plan_cache();
  e.max_plans = keep;
}
bool merge_launches() {
  return detail::merge_launches();
}

void set_group_launches(bool on) {
  detail::engine().group_launches = on; // part of every plan key
}
bool group_launches() {
  return detail::engine().group_launches;
}
void set_reproducible(bool on) {
  detail::engine().reproducible = on; // part of every plan key
}
bool reproducible() {
  return detail::engine().reproducible;
}

void set_write_held_values(bool on) {
  detail::engine().defer_held = !on; // part of every plan key
}
bool write_held_values() {
  return !detail::engine().defer_held;
}

void set_plan_cache_limit(int64_t max_plans) {
  if (max_plans < 0)
    throw Error(fmt::format("[set_plan_cache_limit] the limit must be >= 0, got {}", max_plans));
  detail::engine().max_plans = max_plans;
  detail::trim_plan_cache();
}

Stats stats() {
  Stats s = detail::engine().stats;
  const detail::MemoryStats& m = detail::memory_stats();
  s.bytes_allocated = m.allocated;
  s.bytes_in_use = m.in_use;
  s.peak_bytes_in_use = m.peak;
  s.copies_overlapped = m.copies_overlapped;
  return s;
}

void reset_stats() {
  detail::engine().stats = Stats{};
  detail::MemoryStats& m = detail::memory_stats();
  m.allocated = 0;
  m.peak = m.in_use;
  m.copies_overlapped = 0;
}

std::ostream& operator<<(std::ostream& os, const Stats& s) {
  return os << fmt::format(
             "ops recorded {} ({} merged with identical ones, {} from a loop template), dropped "
             "unseen {}, fused in "
             "registers {}, buffers written {} ({} in place), kernels {} ({:.1f} ops/kernel, max "
             "{}), gemms {}, copies {} ({} beside kernels), flushes {} ({} at the limits, {} "
             "early while the device was idle, {} before a loop body; {} checks found it busy), "
             "plans reused {} "
             "(planned {}, "
             "evicted {}, regrouped {}), graphs built {}, replayed {} ({} patched, {} queued to "
             "the launch "
             "thread), kernels merged into one launch {}, GPU batches launched directly {}, bytes "
             "allocated {}, in use {}, peak {}",
             s.ops_recorded, s.ops_merged, s.ops_from_template, s.nodes_dropped, s.nodes_fused,
             s.buffers_materialized, s.buffers_reused, s.kernels_run, s.fused_ops_per_kernel(),
             s.max_fused_ops, s.gemms_run, s.copies_run, s.copies_overlapped, s.flushes,
             s.auto_flushes, s.idle_flushes, s.loop_flushes, s.busy_checks, s.plan_hits,
             s.plan_misses, s.plan_evictions, s.plan_retries, s.graph_instantiations,
             s.graph_replays, s.graph_updates, s.launches_queued, s.kernels_merged, s.graph_misses,
             s.bytes_allocated, s.bytes_in_use, s.peak_bytes_in_use);
}

std::string last_plan() {
  const detail::Schedule* s = detail::last_schedule();
  std::string out = detail::dump_schedule(s ? *s : detail::Schedule{});
  if (detail::last_schedule_reused())
    out += "(reused from the plan cache: node ids are those of the evaluation that planned it)\n";
  return out;
}

} // namespace kiln

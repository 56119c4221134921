#pragma once
// Controlling and observing the engine: evaluation, eager mode, limits, statistics, plans.
#include <kiln/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace kiln {

/// Compute the given tensors (and everything pending they depend on) now.
void eval(const std::vector<Tensor>& ts);
template <class... Ts> void eval(const Ts&... ts) {
  eval(std::vector<Tensor>{ts...});
}
/// Compute every pending value that has a live handle, and wait for all devices.
void sync();
/// Compute every pending value that has a live handle, without waiting: on a GPU the work is
/// queued and flush returns (the end of a step: optim::Optimizer::step calls it). Inside a
/// function kiln::compile is tracing it does nothing: the trace evaluates everything at its end.
void flush();

/// kiln is used by one thread at a time: the first thread that records an op owns the graph,
/// and ops or evaluations from another thread throw kiln::Error while it does. The owner's use
/// ends when it exits or calls release_thread(); another thread may then take over, tensors
/// and pending work included. Tensor handles (copies, destruction) are not checked: they too
/// belong to the thread using kiln.
void release_thread();

/// Eager mode: every op is computed as soon as it is recorded, one kernel per op. For
/// debugging and for A/B measurement of what laziness buys. Initially from KILN_EAGER=1.
void set_eager(bool on);
bool eager();

/// The pending graph flushes itself (as sync() would) when it holds more than this many
/// nodes, or when pending results held by tensors and not yet consumed by other pending work
/// exceed this many bytes (a loop piling up results flushes; intermediates that stay in
/// registers and C++ expression temporaries don't count). Defaults: 10,000 nodes and 1 GiB;
/// env KILN_MAX_PENDING_NODES / KILN_MAX_PENDING_BYTES.
void set_pending_limits(int64_t max_nodes, int64_t max_bytes);

/// Adaptive batching on the GPU. Besides eval, reads and the limits above, the pending graph
/// is flushed early when the GPU it runs on has nothing to do, so that the GPU starts on a
/// loop's work while the host records the rest; while the GPU is busy, work piles up into
/// larger batches (up to the limits). Checked once every `nodes` recorded nodes (default 64;
/// env KILN_IDLE_FLUSH; 0 turns it off): a check flushes when the device of the op just
/// recorded has finished all its work and the values the flush would write (the pending results
/// that tensors hold) total at most 1 MiB, so that a cut costs no more memory traffic than a
/// launch. The CPU backend runs work as it is issued and is never flushed early. Results are
/// the same either way; only where kernels are cut differs. eval() always flushes at once.
void set_idle_flush(int64_t nodes);
int64_t idle_flush();
/// Loops without eval: when the ops recorded repeat (a loop body, found by comparing each op
/// with the one a period before: op, shapes, attributes, and how far back its inputs were
/// recorded), early flushes fall only before a body's first op (bodies begin where the fewest
/// values are held: a step's first op), after the most bodies that fit in 256 nodes, or when the
/// device is idle after 1, 2, 4, ... bodies of at least 16 * idle_flush() nodes (so only when
/// idle_flush() is at most 16): the few flush sizes are each one cached plan and one CUDA-graph
/// replay. A read finding whole bodies pending whose plan is not cached flushes them first in
/// power-of-two chunks (cached plans too). On by default; false for A/B measurements (env
/// KILN_LOOP_FLUSH=0): the node-count checks above apply instead. Results are the same either way.
void set_loop_flush(bool on);
bool loop_flush();

/// Let f32 matmuls on CUDA use TF32 tensor cores (about 10 bits of mantissa in the products).
/// Off by default; env KILN_ALLOW_TF32=1.
void set_allow_tf32(bool on);
/// cuBLAS for the matmuls that kiln's kernels do not compute (on by default). cuBLAS sets itself
/// up in each process at its first GEMM of each data type (f32: 80-135 ms of host time on the
/// H100 and H200); meanwhile those matmuls, up to 2^28 multiply-adds, run in kiln's own kernels
/// while a thread does the set-up, and the first evaluation after it sends them to cuBLAS. So a
/// program's first steps do not wait for it, but their matmuls' last bits can depend on when it
/// finished. `set_cublas_waits(true)` (env KILN_CUBLAS=wait) makes them wait instead, as does
/// KILN_COMPILE=sync. Off (env KILN_CUBLAS=0), every floating matmul on CUDA is computed in
/// kiln's generated kernels, at any size: GEMM tiles, or dot products for at most 4 rows or
/// columns; a process that turns it off before it first uses the GPU never loads cuBLAS. But
/// GEMMs of 2^26-2^28 multiply-adds then take 1.7-3.0x their time in cuBLAS, and f16/bf16 ones
/// get no tensor cores. docs/semantics.md, "Matmuls and cuBLAS". Results agree with cuBLAS's to
/// rounding.
void set_cublas(bool on);
bool cublas();
void set_cublas_waits(bool wait);
bool cublas_waits();

/// Repeated schedules are planned once: an evaluation whose pending graph has the structure of
/// one evaluated before (same ops, shapes, dtypes, layouts, constants and liveness) reuses that
/// plan. On the GPU a schedule of small kernels that has repeated is replayed as a CUDA graph,
/// with the buffer pointers of this evaluation patched in; results are the same as without.
/// `set_graphs(false)` (or env KILN_GRAPHS=0) launches kernel by kernel instead, for A/B
/// measurement. The plan cache holds at most `max_plans` schedules (default 256, least recently
/// used evicted first; env KILN_PLAN_CACHE; 0 plans every evaluation afresh).
void set_graphs(bool on);
bool graphs();

/// CUDA graph replays are issued from a launch thread of each GPU's backend: the driver's host
/// work per launch (~2-3 us, with the pointer updates of a replay) then runs while the calling
/// thread records the next step, instead of before it. Results are the same either way; an
/// error of a queued launch is reported (as kiln::Error) by the next call that waits for the
/// GPU or runs work on it, like any asynchronous GPU error. The thread starts at the first
/// replay and polls while replays keep coming; idle for 0.2 ms, it sleeps, and replays are
/// issued on the calling thread until they come often enough again to wake it.
/// `set_launch_thread(false)` (or env KILN_LAUNCH_THREAD=0) issues every launch on the calling
/// thread.
void set_launch_thread(bool on);
bool launch_thread();

/// Small matmuls — floating, at most 4 output rows (batch x M: a matrix times a vector, an RNN
/// cell at batch 1), K <= 1024 and at most 2^20 multiply-adds — are computed as dot products inside
/// the kernel that reads them, instead of a BLAS call whose result goes through memory: `x @ wx + h
/// @ wh + b` and an LSTM's gate math become one kernel. So are f32/f64 matmuls with more rows
/// and columns (K <= 1024, at most 2^24 multiply-adds) that the kernel reads at their own
/// (row, column): computed in tiles, a recurrent step's `tanh(x @ w + b)` is one kernel; read
/// through a view or by a reduction they get a kernel of their own (never a BLAS call: whether a
/// matmul is one must not depend on its readers, or lazy and eager results would differ). By
/// default on CUDA devices only (the CPU backend's BLAS is faster there); `everywhere` also on
/// the CPU (tests), `blas` never (A/B measurements; env KILN_SMALL_MATMUL=0, =1 or =cuda for
/// on_gpu, =all for everywhere). Results agree with BLAS to rounding.
enum class SmallMatmul { blas, on_gpu, everywhere };
void set_small_matmul(SmallMatmul mode);
SmallMatmul small_matmul();
/// Grouped launches: the elementwise kernels of an evaluation whose results nothing in it reads
/// (an optimizer's per-parameter updates, each over its own shape) run as one kernel with a
/// segment per kernel, instead of one launch each. On by default; off for A/B measurements
/// (env KILN_GROUP_LAUNCHES=0). Results are the same bits either way.
void set_group_launches(bool on);
bool group_launches();
/// Merged launches (experimental): on the GPU, consecutive launches of one small kernel in an
/// evaluation (the steps of a loop recorded without eval, flushed together) run as one launch,
/// a barrier between the steps instead of a launch or graph node each. Only kernels whose own
/// grid is one block or one thread-block cluster (at most 16 blocks: the seed step at d = 64)
/// merge, so merged steps compute the same bits as the same steps launched one by one. Off by
/// default until measured faster (docs/architecture.md, "Merged launches"). On with env
/// KILN_MERGE_LAUNCHES=1; switching drops the cached plans.
void set_merge_launches(bool on);
bool merge_launches();
/// Held values: at an evaluation, a value a Tensor holds but the evaluation does not ask for,
/// cheap to recompute (elementwise ops of values that stay in memory anyway: held realized
/// tensors), stays pending instead of being written; it is computed if and when it is read, or
/// by sync(). true writes every held value (env KILN_WRITE_HELD=1; A/B measurements).
/// docs/semantics.md, "What eval writes". Results are the same bits either way.
void set_write_held_values(bool on);
bool write_held_values();
/// Reproducible mode: results are the same bits on the CPU and on every GPU, so a training run
/// on the GPU follows its CPU run step for step. Every floating matmul is computed inside
/// kiln's kernels (no cuBLAS or OpenBLAS, whose summation orders differ), floating sums and dot
/// products accumulate in double-double (the rounded total does not depend on the order of the
/// additions, so not on the kernel's layout), and every math function of f32, f16 and bf16
/// uses kiln's own formulas on the GPU, as the CPU always does (and randn's log and cos, on
/// both). Not covered yet: the math functions of f64. Costs speed: large matmuls run at a
/// fraction of BLAS's. Off by default (env KILN_REPRODUCIBLE=1). docs/semantics.md,
/// "Reproducible mode".
void set_reproducible(bool on);
bool reproducible();
void set_plan_cache_limit(int64_t max_plans);

struct Stats {
  int64_t ops_recorded = 0;         // op calls that recorded a node or found one (views included)
  int64_t ops_merged = 0;           // of those, identical to a pending node, which they share (CSE;
                                    // once the recorder has found a loop, only ops of the kinds
                                    // that merged in its first steps: docs/architecture.md)
  int64_t ops_from_template = 0;    // of those, recorded from a loop body's earlier call
                                    // (KILN_LOOP_TEMPLATE; docs/architecture.md)
  int64_t nodes_dropped = 0;        // pending nodes released unseen: their work never ran
  int64_t nodes_fused = 0;          // nodes computed in registers inside a kernel, never stored
  int64_t buffers_materialized = 0; // kernel/GEMM/copy outputs written to memory
  int64_t buffers_reused = 0;       // of those, written in place into an input whose last user died
  int64_t kernels_run = 0;          // kernels run: fused (elementwise, reduction), gather/scatter
  int64_t gemms_run = 0;
  int64_t copies_run = 0;           // device transfers and concat pieces
  int64_t copies_overlapped = 0;    // host <-> GPU copies on a copy stream, beside kernels:
                                    // uploads issued while kernels ran, and every download
  int64_t fused_ops = 0;            // compute ops inside fused kernels (sum over kernels)
  int64_t max_fused_ops = 0;        // most compute ops in one kernel
  int64_t flushes = 0;              // evaluations of the pending graph
  int64_t auto_flushes = 0;         // of those, forced by the pending-graph limits
  int64_t idle_flushes = 0;         // of those, started early because the GPU was idle
  int64_t loop_flushes = 0;         // of those, cut before a repeating loop's body
  int64_t busy_checks = 0;          // early-flush checks that found the GPU busy (work piled up)
  int64_t plan_hits = 0;            // evaluations that reused a cached plan
  int64_t plan_misses = 0;          // evaluations planned afresh
  int64_t plan_evictions = 0;       // cached plans dropped to stay within the limit
  int64_t plan_retries = 0;         // times planning regrouped the graph: a kernel could not be
                                    // built as grouped, and one more value was written instead
  int64_t graph_instantiations = 0; // CUDA graphs built for a schedule that repeated
  int64_t graph_replays = 0;        // batches of GPU steps replayed as a CUDA graph
  int64_t graph_updates = 0;        // of those, replays that first patched changed pointers
  int64_t graph_misses = 0;         // batches of GPU steps launched one kernel at a time
  int64_t launches_queued = 0;      // of the replays, those issued by the launch thread
  int64_t kernels_merged = 0;       // kernels run inside a merged launch with others of their
                                    // kind (consecutive steps of a loop: KILN_MERGE_LAUNCHES)
  int64_t bytes_allocated = 0;      // total bytes of buffers allocated
  int64_t bytes_in_use = 0;         // bytes of live buffers now (not reset)
  int64_t peak_bytes_in_use = 0;
  double fused_ops_per_kernel() const {
    return kernels_run ? double(fused_ops) / double(kernels_run) : 0.0;
  }
};
Stats stats();
/// Zero the counters (bytes_in_use stays; the peak restarts from it).
void reset_stats();
std::ostream& operator<<(std::ostream& os, const Stats& s);

/// A readable dump of the last evaluated plan: each kernel's ops, inputs, outputs and why
/// fusion stopped where it did. KILN_DUMP=plan prints it to stderr at every evaluation.
std::string last_plan();

} // namespace kiln

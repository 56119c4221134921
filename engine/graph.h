#pragma once
// The recorder: the one pending graph of the process, its limits, statistics and switches.
// Op front-ends create nodes through it; evaluation (realize) hands nodes to the planner.
#include "engine/loop_detect.h"
#include "engine/node.h"

#include <kiln/engine.h>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <array>
#include <string>
#include <vector>

namespace kiln::detail {

struct EngineState {
  Node* pending_head = nullptr;
  int64_t pending_nodes = 0;
  int64_t pending_bytes = 0;
  int64_t max_nodes = 10000;
  int64_t max_bytes = int64_t(1) << 30;
  bool eager = false;
  bool dump_plan = false;   // KILN_DUMP=plan or passes: print each new plan
  bool dump_passes = false; // KILN_DUMP=passes: also the planner's state after each pass
  bool flushing = false;
  bool graphs = true;      // replay repeated GPU schedules as CUDA graphs (KILN_GRAPHS)
  int64_t max_plans = 256; // plan cache entries (KILN_PLAN_CACHE)
  // Small matmuls as dot products inside the kernels that read them (engine/planner.cpp):
  // 0 never (always BLAS), 1 on CUDA devices, 2 on every device (tests: the CPU interpreter
  // runs them too). KILN_SMALL_MATMUL=0 turns them off for A/B measurements.
  int small_matmul = 1;
  // Every kernel computes to the same bits on every device (FusedKernel::reproducible) and every
  // floating matmul is a kernel's dot product (KILN_REPRODUCIBLE, kiln::set_reproducible).
  bool reproducible = false;
  // The cuBLAS GEMM kinds whose per-process set-up had finished when this evaluation's plan key
  // was made (runtime/backend.h, cublas_ready_kinds): planning reads this copy, so that a plan
  // and its key agree when the set-up finishes between them.
  uint32_t cublas_ready = 0;
  // Sink kernels launched as one segmented kernel (engine/horizontal_fusion.cpp;
  // KILN_GROUP_LAUNCHES).
  bool group_launches = true;
  // Held values cheap to recompute stay pending at an evaluation that does not ask for them
  // (engine/mark.cpp, keep_held_pending); false: every held value is written (KILN_WRITE_HELD=1).
  bool defer_held = true;
  // Adaptive batching (engine/adaptive_flush.cpp): every this many pending nodes, flush early if
  // the device is idle (KILN_IDLE_FLUSH; 0 never). The next check is at next_idle_check nodes.
  int64_t idle_flush_nodes = 64;
  int64_t next_idle_check = 64;
  // Loops without eval (engine/loop_detect.h): while the user's ops repeat, early flushes fall
  // before a body's first op only, after a power of two of bodies (KILN_LOOP_FLUSH; false: node
  // counts).
  bool loop_flush = true;
  // A loop's flushes hold at most this many nodes (adaptive_flush.cpp says why 256).
  int64_t loop_flush_nodes = 256;
  // A confirmed loop's ops skip the CSE table unless their kind merged (engine/cse.h); false
  // for A/B measurements only (tools/host-probe/loop_forms.cpp).
  bool loop_skips_cse = true;
  // Evaluations in a row that reused a cached plan. A training step that repeats (two in a row)
  // skips the CSE table too, as a confirmed loop does, for the ops of kinds that never merged.
  int64_t plans_reused_in_a_row = 0;
  // A confirmed loop's scalar operands share one pending constant node per value (graph.h,
  // loop_constant); false for A/B measurements only.
  bool loop_shares_constants = true;
  // A confirmed loop's op calls are recorded from the body before where their operands are alike
  // (engine/loop_template.h; KILN_LOOP_TEMPLATE).
  bool loop_template = true;
  // Pending nodes recorded in a confirmed loop are keyed by token (engine/plan_key.h,
  // static_words_token; KILN_KEY_TOKENS).
  bool key_tokens = true;
  std::array<Node*, 4> loop_constants{}; // pending, internal; cleared as each is realized or freed
  int next_loop_constant = 0;            // the entry the next constant replaces
  LoopDetector loop;
  int64_t bodies_since_flush = 0;
  // Per whole body pending since the last flush: the id of the first node recorded after it
  // (engine/adaptive_flush.cpp, flush_whole_bodies), and the device the loop's ops run on.
  std::vector<uint64_t> body_ends;
  Device body_device;
  llvm::DenseSet<uint64_t> reads_cut; // key hashes of reads cut so (planned whole if they recur)
  int64_t loop_checked = -1;          // the loop position whose body start was last counted
  // The id of the first node the user's op call being recorded may have made (its own, and
  // internal ones such as a cast of an operand): next_id when the previous op call returned.
  uint64_t op_call_start = 1;
  // Where the bodies begin (adaptive_flush.cpp, body_start_chosen): the confirmation they were
  // chosen for; while choosing, the op calls' first ids over one body, and the position with
  // the fewest held values seen so far over the next.
  int64_t body_start_chosen_for = 0, body_start_sampling_for = 0;
  int64_t body_start_sampled_from = 0, body_start_best = 0, body_start_fewest = 0;
  std::vector<uint64_t> body_start_ids;
  // kiln::grad recorded backward ops not evaluated yet: the rest of the step (the optimizer's
  // update) is being recorded, and an early flush would cut it in two. Cleared by evaluations.
  bool step_open = false;
  int tracing = 0; // kiln::compile is recording a function: no early flush, no loop detection
  std::string trace_refusal; // why the function being traced must not be replayed (refuse_replay)
  // While tracing: for each realized view made (by id), the id of the node it views, so that a
  // trace can tell a view of its input from another value sharing the input's memory.
  llvm::DenseMap<uint64_t, uint64_t> trace_views;
  uint64_t next_id = 1;
  uint64_t seed = 0;
  uint64_t rng_counter = 0;
  Stats stats;
};

EngineState& engine();

/// A fresh pending node with contiguous layout. Not yet visible to anyone.
Node* new_node(OpCode op, DType dtype, Device device, const Shape& shape);
/// The same with layout `l` (a view's, relative to its root's contiguous layout).
Node* new_node(OpCode op, DType dtype, Device device, const Layout& l);
/// A realized node holding `buf` with layout `l`.
Node* new_realized(DType dtype, Device device, BufferRef buf, const Layout& l);
/// A realized node over `of`'s storage and layout with a fresh id, not published (counted as no
/// op): what kiln::compile hands a traced function for each input and state tensor.
Node* new_alias(Node* of);
/// A realized view `alias` was made of realized node `of` (make_view, detach): remembered
/// while a function is traced (EngineState::trace_views).
void note_view(const Node* alias, const Node* of);
/// A value is read on the host (item, to_vector, copy_to, data_ptr): a function being traced
/// is not replayed, since its replays would not read it again.
void note_host_read();
/// A pending node without inputs that a plan's run will realize (a replay of a traced
/// evaluation, engine/trace.h); internal until then.
Node* new_placeholder(OpCode op, DType dtype, Device device, const Shape& shape);
void add_input(Node* n, Node* input);
/// Publish a recorded node: count it, link it into the pending graph, flush when the graph is
/// over its limits or in eager mode, and return its first handle. `internal` nodes (operand
/// casts and scalar constants an op records for itself) are not realized on their own in
/// eager mode: they fuse into the op that asked for them.
/// A pending node identical to one already pending (same op, attributes and inputs) is not
/// linked: the existing node is handed out instead and `n` is freed (engine/cse.cpp).
Tensor publish(Node* n, bool internal = false);

/// Whether publish would record a user's pending node of kind `kind`, none of whose inputs
/// requires grad, as publish_known does: the loop detector notes it and CSE does not look it up
/// (a confirmed loop, where ops of its kind never merged).
bool publishes_as_known(const EngineState& e, uint64_t kind);
/// publishes_as_known without the kind: a confirmed loop, whose ops skip the CSE table unless
/// their kind merged.
bool skips_cse_in_loop(const EngineState& e);
/// Publish a user's pending node a loop template made (engine/loop_template.h) where
/// publishes_as_known holds: what publish does then, without working out the kind, CSE or
/// gradients again. `counted_bytes`: what the pending bytes count for n as a held result (its
/// bytes; 0 for a view).
Tensor publish_known(Node* n, uint64_t kind, int64_t counted_bytes);

/// Make an op's own operand (internal) a value in its own right, computed by flushes.
void expose(Node* n);

/// In a loop the recorder has confirmed (no gradient history or trace being recorded): an op's
/// scalar operand equal to one an earlier op made (dtype, device and value, bitwise) reuses
/// that pending constant node instead of a node of its own, which costs recording, the flush's
/// walk and freeing it: the seeds' loop has two per step. Returns nullptr otherwise.
Node* loop_constant(DType dtype, Device device, double scalar, int64_t iscalar);
/// Offer the internal constant `n`, just published, for loop_constant to hand out.
void share_loop_constant(Node* n);

void retain_handle(Node* n);
/// A new handle to `n` (one more handle count).
Tensor handle_to(Node* n);
void release_handle(Node* n);
void retain_use(Node* n);
void release_use(Node* n);

/// Turn a pending node into a realized one holding `buf` (contiguous unless it is a view);
/// releases its inputs.
void mark_realized(Node* n, BufferRef buf);

/// Compute the given nodes (and what they depend on). Defined by the executor.
void realize(llvm::ArrayRef<Node*> targets);
/// Compute every pending node with a live handle.
void flush_all();

} // namespace kiln::detail

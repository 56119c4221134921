#pragma once
// Schedule: the ordered steps of one evaluation, and the buffer slots they read and write.
// A Schedule holds no nodes and no buffers: it names nodes by their index in the evaluation's
// walk (engine/plan_key.h), so that the plan cache can run it again for another evaluation
// with the same key, with that evaluation's nodes and buffers bound.
#include "engine/plan_key.h"
#include "engine/why.h"
#include "ir/fused_kernel.h"
#include "ir/index_step.h"

#include <string>
#include <variant>
#include <vector>

namespace kiln::detail {

struct Slot {
  int leaf = -1;           // a realized input: the walk index of a node holding its buffer
  int64_t leaf_offset = 0; // that node's offset (elements) when planned: a run whose node sits
                           // elsewhere in its buffer moves the slot's base by the difference
  int producer = -1;       // a produced slot: the walk index of the node it will realize
  size_t bytes = 0;        // produced slots: allocated when the producing step runs
};

/// Why a value crossed memory at a step boundary.
struct Note {
  Origin value;
  bool written = false; // written by this step (else read from memory)
  Why reason = Why::none;
};

/// A generated kernel: the CPU backend interprets it, the CUDA backend compiles it.
struct KernelStep {
  FusedKernel kernel;
  /// Outputs written in place into an input's buffer instead of a new one (buffer_reuse.cpp).
  struct InPlace {
    int output = 0; // index into kernel.outputs
    int input = 0;  // index into kernel.inputs: the slot whose buffer the output takes over
  };
  std::vector<InPlace> in_place;
  /// kernel.compute_ops(), counted on the first run: the stats of every run read it, and the
  /// tape does not change once planned (a run writes only its constants' values).
  int compute_ops() const {
    if (compute_ops_ < 0) compute_ops_ = kernel.compute_ops();
    return compute_ops_;
  }

private:
  mutable int compute_ops_ = -1;
};

/// One contiguous block copied from one device to another (Step::device, the destination).
struct TransferStep {
  Device from;
  int src_slot = 0, dst_slot = 0;
  size_t src_offset = 0, bytes = 0; // bytes
};

struct Step {
  std::variant<KernelStep, GemmStep, TransferStep, IndexStep> work; // what runs
  Device device;             // where the step runs (for a transfer: the destination)
  std::vector<int> writes;   // slots this step produces (allocated before it runs)
  std::vector<int> realizes; // nodes (walk indices) realized when the step is done
  std::string name;          // readable kernel name
  std::vector<Note> notes;   // why fusion stopped at this step's inputs and outputs
  std::vector<int> fused;    // nodes (walk indices) computed in registers, never stored

  KernelStep* kernel() { return std::get_if<KernelStep>(&work); }
  const KernelStep* kernel() const { return std::get_if<KernelStep>(&work); }
  const GemmStep* gemm() const { return std::get_if<GemmStep>(&work); }
  const TransferStep* transfer() const { return std::get_if<TransferStep>(&work); }
  const IndexStep* index() const { return std::get_if<IndexStep>(&work); }
};

/// Batches stay small: their outputs are all allocated before the first of their steps runs
/// (intermediates are not freed step by step), and launch cost matters only for short kernels.
/// A step that writes more than this runs on its own, never in a CUDA graph (executor.cpp).
constexpr size_t kBatchStepBytes = size_t(16) << 20;

/// Calls f(slot) for every slot step `st` reads (a slot read twice: twice).
template <class F> void for_each_read(const Step& st, F&& f) {
  if (const GemmStep* g = st.gemm()) {
    f(g->a_slot);
    f(g->b_slot);
  } else if (const TransferStep* t = st.transfer()) {
    f(t->src_slot);
  } else if (const IndexStep* x = st.index()) {
    f(x->x_slot);
    f(x->index_slot);
    if (x->src_slot >= 0) f(x->src_slot);
  } else {
    for (const KernelInput& in : st.kernel()->kernel.inputs) f(in.slot);
  }
}

/// A constant node's value in a kernel's tape. The plan key leaves constants' values out, so a
/// scalar that changes every step (a learning rate) reuses the plan; each run writes the
/// values of its own constant nodes into the tapes it will run.
struct ConstantUse {
  int node = 0; // walk index of the constant node
  int step = 0; // index into Schedule::steps (a kernel step)
  int inst = 0; // index into that kernel's tape
};

struct Schedule {
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<ConstantUse> constants;
  std::vector<int> aliases;        // pending views (walk indices) realized as aliases of their root
  std::vector<uint64_t> alias_ids; // their ids when planned (for the dump)
  // Held values left pending, cheap to recompute (mark.cpp): ids when planned, for the dump.
  std::vector<uint64_t> deferred_ids;
};

/// The bytes of the slots step `st` allocates.
inline size_t written_bytes(const Schedule& s, const Step& st) {
  size_t n = 0;
  for (int w : st.writes) n += s.slots[w].bytes;
  return n;
}

/// Plan the evaluation of the targets of `w` (pending nodes; views allowed).
Schedule plan(const Walk& w);
/// Human-readable dump of a schedule (kiln::last_plan()). Reads no Node.
std::string dump_schedule(const Schedule& s);
/// The last schedule run (for kiln::last_plan()); null before the first evaluation.
const Schedule* last_schedule();
/// Whether the last schedule came from the plan cache (planned for an earlier evaluation).
bool last_schedule_reused();

} // namespace kiln::detail

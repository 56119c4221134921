// In-place outputs: an elementwise kernel may write an output into the buffer of an input whose
// last reference dies with this evaluation, instead of allocating. The motivating case is a
// parameter update, `x = x * 0.9f + g; eval(x);`: once `x` is reassigned, the old value is
// referenced only by the pending node that consumes it, so the new value can take its buffer
// and a 10,000-step loop allocates nothing after the first step.
//
// A buffer B read by this plan through slot s is donated to output o of step i when
//  0. B is kiln's own (not memory a user handed it: Buffer::external), has at most
//     kMaxDonorRefs references (the plan key records no more), and is read through one slot;
//  1. nothing outside this evaluation can see B again: every realized node holding B that the
//     plan reads has no handle, all its uses come from nodes of this plan (each is computed
//     now and releases it), and no pending view of it is in the plan (a view with a handle
//     would become an alias of B); and B has no other reference (no other realized node, view
//     or handle): its count is exactly those nodes (a Schedule holds no buffers);
//  2. no later step reads s (a slot read by a later step must keep its values);
//  3. step i is an elementwise kernel, o is the whole value it realizes (contiguous, offset 0,
//     B's size), and every load of s in step i uses exactly o's index map with an element of
//     the same size (and s is no dot operand: a small matmul reads whole rows). Then each element
//     is read before it is written, by the same thread: the CPU interpreter evaluates a whole
//     256-element block (all loads) before storing it, and the CUDA code loads every input of an
//     element (or vector of elements) before storing its outputs, through plain pointers (a
//     `__restrict__` or read-only-cache load in codegen, or an interpreter that stores before
//     loading a whole block, would break this). Distinct outputs never share a donor.
// The executor then hands B to o instead of allocating (stats().buffers_reused) and the plan
// dump says so. B stays correct for everyone: the old node holding it is destroyed once its
// consumers are realized, which is before the evaluation ends.
#include "engine/plan_key.h"
#include "engine/planner_impl.h"

#include <llvm/ADT/DenseMap.h>

#include <algorithm>

namespace kiln::detail {

namespace {

// A realized node read by the plan: its uses by plan nodes, and whether a pending view reads it.
struct Leaf {
  uint32_t uses = 0;
  bool viewed = false;
};

// A buffer read by the plan: how many read nodes hold it, and whether one of them lives on.
struct Holders {
  unsigned nodes = 0;
  bool survives = false;
  Device device;
};

bool reads_slot_only_as(const FusedKernel& k, int slot, int out) {
  const KernelOutput& o = k.outputs[out];
  for (int j = 0; j < static_cast<int>(k.inputs.size()); ++j) {
    const KernelInput& in = k.inputs[j];
    if (in.slot != slot) continue;
    // Another segment of a segmented kernel runs concurrently with o's: it must not read what
    // o overwrites.
    if (k.segmented() && k.segment_of_input(j) != k.segment_of_output(out)) return false;
    // A dot operand is read along K: other elements' values, possibly already overwritten.
    if (in.strides != o.strides || in.offset != o.offset ||
        itemsize(in.dtype) != itemsize(o.dtype) || k.dot_operand(j))
      return false;
  }
  return true;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

void reuse_buffers(const PlanGraph& pg, Schedule& sched) {
  llvm::DenseMap<Node*, Leaf> leaves;
  for (const Info& in : pg.infos)
    for (Node* x : in.n->inputs)
      if (x->realized()) {
        Leaf& l = leaves[x];
        l.uses++;
        l.viewed |= in.n->op == OpCode::view;
      }
  if (leaves.empty()) return;
  llvm::DenseMap<Buffer*, Holders> holders;
  for (auto& [x, l] : leaves) {
    Holders& h = holders[x->buffer.get()];
    h.nodes++;
    h.survives |= x->handles > 0 || x->uses != l.uses || l.viewed;
    h.device = x->device;
  }

  std::vector<Slot>& slots = sched.slots;
  std::vector<int> last_read(slots.size(), -1);
  // A transfer to the host may still read its source after later kernels have run (a GPU's
  // download does not hold them back): its source is never written in place.
  std::vector<bool> downloaded(slots.size(), false);
  for (int i = 0; i < static_cast<int>(sched.steps.size()); ++i) {
    const Step& st = sched.steps[i];
    for_each_read(st, [&](int slot) { last_read[slot] = i; });
    if (const TransferStep* t = st.transfer(); t && st.device.is_cpu())
      downloaded[static_cast<size_t>(t->src_slot)] = true;
  }

  // Realized nodes have slots of their own (kernel_builder.cpp): a buffer read through two
  // slots is read where the other slot's reads cannot see its overwrite.
  llvm::DenseMap<Buffer*, int> slots_of_buffer;
  for (const Slot& sl : slots)
    if (sl.leaf >= 0) slots_of_buffer[pg.node(sl.leaf)->buffer.get()]++;
  std::vector<bool> donated(slots.size(), false);
  for (int i = 0; i < static_cast<int>(sched.steps.size()); ++i) {
    Step& st = sched.steps[i];
    KernelStep* ks = st.kernel();
    if (!ks || ks->kernel.kind != FusedKernel::Kind::elementwise) continue;
    const FusedKernel& k = ks->kernel;
    for (int oi = 0; oi < static_cast<int>(k.outputs.size()); ++oi) {
      const KernelOutput& o = k.outputs[oi];
      const Slot& out = slots[o.slot];
      // A concat piece written into its slice of the concat (concat_slices.cpp) is not o's
      // whole value.
      if (out.producer < 0 || !contains(st.realizes, out.producer) || o.offset != 0 ||
          o.strides != contiguous_strides(k.output_space(oi)) || out.bytes == 0 ||
          out.bytes != static_cast<size_t>(k.output_space(oi).numel()) * itemsize(o.dtype))
        continue;
      for (int ii = 0; ii < static_cast<int>(k.inputs.size()); ++ii) {
        int s = k.inputs[ii].slot;
        Buffer* b = slots[s].leaf < 0 ? nullptr : pg.node(slots[s].leaf)->buffer.get();
        // Adopted memory (from_blob, from_dlpack) is the user's: never written by kiln.
        if (!b || b->external() || donated[s] || downloaded[static_cast<size_t>(s)] ||
            last_read[s] != i || b->bytes != out.bytes)
          continue;
        auto h = holders.find(b);
        if (h == holders.end() || h->second.survives || h->second.device != st.device ||
            b->use_count() != h->second.nodes || b->use_count() > kMaxDonorRefs ||
            slots_of_buffer[b] != 1 || !reads_slot_only_as(k, s, oi))
          continue;
        donated[s] = true;
        ks->in_place.push_back({oi, ii});
        break;
      }
    }
  }
}

} // namespace kiln::detail

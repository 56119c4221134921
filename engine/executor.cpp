// Running a schedule: allocate each step's outputs, run it on its device's backend, then turn
// the nodes it computed into realized ones. A failure leaves every node either realized (its
// step ran) or pending as before, so the engine stays usable.
#include "engine/errors.h"
#include "engine/graph.h"
#include "engine/kernel_observer.h"
#include "engine/schedule.h"
#include "runtime/memory_stats.h"

#include <cstdio>

namespace kiln::detail {

namespace {

KernelObserver& observer() {
  static KernelObserver f;
  return f;
}

// Keeps the nodes a schedule will realize alive while it runs (as one more use each).
struct Pins {
  std::vector<Node*> nodes;
  explicit Pins(const Schedule& s) {
    for (const Step& st : s.steps)
      for (Node* n : st.realizes) nodes.push_back(n);
    for (Node* n : s.aliases) nodes.push_back(n);
    for (Node* n : nodes) retain_use(n);
  }
  ~Pins() {
    for (Node* n : nodes) release_use(n);
  }
};

Schedule& last() {
  static Schedule s;
  return s;
}

// Keeps the schedule for kiln::last_plan(), minus its buffers and node pointers, which must not
// outlive the run. Formatting happens only when someone asks.
struct KeepForDump {
  Schedule& s;
  explicit KeepForDump(Schedule& sched) : s(sched) {}
  ~KeepForDump() {
    s.slots.clear();
    s.aliases.clear();
    for (Step& st : s.steps) {
      st.realizes.clear();
      st.fused.clear();
    }
    last() = std::move(s);
  }
};

struct FlushGuard {
  bool& flag;
  explicit FlushGuard(bool& f) : flag(f) { flag = true; }
  ~FlushGuard() { flag = false; }
};

// Device-to-device copies go through the host when neither side is the CPU.
void run_transfer(const Step& st, llvm::ArrayRef<Buffer*> bufs) {
  const auto& t = st.transfer;
  if (t.bytes == 0) return;
  Buffer& src = *bufs[t.src_slot];
  Buffer& dst = *bufs[t.dst_slot];
  Backend& from = backend_for(t.from, "to");
  Backend& to = backend_for(st.device, "to");
  if (t.from.is_cpu()) {
    to.copy_from_host(dst, 0, static_cast<const char*>(src.data) + t.src_offset, t.bytes);
  } else if (st.device.is_cpu()) {
    from.copy_to_host(dst.data, src, t.src_offset, t.bytes);
  } else {
    std::vector<char> host(t.bytes);
    from.copy_to_host(host.data(), src, t.src_offset, t.bytes);
    to.copy_from_host(dst, 0, host.data(), t.bytes);
  }
}

// The buffer an output slot is written into: an input's, when the planner found that the
// input's last reference dies with this evaluation (buffer_reuse.cpp), else a new one.
BufferRef output_buffer(Schedule& s, const Step& st, int w, Backend& be, Stats& stats) {
  for (const Step::InPlace& r : st.in_place)
    if (st.kernel.outputs[r.output].slot == w) {
      stats.buffers_reused++;
      return s.slots[st.kernel.inputs[r.input].slot].buffer;
    }
  return be.allocate(s.slots[w].bytes);
}

void run_step(Schedule& s, Step& st, Stats& stats) {
  Backend& be = backend_for(st.device, "eval");
  for (int w : st.writes) {
    s.slots[w].buffer = output_buffer(s, st, w, be, stats);
    stats.buffers_materialized++;
  }
  llvm::SmallVector<Buffer*, 8> bufs;
  for (Slot& slot : s.slots) bufs.push_back(slot.buffer.get());
  if (st.kind == Step::Kind::gemm) {
    be.run_gemm(st.gemm, bufs);
    stats.gemms_run++;
  } else if (st.kind == Step::Kind::transfer) {
    run_transfer(st, bufs);
    stats.copies_run++;
  } else {
    if (observer()) observer()(st.kernel);
    be.run_kernel(st.kernel, bufs);
    if (st.kernel.kind == FusedKernel::Kind::elementwise && st.kernel.compute_ops() == 0) {
      stats.copies_run++;
    } else {
      int ops = st.kernel.compute_ops();
      stats.kernels_run++;
      stats.fused_ops += ops;
      stats.max_fused_ops = std::max<int64_t>(stats.max_fused_ops, ops);
    }
  }
  stats.nodes_fused += static_cast<int64_t>(st.fused.size());
  for (Node* n : st.fused) n->fused = true; // alive: the nodes realized below still use them
  for (Node* n : st.realizes) {
    for (int w = 0; w < static_cast<int>(s.slots.size()); ++w)
      if (s.slots[w].producer == n) mark_realized(n, s.slots[w].buffer);
  }
}

} // namespace

KernelObserver set_kernel_observer(KernelObserver f) {
  std::swap(observer(), f);
  return f;
}

const Schedule& last_schedule() {
  return last();
}

void realize(llvm::ArrayRef<Node*> targets) {
  EngineState& e = engine();
  if (e.flushing) fail("eval", "re-entered while a plan is running");
  llvm::SmallVector<Node*, 8> pending;
  for (Node* t : targets)
    if (!t->realized()) pending.push_back(t);
  if (pending.empty()) return;

  Schedule s = plan(pending);
  e.stats.flushes++;
  if (e.dump_plan) std::fprintf(stderr, "%s\n", dump_schedule(s).c_str());

  {
    Pins pins(s);
    FlushGuard guard(e.flushing);
    KeepForDump keep(s);
    for (Step& st : s.steps) run_step(s, st, e.stats);
    for (Node* v : s.aliases) {
      Node* root = view_root(v);
      if (!v->realized() && root->realized()) mark_realized(v, root->buffer);
    }
  }
  // Targets that are views of roots realized now (or earlier) become aliases too.
  for (Node* t : pending) {
    Node* root = view_root(t);
    if (!t->realized() && root->realized()) mark_realized(t, root->buffer);
  }
}

} // namespace kiln::detail

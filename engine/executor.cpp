// Running a schedule: bind the evaluation's nodes and buffers, allocate each step's outputs,
// run it on its device's backend, then turn the nodes it computed into realized ones. Runs of
// consecutive small GPU steps go to the backend as one batch (prepared once per cached plan:
// see plan_cache.h), which may replay them as a CUDA graph. A failure leaves every node either
// realized (its step ran) or pending as before, so the engine stays usable.
#include "engine/executor.h"
#include "engine/adaptive_flush.h"
#include "engine/graph.h"
#include "engine/kernel_observer.h"
#include "engine/owner_thread.h"
#include "engine/plan_cache.h"
#include "engine/schedule.h"
#include "ir/errors.h"
#include "runtime/memory_stats.h"

#include <cstdio>

namespace kiln::detail {

namespace {

// Batches stay small: their outputs are all allocated before the first of their steps runs
// (intermediates are not freed step by step), and launch cost matters only for short kernels.
constexpr size_t kBatchBytes = size_t(64) << 20; // outputs of one batch together

KernelObserver& observer() {
  static KernelObserver f;
  return f;
}

struct Last {
  std::shared_ptr<const Schedule> schedule;
  bool reused = false;
};
Last& last() {
  static Last s;
  return s;
}

// One evaluation's bindings of a schedule: its nodes (by walk index) and a buffer per slot. A
// realized input whose node sits at another offset in its buffer than when the plan was made
// (a slice at a new position) is passed as a view of the buffer with its base moved by the
// difference: the plan's operand offsets are relative to the planned position.
struct Run {
  const Schedule& s;
  llvm::ArrayRef<Node*> nodes;
  std::vector<const void*>& hints; // per slot: the address its output had last run
  // Inline capacity: a small step allocates nothing here.
  llvm::SmallVector<BufferRef, 16> buffers;
  llvm::SmallVector<Buffer, 4> moved; // unowned views of realized inputs at other offsets
  llvm::SmallVector<int, 4> moved_slot;
  llvm::SmallVector<Buffer*, 16> raw;        // what the backends read: buffers, moved ones replaced
  llvm::SmallVector<int, 32> slot_of_node;   // walk index -> the slot it realizes, or -1
  llvm::SmallVector<Buffer*, 2> downloading; // written by this run's downloads still in flight

  Run(const Schedule& sched, llvm::ArrayRef<Node*> n, std::vector<const void*>& h)
      : s(sched), nodes(n), hints(h), buffers(sched.slots.size()), raw(sched.slots.size()),
        slot_of_node(n.size(), -1) {
    hints.resize(s.slots.size());
    for (size_t i = 0; i < s.slots.size(); ++i) {
      const Slot& slot = s.slots[i];
      if (slot.producer >= 0) slot_of_node[slot.producer] = static_cast<int>(i);
      if (slot.leaf < 0) continue;
      const Node* leaf = nodes[slot.leaf];
      if (leaf->buffer) wait_written(*leaf->buffer); // a download still in flight
      buffers[i] = leaf->buffer;
      raw[i] = leaf->buffer.get();
      if (int64_t delta = leaf->layout.offset - slot.leaf_offset) {
        Buffer& v = moved.emplace_back(); // no owner: releases nothing
        v.data = static_cast<char*>(leaf->buffer->data) + delta * itemsize(leaf->dtype);
        v.bytes = leaf->buffer->bytes;
        v.pinned_host = leaf->buffer->pinned_host; // its copies may still read it directly
        v.external_ctx = leaf->buffer->external_ctx;
        moved_slot.push_back(static_cast<int>(i));
      }
    }
    // moved is complete: its elements keep their addresses from here on
    for (size_t j = 0; j < moved.size(); ++j) raw[moved_slot[j]] = &moved[j];
  }
  /// Binds a produced slot (before its step runs).
  void produce(int slot, BufferRef b) {
    raw[slot] = b.get();
    buffers[slot] = std::move(b);
  }
};

// Keeps the nodes a schedule will realize alive while it runs (as one more use each).
struct Pins {
  llvm::SmallVector<Node*, 16> nodes;
  Pins(const Schedule& s, llvm::ArrayRef<Node*> walk) {
    for (const Step& st : s.steps)
      for (int i : st.realizes) nodes.push_back(walk[i]);
    for (int i : s.aliases) nodes.push_back(walk[i]);
    for (Node* n : nodes) retain_use(n);
  }
  ~Pins() {
    for (Node* n : nodes) release_use(n);
  }
};

struct FlushGuard {
  bool& flag;
  explicit FlushGuard(bool& f) : flag(f) { flag = true; }
  ~FlushGuard() { flag = false; }
};

// A transfer's output buffer is made by the copy: an upload allocates it where the copy can
// fill it without waiting for the kernels already queued on the destination, and a download
// into pinned memory returns before the data is there (CudaBackend). Device-to-device copies go
// through the host when neither side is the CPU.
BufferRef run_transfer(Run& r, const Step& st, Backend& to) {
  const TransferStep& t = *st.transfer();
  const Buffer& src = *r.raw[t.src_slot];
  const char* data = static_cast<const char*>(src.data) + t.src_offset;
  const void* hint = r.hints[t.dst_slot];
  if (t.from.is_cpu())
    return to.upload(data, t.bytes, src.pinned_host ? &src : nullptr, hint, "to");
  Backend& from = backend_for(t.from, "to");
  if (st.device.is_cpu() && t.bytes) {
    // the owning buffer (raw may be an unowned view of it at another offset)
    if (BufferRef b = from.download(r.buffers[t.src_slot], data, t.bytes, "to")) {
      r.downloading.push_back(b.get());
      return b;
    }
  }
  if (st.device.is_cpu()) {
    BufferRef dst = to.allocate(t.bytes, hint);
    if (t.bytes) from.copy_to_host(dst->data, src, t.src_offset, t.bytes);
    return dst;
  }
  std::vector<char> host(t.bytes);
  if (t.bytes) from.copy_to_host(host.data(), src, t.src_offset, t.bytes);
  return to.upload(host.data(), t.bytes, nullptr, hint, "to");
}

// Host-side work of a run (a CPU step, a copy from the host) reads what its downloads wrote.
void wait_for_downloads(Run& r) {
  for (Buffer* b : r.downloading) wait_written(*b);
  r.downloading.clear();
}

// The buffer an output slot is written into: an input's, when the planner found that the
// input's last reference dies with this evaluation (buffer_reuse.cpp), else a new one.
BufferRef output_buffer(Run& r, const Step& st, int w, Backend& be, Stats& stats) {
  if (const KernelStep* ks = st.kernel())
    for (const KernelStep::InPlace& ip : ks->in_place)
      if (ks->kernel.outputs[ip.output].slot == w) {
        stats.buffers_reused++;
        return r.buffers[ks->kernel.inputs[ip.input].slot];
      }
  BufferRef b = be.allocate(r.s.slots[w].bytes, r.hints[w]);
  r.hints[w] = b->data;
  return b;
}

void allocate_outputs(Run& r, const Step& st, Backend& be, Stats& stats) {
  for (int w : st.writes) {
    r.produce(w, output_buffer(r, st, w, be, stats));
    stats.buffers_materialized++;
  }
}

// After a step ran: count it and realize the nodes it computed.
void finish_step(Run& r, const Step& st, Stats& stats) {
  const KernelStep* ks = st.kernel();
  const int ops = ks ? ks->compute_ops() : 0;
  if (st.gemm()) {
    stats.gemms_run++;
  } else if (st.index()) {
    stats.kernels_run++;
  } else if (!ks || (ks->kernel.kind == FusedKernel::Kind::elementwise && ops == 0)) {
    stats.copies_run++;
  } else {
    stats.kernels_run++;
    stats.fused_ops += ops;
    stats.max_fused_ops = std::max<int64_t>(stats.max_fused_ops, ops);
  }
  stats.nodes_fused += static_cast<int64_t>(st.fused.size());
  // Alive: the nodes realized below still use them.
  for (int i : st.fused) r.nodes[i]->fused = true;
  for (int i : st.realizes)
    if (int w = r.slot_of_node[i]; w >= 0 && r.nodes[i] != unbound_node())
      mark_realized(r.nodes[i], r.buffers[w]);
}

void run_step(Run& r, const Step& st, Stats& stats) {
  Backend& be = backend_for(st.device, "eval");
  const bool reads_host = st.transfer() ? st.transfer()->from.is_cpu() : st.device.is_cpu();
  if (reads_host && !r.downloading.empty()) wait_for_downloads(r);
  if (const TransferStep* t = st.transfer()) {
    r.produce(t->dst_slot, run_transfer(r, st, be));
    r.hints[t->dst_slot] = r.raw[t->dst_slot]->data;
    stats.buffers_materialized++;
    return finish_step(r, st, stats);
  }
  allocate_outputs(r, st, be, stats);
  llvm::ArrayRef<Buffer*> bufs = r.raw;
  if (const GemmStep* g = st.gemm()) {
    be.run_gemm(*g, bufs);
  } else if (const IndexStep* ix = st.index()) {
    be.run_index(*ix, bufs);
  } else {
    const FusedKernel& k = st.kernel()->kernel;
    if (observer()) observer()(k);
    be.run_kernel(k, bufs);
  }
  finish_step(r, st, stats);
}

// A batch allocates the outputs of all its steps, runs them in one go, then realizes them.
void run_batch(Run& r, const CachedPlan::Batch& b, Stats& stats) {
  Backend& be = backend_for(r.s.steps[b.begin].device, "eval");
  for (int i = b.begin; i < b.end; ++i) {
    const Step& st = r.s.steps[i];
    allocate_outputs(r, st, be, stats);
    if (const KernelStep* ks = st.kernel(); ks && observer()) observer()(ks->kernel);
  }
  b.run->run(r.raw, engine().graphs, stats);
  for (int i = b.begin; i < b.end; ++i) finish_step(r, r.s.steps[i], stats);
}

// This evaluation's constant values into the plan's kernels (the plan key leaves them out), so
// that backends, and batches that kept a kernel's Params, run with them.
void write_constants(Schedule& s, llvm::ArrayRef<Node*> nodes) {
  for (const ConstantUse& c : s.constants) {
    TapeInst& inst = s.steps[c.step].kernel()->kernel.tape[c.inst];
    const Node* n = nodes[c.node];
    inst.imm = n->scalar;
    inst.iimm = n->iscalar;
  }
}

bool batchable(const Schedule& s, const Step& st) {
  return !st.transfer() && !st.device.is_cpu() && written_bytes(s, st) <= kBatchStepBytes;
}

// Runs of consecutive small steps on one GPU, each prepared by its backend (once per plan).
void find_batches(CachedPlan& p) {
  const Schedule& s = *p.schedule;
  p.batches.clear();
  const int n = static_cast<int>(s.steps.size());
  for (int i = 0; i < n;) {
    if (!batchable(s, s.steps[i])) {
      ++i;
      continue;
    }
    int j = i + 1;
    size_t bytes = written_bytes(s, s.steps[i]);
    while (j < n && batchable(s, s.steps[j]) && s.steps[j].device == s.steps[i].device &&
           bytes + written_bytes(s, s.steps[j]) <= kBatchBytes)
      bytes += written_bytes(s, s.steps[j++]);
    llvm::SmallVector<BatchItem, 8> items;
    for (int k = i; k < j; ++k) {
      const Step& st = s.steps[k];
      items.push_back(st.gemm()    ? BatchItem{nullptr, st.gemm()}
                      : st.index() ? BatchItem{nullptr, nullptr, st.index()}
                                   : BatchItem{&st.kernel()->kernel});
    }
    if (auto b = backend_for(s.steps[i].device, "eval").prepare_batch(items))
      p.batches.push_back({i, j, std::move(b)});
    i = j;
  }
  p.batches_known = true;
}

} // namespace

Node* unbound_node() {
  static Node* n = [] {
    Node* s = new Node;
    s->handles = 1;
    s->internal = true;
    return s;
  }();
  return n;
}

KernelObserver set_kernel_observer(KernelObserver f) {
  std::swap(observer(), f);
  return f;
}

const Schedule* last_schedule() {
  return last().schedule.get();
}
bool last_schedule_reused() {
  return last().reused;
}

void run_plan(CachedPlan& p, llvm::ArrayRef<Node*> nodes, llvm::function_ref<void()> done) {
  EngineState& e = engine();
  write_constants(*p.schedule, nodes);
  const Schedule& s = *p.schedule;
  e.stats.flushes++;
  last() = {p.schedule, p.runs++ > 0};
  if (e.dump_plan) { // a loop prints its plan once, then one line per repetition
    if (last().reused)
      std::fprintf(stderr, "plan: reused from the plan cache (run %lld)\n",
                   static_cast<long long>(p.runs));
    else
      std::fprintf(stderr, "%s\n", dump_schedule(s).c_str());
  }
  Pins pins(s, nodes);
  FlushGuard guard(e.flushing);
  if (!p.batches_known) find_batches(p);
  Run r(s, nodes, p.last_data);
  size_t next = 0;
  for (int i = 0; i < static_cast<int>(s.steps.size());) {
    if (next < p.batches.size() && p.batches[next].begin == i) {
      run_batch(r, p.batches[next], e.stats);
      i = p.batches[next++].end;
    } else {
      run_step(r, s.steps[i++], e.stats);
    }
  }
  for (int i : s.aliases) {
    Node* v = nodes[i];
    Node* root = view_root(v);
    if (!v->realized() && root->realized()) mark_realized(v, root->buffer);
  }
  if (done) done();
}

void realize(llvm::ArrayRef<Node*> targets) {
  check_owner_thread("eval");
  EngineState& e = engine();
  if (e.flushing) fail("eval", "re-entered while a plan is running");
  llvm::SmallVector<Node*, 8> pending;
  auto left_pending = [&] {
    pending.clear();
    for (Node* t : targets)
      if (!t->realized()) pending.push_back(t);
    return !pending.empty();
  };
  if (!left_pending()) return;

  static Walk w; // one evaluation at a time (re-entry fails above); its capacity is reused
  static std::vector<uint64_t> token_key;
  uint64_t token_hash = 0;
  bool keyed_by_tokens = false;
  std::shared_ptr<CachedPlan> guess = last_plan(); // a loop repeats its evaluations
  std::shared_ptr<CachedPlan> p;
  // The walk keys a confirmed loop's nodes by their tokens, which find the plan it expects (the
  // last one's, in a steady loop) or another plan's token key (evaluations that alternate)
  // without spelling out their words. Where they do not, the nodes are walked again with their
  // words spelled out, the plan cache's key.
  auto walk = [&] {
    walk_pending(pending, w, expected_key(guess));
    keyed_by_tokens = !w.matched && w.tokens;
    if (!keyed_by_tokens || (p = plan_by_tokens(w))) {
      keyed_by_tokens = false;
      return;
    }
    token_key.swap(w.key);
    token_hash = w.hash;
    walk_pending(pending, w, expected_key(guess, /*spelled=*/true), /*spell_out=*/true);
  };
  walk();
  // A loop without eval read after a number of bodies never planned: its whole bodies are
  // flushed in chunks that have plans (adaptive_flush.h), then the rest is walked again.
  if (!p && !e.body_ends.empty() && !plan_cached(w) && flush_whole_bodies(w.hash)) {
    if (!left_pending()) return;
    guess = last_plan();
    walk();
  }
  if (!p) p = plan_for(w, guess);
  if (keyed_by_tokens) set_token_key(p, token_key, token_hash); // what its next walk finds
  run_plan(*p, w.nodes);
  // Targets that are views of roots realized now (or earlier) become aliases too.
  for (Node* t : pending) {
    Node* root = view_root(t);
    if (!t->realized() && root->realized()) mark_realized(t, root->buffer);
  }
  note_flushed();
}

} // namespace kiln::detail

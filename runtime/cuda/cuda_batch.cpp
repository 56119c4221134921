#include "runtime/cuda/cuda_batch.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/launch_order.h"

#include "ir/errors.h"

#include <kiln/engine.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace kiln::detail {

namespace {

bool empty_gemm(const GemmStep& g) {
  const int rank = g.out_shape.size();
  return g.out_shape[rank - 2] == 0 || g.out_shape[rank - 1] == 0;
}

// Bytes from an operand's first element to its last (0 when it cannot be staged as one span:
// negative strides, or empty).
size_t operand_span(const Layout& l, DType t) {
  int64_t last = 0;
  for (int d = 0; d < l.shape.size(); ++d) {
    if (l.shape[d] == 0) return 0;
    if (l.strides[d] < 0) return 0;
    last += (l.shape[d] - 1) * l.strides[d];
  }
  return static_cast<size_t>(last + 1) * itemsize(t);
}

// Adds a kernel node after the nodes `after` names, each edge programmatic where `after` says.
// A programmatic edge lets the node launch as soon as its predecessor's blocks have exited
// rather than after its completion is signalled: every generated kernel's first instruction
// waits for the kernels before it to complete and their writes to be visible
// (griddepcontrol.wait, codegen/device/common.cuh), so only the launch's latency is overlapped,
// and a kernel cannot complete before its predecessors (launch_dependencies drops edges that
// others imply on that ground). Needs the kernels compiled for sm_90+, which every NVRTC that
// kiln loads (12 and later) targets for an sm_90+ device.
void add_kernel_node(cudaGraphNode_t* node, cudaGraph_t graph, const GraphPredecessors& after,
                     const cudaKernelNodeParams& p, const char* what) {
  cuda_check(cudaGraphAddKernelNode(node, graph, nullptr, 0, &p), "eval", what);
  if (after.nodes.empty()) return;
  llvm::SmallVector<cudaGraphNode_t, 4> to(after.nodes.size(), *node);
  llvm::SmallVector<cudaGraphEdgeData, 4> edges(after.nodes.size());
  for (size_t k = 0; k < edges.size(); ++k)
    if (after.programmatic[k]) {
      edges[k].from_port = cudaGraphKernelNodePortProgrammatic;
      edges[k].type = cudaGraphDependencyTypeProgrammatic;
    }
  cuda_check(
      cudaGraphAddDependencies(graph, after.nodes.data(), to.data(), edges.data(), edges.size()),
      "eval", "cudaGraphAddDependencies");
}

// The node types of a captured GEMM, for the error when it cannot be a child graph (a child
// may not hold memory allocation or free nodes).
std::string graph_node_types(cudaGraph_t g) {
  size_t n = 0;
  if (cudaGraphGetNodes(g, nullptr, &n) != cudaSuccess) return "?";
  std::vector<cudaGraphNode_t> nodes(n);
  if (cudaGraphGetNodes(g, nodes.data(), &n) != cudaSuccess) return "?";
  std::map<int, int> count;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t{};
    cudaGraphNodeGetType(node, &t);
    count[static_cast<int>(t)]++;
  }
  std::string out;
  for (auto [type, k] : count)
    out += (out.empty() ? "" : ", ") + std::to_string(k) + " of node type " + std::to_string(type);
  return out;
}

void add_gemm_node(cudaGraphNode_t* node, cudaGraph_t graph, const GraphPredecessors& after,
                   cudaGraph_t child) {
  cudaError_t e =
      cudaGraphAddChildGraphNode(node, graph, after.nodes.data(), after.nodes.size(), child);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    const std::string types = graph_node_types(child);
    cudaGraphDestroy(child);
    fail("eval", "cudaGraphAddChildGraphNode failed for a captured GEMM ({}): {}", types,
         cudaGetErrorString(e));
  }
  cudaGraphDestroy(child); // the node holds a copy
}

} // namespace

CudaBatch::CudaBatch(CudaKernelCache& kernels, CudaGemm& gemm, OrderedStream& stream,
                     IndexErrorFlag& index_error, llvm::ArrayRef<BatchItem> items)
    : kernels_(kernels), gemm_(gemm), stream_(stream), index_error_(index_error) {
  for (const BatchItem& it : items) {
    Launch l;
    l.item = it;
    launches_.push_back(std::move(l));
  }
}

CudaBatch::~CudaBatch() {
  for (Instance& in : instances_) destroy(in);
}

void CudaBatch::destroy(Instance& in) {
  if (in.exec) stream_.wait_quietly(); // queued replays may name it (an error stays for a drain)
  if (in.exec) cudaGraphExecDestroy(in.exec); // an exec still in flight is freed when done
  if (in.graph) cudaGraphDestroy(in.graph);
  for (auto& per_launch : in.staging)
    for (Instance::Staging& st : per_launch)
      if (st.buffer) cudaFree(st.buffer); // waits for the device: a replay may still read it
  in.staging.clear();
  in.exec = nullptr;
  in.graph = nullptr;
}

// A new plan's kernels are compiled together (in parallel) before the first launch needs one.
void CudaBatch::prefetch_kernels(llvm::ArrayRef<void*> base) {
  std::vector<std::pair<const FusedKernel*, CudaVariant>> kernels;
  std::vector<const IndexStep*> index_steps;
  for (const Launch& l : launches_) {
    if (const IndexStep* s = l.item.index) {
      if (index_launch(*s, kernels_.target()).grid != 0) index_steps.push_back(s);
    } else if (const FusedKernel* k = l.item.kernel) {
      const CudaVariant v = in_group(l) ? l.variant : choose_variant(*k, base, kernels_.target());
      if (launch_for(*k, v, kernels_.target()).grid != 0) kernels.push_back({k, v});
    }
  }
  kernels_.prefetch(kernels, index_steps);
}

// Variants depend on the alignment of the operands (vector loads), so they are chosen with the
// first run's buffers and kept while later buffers align the same way (pool allocations do).
void CudaBatch::prepare(llvm::ArrayRef<void*> base) {
  standins_ = 0; // (a prepare that threw is started again)
  for (Launch& l : launches_) l.standin = false;
  form_groups(base);
  prefetch_kernels(base);
  std::vector<bool> used(base.size(), false);
  for (Launch& l : launches_) {
    if (const GemmStep* g = l.item.gemm) {
      used[g->a_slot] = used[g->b_slot] = used[g->out_slot] = true;
      continue;
    }
    if (const IndexStep* s = l.item.index) { // one kernel whatever the alignment
      l.shape = index_launch(*s, kernels_.target());
      if (l.shape.grid == 0) continue;
      l.fn = kernels_.get_index(*s);
      l.params = index_param_template(*s, index_error_.device_ptr());
    } else {
      const FusedKernel& k = *l.item.kernel;
      if (!in_group(l)) l.variant = choose_variant(k, base, kernels_.target());
      l.shape = launch_for(k, l.variant, kernels_.target());
      if (l.shape.grid == 0) continue; // empty iteration space
      KernelChoice c = kernels_.choose(k, l.variant);
      l.fn = c.fn;
      if (c.standin) { // until its binary is compiled (swap_in_compiled)
        l.params = std::move(c.standin->params);
        l.shape = c.standin->shape;
        l.standin = true;
        ++standins_;
      } else {
        l.params = param_template(k, l.variant);
      }
    }
    for (const ParamTemplate::Pointer& p : l.params.pointers)
      if (p.slot >= 0) used[p.slot] = true;
  }
  for (size_t i = 0; i < used.size(); ++i)
    if (used[i]) used_slots_.push_back(static_cast<int>(i));
  for (int slot : used_slots_)
    align_.push_back(static_cast<uint8_t>(reinterpret_cast<uintptr_t>(base[slot]) % 16));
  load_merged();
  prepared_ = true;
}

bool CudaBatch::same_alignment(llvm::ArrayRef<void*> base) const {
  for (size_t j = 0; j < used_slots_.size(); ++j)
    if (reinterpret_cast<uintptr_t>(base[used_slots_[j]]) % 16 != align_[j]) return false;
  return true;
}

void CudaBatch::launch_direct(llvm::ArrayRef<void*> base) {
  const cudaStream_t stream = stream_.after_queued(); // after the replays queued before
  for (size_t i = 0; i < launches_.size(); ++i) {
    Launch& l = launches_[i];
    if (const GemmStep* g = l.item.gemm) {
      gemm_.run(*g, base[g->a_slot], base[g->b_slot], base[g->out_slot]);
      continue;
    }
    if (!l.fn || merged(i)) continue;
    if (leads_merged(i)) {
      ParamTemplate::patch_pointers(l.group_params.bytes, l.group_params.pointers, base);
      void* args[] = {l.group_params.bytes.data()};
      launch_kernel(l.group_fn, l.repeat.shape, args, stream);
      continue;
    }
    ParamTemplate::patch_pointers(l.params.bytes, l.params.pointers, base);
    void* args[] = {l.params.bytes.data()};
    launch_kernel(l.fn, l.shape, args, stream);
    if (l.standin) kernels_.count_standin_launch();
  }
}

// KILN_COMPILE=standin keeps them; background takes the binaries that finished (and queues
// one that is neither loaded nor compiling: the batch was prepared in standin mode); sync or 0
// (set since the batch was prepared) compile them now, or fail.
bool CudaBatch::swap_in_compiled() {
  const CompileMode mode = compile_mode();
  if (mode == CompileMode::standin) return false;
  kernels_.collect_background_builds();
  for (Launch& l : launches_) {
    if (!l.standin) continue;
    const FusedKernel& k = *l.item.kernel;
    cudaKernel_t fn = nullptr;
    if (mode != CompileMode::background) {
      fn = kernels_.get(k, l.variant);
    } else if (!(fn = kernels_.find(k, l.variant)) && !kernels_.pending(k, l.variant)) {
      KernelChoice c = kernels_.choose(k, l.variant); // throws a failed compile's error
      if (!c.standin) fn = c.fn;
    }
    if (!fn) continue;
    l.fn = fn;
    l.params = param_template(k, l.variant);
    l.shape = launch_for(k, l.variant, kernels_.target());
    l.standin = false;
    --standins_;
  }
  return standins_ == 0;
}

void CudaBatch::write_constants() {
  for (size_t i = 0; i < launches_.size(); ++i) {
    Launch& l = launches_[i];
    if (l.item.kernel) ParamTemplate::patch_values(l.params.bytes, l.params.values, *l.item.kernel);
    if (leads_merged(i)) patch_group_values(l.group_params.bytes, i);
  }
}

// A replay whose instance holds other constant values than this run's: its kernel nodes take
// the new Params before the launch (queued like any node update).
bool CudaBatch::update_constants(Instance& in, GraphLaunch* queued) {
  bool changed = false;
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& l = launches_[i];
    if (!in.nodes[i] || !l.item.kernel || merged(i)) continue;
    if (leads_merged(i)) {
      if (!patch_group_values(in.args[i], i)) continue;
      set_node(in, in.nodes[i], l.group_fn, l.repeat.shape, in.args[i], queued);
      changed = true;
      continue;
    }
    if (l.params.values.empty()) continue;
    if (!ParamTemplate::patch_values(in.args[i], l.params.values, *l.item.kernel)) continue;
    set_node(in, in.nodes[i], l.fn, l.shape, in.args[i], queued);
    changed = true;
  }
  return changed;
}

// Where a GEMM operand's first element is, in this run's buffers.
const void* CudaBatch::operand_start(const GemmStep& g, int which, llvm::ArrayRef<void*> base) {
  const Layout& l = which == 0 ? g.a : g.b;
  const char* p = static_cast<const char*>(base[which == 0 ? g.a_slot : g.b_slot]);
  return p + l.offset * itemsize(g.dtype);
}

bool CudaBatch::has_gemms() const {
  for (const Launch& l : launches_)
    if (l.item.gemm) return true;
  return false;
}

// The graph's edges follow the launches' data dependencies (launch_order.h): a launch waits
// only for the launches whose results it reads or whose inputs it overwrites, so independent
// work (an RNN's loss at each time step beside the next step's gates) runs side by side. The
// edges are computed from the buffers of the run that builds the instance and kept when an
// update points it at other addresses: which slots share memory is fixed by the plan (outputs
// are new buffers, an input's buffer is taken over in place only where that slot alone reads
// it, and the plan key records which realized inputs share a buffer).
// Programmatic edges (PDL, sm_90+) only on the links of chains (chain_links).
CudaBatch::Instance CudaBatch::build(llvm::ArrayRef<void*> base, llvm::ArrayRef<Buffer*> buffers) {
  // GEMMs are captured on the stream. wait(), not drain(): an error of an earlier launch is
  // not this build's (run() reports it).
  if (has_gemms()) stream_.wait_quietly();
  Instance in;
  in.tf32 = allow_tf32();
  for (int s : used_slots_) in.addresses.push_back(base[s]);
  in.nodes.resize(launches_.size());
  in.args.resize(launches_.size());
  in.staging.resize(launches_.size());
  std::vector<BatchItem> items;
  llvm::SmallVector<bool, 64> launched;
  for (const Launch& l : launches_) {
    items.push_back(l.item);
    launched.push_back(l.item.gemm ? !empty_gemm(*l.item.gemm) : l.fn != nullptr);
  }
  const auto deps = launch_dependencies(items, buffers, launched, !graph_dependencies());
  const auto links = chain_links(deps, items);
  const bool pdl = programmatic_launch() && kernels_.target().arch >= 90;
  cuda_check(cudaGraphCreate(&in.graph, 0), "eval", "cudaGraphCreate");
  try {
    for (size_t i = 0; i < launches_.size(); ++i) {
      if (!launched[i]) continue;
      if (merged(i)) { // later launches that read a member follow the merged launch
        in.nodes[i] = in.nodes[launches_[i].leader];
        continue;
      }
      GraphPredecessors after; // (a GEMM's staging copies take its edges, none programmatic)
      if (leads_merged(i)) {
        after = group_predecessors(in, i, deps, links, pdl);
      } else {
        for (size_t k = 0; k < deps[i].size(); ++k)
          after.add(in.nodes[deps[i][k]], pdl && links[i][k]);
      }
      in.nodes[i] = add_launch(in, i, base, after);
    }
    cuda_check(cudaGraphInstantiate(&in.exec, in.graph, 0), "eval", "cudaGraphInstantiate");
  } catch (...) {
    destroy(in);
    throw;
  }
  return in;
}

cudaGraphNode_t CudaBatch::add_launch(Instance& in, size_t i, llvm::ArrayRef<void*> base,
                                      const GraphPredecessors& after) {
  Launch& l = launches_[i];
  cudaGraphNode_t node = nullptr;
  if (const GemmStep* g = l.item.gemm) {
    // Staged operands: copy nodes first, then the GEMM reads the instance's buffer (passed as
    // a base that the operand's offset brings to the buffer's start).
    const void* operand[2] = {base[g->a_slot], base[g->b_slot]};
    GraphPredecessors gemm_after = after;
    for (int j = 0; j < 2; ++j) {
      if (!l.staged_bytes[j]) continue;
      gemm_after.add(add_copy(in, i, j, base, after), false);
      const Layout& lay = j == 0 ? g->a : g->b;
      operand[j] =
          static_cast<const char*>(in.staging[i][j].buffer) - lay.offset * itemsize(g->dtype);
    }
    add_gemm_node(&node, in.graph, gemm_after,
                  gemm_.capture(*g, operand[0], operand[1], base[g->out_slot]));
    return node;
  }
  const bool group = leads_merged(i);
  ParamTemplate& params = group ? l.group_params : l.params;
  ParamTemplate::patch_pointers(params.bytes, params.pointers, base);
  in.args[i] = params.bytes;
  void* args[] = {in.args[i].data()};
  add_kernel_node(&node, in.graph, after,
                  group ? kernel_node_params(l.repeat.shape, l.group_fn, args)
                        : kernel_node_params(l.shape, l.fn, args),
                  "cudaGraphAddKernelNode");
  return node;
}

void CudaBatch::set_node(Instance& in, cudaGraphNode_t node, cudaKernel_t fn,
                         const CudaLaunch& shape, const std::vector<std::byte>& args,
                         GraphLaunch* queued) {
  if (queued)
    stream_.launches().add_update(*queued, node, fn, shape, args);
  else
    set_kernel_node(in.exec, node, fn, shape, args.data(), "eval");
}

bool CudaBatch::update(Instance& in, llvm::ArrayRef<void*> base, GraphLaunch* queued) {
  bool changed = false;
  const bool tf32 = allow_tf32();
  for (size_t i = 0; i < launches_.size(); ++i) {
    const Launch& l = launches_[i];
    if (!in.nodes[i]) continue;
    if (const GemmStep* g = l.item.gemm) {
      const int slots[3] = {g->a_slot, g->b_slot, g->out_slot};
      bool moved[3] = {false, false, false};
      for (size_t j = 0; j < used_slots_.size(); ++j)
        for (int o = 0; o < 3; ++o)
          if (used_slots_[j] == slots[o]) moved[o] = in.addresses[j] != base[slots[o]];
      bool record = moved[2] || in.tf32 != tf32;
      for (int o = 0; o < 2; ++o) {
        if (!moved[o]) continue;
        Instance::Staging& st = in.staging[i][o];
        if (!st.copy) { // not staged: record the GEMM again, and count the move
          record = true;
          ++launches_[i].moved[o];
          continue;
        }
        changed |= repoint_copy(in, i, o, base, queued);
      }
      if (!record) continue;
      // Captured on the stream, and swapped into an exec that queued launches may name.
      stream_.wait_quietly();
      const void* operand[2] = {base[g->a_slot], base[g->b_slot]};
      for (int o = 0; o < 2; ++o)
        if (in.staging[i][o].buffer)
          operand[o] = static_cast<const char*>(in.staging[i][o].buffer) -
                       (o == 0 ? g->a : g->b).offset * itemsize(g->dtype);
      cudaGraph_t child = gemm_.capture(*g, operand[0], operand[1], base[g->out_slot]);
      cudaError_t e = cudaGraphExecChildGraphNodeSetParams(in.exec, in.nodes[i], child);
      cudaGraphDestroy(child);
      cuda_check(e, "eval", "cudaGraphExecChildGraphNodeSetParams");
      changed = true;
      continue;
    }
    if (merged(i)) continue; // its node is its leader's
    if (leads_merged(i)) {
      if (!ParamTemplate::patch_pointers(in.args[i], l.group_params.pointers, base)) continue;
      set_node(in, in.nodes[i], l.group_fn, l.repeat.shape, in.args[i], queued);
      changed = true;
      continue;
    }
    if (!ParamTemplate::patch_pointers(in.args[i], l.params.pointers, base)) continue;
    set_node(in, in.nodes[i], l.fn, l.shape, in.args[i], queued);
    changed = true;
  }
  in.tf32 = tf32;
  for (size_t j = 0; j < used_slots_.size(); ++j) in.addresses[j] = base[used_slots_[j]];
  return changed;
}

// GEMM operands that moved twice are staged from now on (where they are one span of memory).
bool CudaBatch::stage_moving_operands() {
  bool any = false;
  for (Launch& l : launches_) {
    const GemmStep* g = l.item.gemm;
    if (!g) continue;
    for (int o = 0; o < 2; ++o) {
      if (l.staged_bytes[o] || l.moved[o] < 2) continue;
      l.staged_bytes[o] = operand_span(o == 0 ? g->a : g->b, g->dtype);
      if (l.staged_bytes[o]) prepare_copy(l, o);
      any |= l.staged_bytes[o] > 0;
      l.moved[o] = l.staged_bytes[o] ? 0 : INT32_MIN; // unstageable: stop counting
    }
  }
  return any;
}

// The copy of a staged operand's span: a generated elementwise kernel over its elements, as
// same-sized integers for f32/f64 (bit for bit) and as the type itself for f16/bf16. Element by
// element (no vectors): the operand's address, and so its alignment, changes every step.
void CudaBatch::prepare_copy(Launch& l, int which) {
  const DType t = l.item.gemm->dtype;
  const DType ct = itemsize(t) == 4 ? DType::i32 : itemsize(t) == 8 ? DType::i64 : t;
  const int64_t n = static_cast<int64_t>(l.staged_bytes[which] / itemsize(ct));
  FusedKernel k;
  k.shape = Shape{n};
  KernelInput in;
  in.slot = 0;
  in.dtype = ct;
  in.strides = Shape{1};
  in.cls = IndexClass::contiguous;
  k.inputs.push_back(in);
  TapeInst load;
  load.op = OpCode::load;
  load.dtype = ct;
  load.a = 0;
  k.tape.push_back(load);
  KernelOutput out;
  out.value = 0;
  out.slot = 1;
  out.dtype = ct;
  out.strides = Shape{1};
  k.outputs.push_back(out);
  CudaVariant v;
  v.index32 = n < (int64_t(1) << 30);
  Launch::Copy& c = l.copy[which];
  c.shape = launch_for(k, v, kernels_.target());
  c.fn = kernels_.get(k, v);
  c.params = param_template(k, v);
}

cudaGraphNode_t CudaBatch::add_copy(Instance& in, size_t i, int which, llvm::ArrayRef<void*> base,
                                    const GraphPredecessors& after) {
  const Launch& l = launches_[i];
  Instance::Staging& st = in.staging[i][which];
  cuda_check(cudaMalloc(&st.buffer, l.staged_bytes[which]), "eval",
             "cudaMalloc (GEMM operand staging)");
  void* ends[2] = {const_cast<void*>(operand_start(*l.item.gemm, which, base)), st.buffer};
  st.args = l.copy[which].params.bytes;
  ParamTemplate::patch_pointers(st.args, l.copy[which].params.pointers, ends);
  void* args[] = {st.args.data()};
  add_kernel_node(&st.copy, in.graph, after,
                  kernel_node_params(l.copy[which].shape, l.copy[which].fn, args),
                  "cudaGraphAddKernelNode (GEMM operand staging)");
  return st.copy;
}

bool CudaBatch::repoint_copy(Instance& in, size_t i, int which, llvm::ArrayRef<void*> base,
                             GraphLaunch* queued) {
  const Launch& l = launches_[i];
  Instance::Staging& st = in.staging[i][which];
  void* ends[2] = {const_cast<void*>(operand_start(*l.item.gemm, which, base)), st.buffer};
  if (!ParamTemplate::patch_pointers(st.args, l.copy[which].params.pointers, ends)) return false;
  set_node(in, st.copy, l.copy[which].fn, l.copy[which].shape, st.args, queued);
  return true;
}

// Building an instance costs ~5 us per node once; updating one ~1.5 us per node that moved, at
// every replay that moves it. A batch of many launches of which a few read or write the slots
// that moved (the first and last steps of a loop flush, whose buffers alternate between
// flushes) is updated instead: a flush of 256 loop steps would otherwise instantiate a graph
// of 256 nodes for each new address set (~1.5 ms each, four times).
// Not with GEMMs: an update records a moved GEMM again after waiting for the launch queue, and
// an operand moved twice is staged by a copy kernel, which rebuilds every instance.
bool CudaBatch::cheaper_to_update(llvm::ArrayRef<void*> base) const {
  if (instances_.empty() || has_gemms()) return false;
  const Instance* lru = &instances_[0];
  for (const Instance& x : instances_)
    if (x.last_used < lru->last_used) lru = &x;
  size_t moved = 0;
  for (size_t j = 0; j < used_slots_.size(); ++j)
    moved += lru->addresses[j] != base[used_slots_[j]];
  return 4 * moved <= launches_.size();
}

CudaBatch::Instance* CudaBatch::matching(llvm::ArrayRef<void*> base) {
  const bool tf32 = allow_tf32();
  for (Instance& in : instances_) {
    if (in.tf32 != tf32) continue;
    bool same = true;
    for (size_t j = 0; same && j < used_slots_.size(); ++j)
      same = in.addresses[j] == base[used_slots_[j]];
    if (same) return &in;
  }
  return nullptr;
}

void CudaBatch::fall_back(const Error& e, llvm::ArrayRef<void*> base, Stats& stats) {
  // A graph that cannot be built, updated or launched is no reason to fail the evaluation:
  // this batch launches directly from now on (the error was cleared by cuda_check). Said once,
  // as it costs speed and means something unexpected happened.
  static bool said = false;
  if (!said) std::fprintf(stderr, "kiln: CUDA graph disabled for a batch: %s\n", e.what());
  said = true;
  for (Instance& x : instances_) destroy(x);
  instances_.clear();
  graph_failed_ = true;
  launch_direct(base);
  stats.graph_misses++;
}

void CudaBatch::run(llvm::ArrayRef<Buffer*> buffers, bool graphs, Stats& stats) {
  // A queued launch that failed (of any batch of this backend) may have left an instance
  // without the updates this batch recorded in it: rebuild them. The error is reported before
  // this batch does anything, so that its nodes stay pending (it is about an earlier
  // evaluation).
  if (stream_.launches().failures() != failures_seen_) {
    failures_seen_ = stream_.launches().failures();
    for (Instance& x : instances_) destroy(x);
    instances_.clear();
  }
  stream_.launches().rethrow_error();
  llvm::SmallVector<void*, 16> base;
  for (Buffer* b : buffers) base.push_back(b ? b->data : nullptr);
  if (!prepared_) prepare(base);
  write_constants();
  if (!same_alignment(base)) { // another variant may be needed: the general path decides
    for (const Launch& l : launches_) {
      if (const GemmStep* g = l.item.gemm)
        gemm_.run(*g, base[g->a_slot], base[g->b_slot], base[g->out_slot]);
      else if (const IndexStep* s = l.item.index)
        kernels_.launch_index(*s, base, index_error_.device_ptr(), stream_.after_queued());
      else
        kernels_.launch(*l.item.kernel, base, stream_.after_queued());
    }
    stats.graph_misses++;
    return;
  }
  if (groups_waiting_ > 0 && load_merged()) { // instances hold a node per member: rebuilt
    for (Instance& x : instances_) destroy(x);
    instances_.clear();
  }
  stats.kernels_merged += merged_kernels_;
  if (standins_ > 0 && !swap_in_compiled()) { // no graph of a stand-in: it is short-lived
    launch_direct(base);
    stats.graph_misses++;
    return;
  }
  ++runs_;
  if (!graphs || graph_failed_ || runs_ <= kRunsBeforeGraph) {
    launch_direct(base);
    stats.graph_misses++;
    return;
  }
  const bool queue = LaunchThread::enabled();
  if (!queue)
    stream_.launches().drain(); // just turned off: updates below must not reach queued replays
  GraphLaunch* item = queue ? &stream_.launches().begin() : nullptr;
  Instance* in = nullptr;
  bool updated = false; // an instance's nodes took this run's pointers or constants
  try {
    in = matching(base);
    if (!in && instances_.size() < kMaxInstances && !cheaper_to_update(base)) {
      instances_.push_back(build(base, buffers));
      in = &instances_.back();
      stats.graph_instantiations++;
    } else if (!in) {
      in = &instances_[0];
      for (Instance& x : instances_)
        if (x.last_used < in->last_used) in = &x;
      updated = update(*in, base, item);
      if (stage_moving_operands()) { // rebuilt from the next run on, with the copies
        for (Instance& x : instances_) destroy(x);
        instances_.clear();
        instances_.push_back(build(base, buffers));
        in = &instances_.back();
        stats.graph_instantiations++;
        if (item) item->n_updates = 0; // they named the instance just destroyed
      }
    }
    updated |= update_constants(*in, item);
    if (updated) stats.graph_updates++;
    in->last_used = ++clock_;
    // Queued, or issued here when the launch thread is off or asleep (then a failure throws
    // here, and this batch falls back as for a failed update).
    const bool queued = item ? stream_.launches().push(*item, in->exec) : false;
    if (!item)
      cuda_check(cudaGraphLaunch(in->exec, stream_.after_queued()), "eval", "cudaGraphLaunch");
    stats.graph_replays++;
    if (queued) stats.launches_queued++;
  } catch (const Error& e) {
    fall_back(e, base, stats);
  }
}

} // namespace kiln::detail

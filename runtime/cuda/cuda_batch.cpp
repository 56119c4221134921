#include "runtime/cuda/cuda_batch.h"

#include "runtime/cuda/cuda_check.h"

#include <kiln/engine.h>

#include <cstdio>
#include <cstring>

namespace kiln::detail {

namespace {

bool empty_gemm(const GemmStep& g) {
  const int rank = g.out_shape.size();
  return g.out_shape[rank - 2] == 0 || g.out_shape[rank - 1] == 0;
}

// Write this run's pointers into p; true if any differs from what p held.
bool repoint(ParamTemplate& p, llvm::ArrayRef<void*> base) {
  bool changed = false;
  for (const ParamTemplate::Pointer& f : p.pointers) {
    uintptr_t v = 0;
    if (f.slot >= 0 && static_cast<size_t>(f.slot) < base.size() && base[f.slot])
      v = reinterpret_cast<uintptr_t>(static_cast<const char*>(base[f.slot]) + f.byte_offset);
    if (std::memcmp(p.bytes.data() + f.at, &v, sizeof v) != 0) {
      std::memcpy(p.bytes.data() + f.at, &v, sizeof v);
      changed = true;
    }
  }
  return changed;
}

cudaKernelNodeParams node_params(const CudaLaunch& shape, cudaKernel_t fn, void** args) {
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(fn);
  p.gridDim = dim3(shape.grid);
  p.blockDim = dim3(shape.block);
  p.sharedMemBytes = shape.shared_bytes;
  p.kernelParams = args;
  return p;
}

} // namespace

CudaBatch::CudaBatch(CudaKernelCache& kernels, CudaGemm& gemm, cudaStream_t stream,
                     llvm::ArrayRef<BatchItem> items)
    : kernels_(kernels), gemm_(gemm), stream_(stream) {
  for (const BatchItem& it : items) {
    Launch l;
    l.item = it;
    launches_.push_back(std::move(l));
  }
}

CudaBatch::~CudaBatch() {
  drop_graph();
}

void CudaBatch::drop_graph() {
  if (exec_) cudaGraphExecDestroy(exec_); // an exec still in flight is freed when it completes
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
  for (Launch& l : launches_) l.node = nullptr;
}

// Variants depend on the alignment of the operands (vector loads), so they are chosen with the
// first run's buffers and kept while later buffers align the same way (pool allocations do).
void CudaBatch::prepare(llvm::ArrayRef<void*> base) {
  for (Launch& l : launches_) {
    if (!l.item.kernel) continue;
    const FusedKernel& k = *l.item.kernel;
    l.variant = choose_variant(k, base);
    l.shape = launch_for(k, l.variant, kernels_.target());
    if (l.shape.grid == 0) continue; // empty iteration space
    l.fn = kernels_.get(k, l.variant);
    l.params = param_template(k, l.variant);
  }
  align_.clear();
  for (void* b : base) align_.push_back(static_cast<uint8_t>(reinterpret_cast<uintptr_t>(b) % 16));
  prepared_ = true;
}

bool CudaBatch::same_alignment(llvm::ArrayRef<void*> base) const {
  if (base.size() != align_.size()) return false;
  for (size_t i = 0; i < base.size(); ++i)
    if (reinterpret_cast<uintptr_t>(base[i]) % 16 != align_[i]) return false;
  return true;
}

void CudaBatch::launch_direct(llvm::ArrayRef<void*> base) {
  for (Launch& l : launches_) {
    if (const GemmStep* g = l.item.gemm) {
      gemm_.run(*g, base[g->a_slot], base[g->b_slot], base[g->out_slot]);
      continue;
    }
    if (!l.fn) continue;
    repoint(l.params, base);
    void* args[] = {l.params.bytes.data()};
    cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(l.fn), dim3(l.shape.grid),
                                dim3(l.shape.block), args, l.shape.shared_bytes, stream_),
               "eval", "cudaLaunchKernel");
  }
}

// One node per step, each depending on the one before: steps read what earlier ones wrote.
void CudaBatch::instantiate(llvm::ArrayRef<void*> base) {
  cuda_check(cudaGraphCreate(&graph_, 0), "eval", "cudaGraphCreate");
  cudaGraph_t graph = graph_;
  cudaGraphNode_t prev = nullptr;
  try {
    for (Launch& l : launches_) {
      cudaGraphNode_t node = nullptr;
      size_t ndeps = prev ? 1 : 0;
      if (const GemmStep* g = l.item.gemm) {
        if (empty_gemm(*g)) continue;
        l.gemm_ptrs[0] = base[g->a_slot];
        l.gemm_ptrs[1] = base[g->b_slot];
        l.gemm_ptrs[2] = base[g->out_slot];
        l.tf32 = allow_tf32();
        cudaGraph_t child = gemm_.capture(*g, l.gemm_ptrs[0], l.gemm_ptrs[1], base[g->out_slot]);
        cudaError_t e = cudaGraphAddChildGraphNode(&node, graph, &prev, ndeps, child);
        cudaGraphDestroy(child); // the node holds a copy
        cuda_check(e, "eval", "cudaGraphAddChildGraphNode");
      } else {
        if (!l.fn) continue;
        repoint(l.params, base);
        void* args[] = {l.params.bytes.data()};
        cudaKernelNodeParams p = node_params(l.shape, l.fn, args);
        cuda_check(cudaGraphAddKernelNode(&node, graph, &prev, ndeps, &p), "eval",
                   "cudaGraphAddKernelNode");
      }
      l.node = node;
      prev = node;
    }
    cuda_check(cudaGraphInstantiate(&exec_, graph, 0), "eval", "cudaGraphInstantiate");
  } catch (...) {
    drop_graph();
    throw;
  }
}

bool CudaBatch::update(llvm::ArrayRef<void*> base) {
  bool changed = false;
  const bool tf32 = allow_tf32();
  for (Launch& l : launches_) {
    if (!l.node) continue;
    if (const GemmStep* g = l.item.gemm) {
      const void* now[3] = {base[g->a_slot], base[g->b_slot], base[g->out_slot]};
      if (std::memcmp(now, l.gemm_ptrs, sizeof now) == 0 && l.tf32 == tf32) continue;
      cudaGraph_t child = gemm_.capture(*g, now[0], now[1], base[g->out_slot]);
      cudaError_t e = cudaGraphExecChildGraphNodeSetParams(exec_, l.node, child);
      cudaGraphDestroy(child);
      cuda_check(e, "eval", "cudaGraphExecChildGraphNodeSetParams");
      std::memcpy(l.gemm_ptrs, now, sizeof now);
      l.tf32 = tf32;
      changed = true;
    } else if (repoint(l.params, base)) {
      void* args[] = {l.params.bytes.data()};
      cudaKernelNodeParams p = node_params(l.shape, l.fn, args);
      cuda_check(cudaGraphExecKernelNodeSetParams(exec_, l.node, &p), "eval",
                 "cudaGraphExecKernelNodeSetParams");
      changed = true;
    }
  }
  return changed;
}

void CudaBatch::run(llvm::ArrayRef<Buffer*> buffers, bool graphs, Stats& stats) {
  llvm::SmallVector<void*, 16> base;
  for (Buffer* b : buffers) base.push_back(b ? b->data : nullptr);
  if (!prepared_) prepare(base);
  if (!same_alignment(base)) { // another variant may be needed: the general path decides
    for (const Launch& l : launches_) {
      if (const GemmStep* g = l.item.gemm)
        gemm_.run(*g, base[g->a_slot], base[g->b_slot], base[g->out_slot]);
      else
        kernels_.launch(*l.item.kernel, base, stream_);
    }
    stats.graph_misses++;
    return;
  }
  ++runs_;
  if (!graphs || graph_failed_ || runs_ <= kRunsBeforeGraph) {
    launch_direct(base);
    stats.graph_misses++;
    return;
  }
  try {
    if (!exec_) {
      instantiate(base);
      stats.graph_instantiations++;
    } else if (update(base)) {
      stats.graph_updates++;
    }
  } catch (const Error& e) {
    // A graph that cannot be built or updated is no reason to fail the evaluation: this batch
    // launches directly from now on (the error was cleared by cuda_check). Said once, as it
    // costs speed and means something unexpected happened.
    static bool said = false;
    if (!said) std::fprintf(stderr, "kiln: CUDA graph disabled for a batch: %s\n", e.what());
    said = true;
    drop_graph();
    graph_failed_ = true;
    launch_direct(base);
    stats.graph_misses++;
    return;
  }
  cuda_check(cudaGraphLaunch(exec_, stream_), "eval", "cudaGraphLaunch");
  stats.graph_replays++;
}

} // namespace kiln::detail

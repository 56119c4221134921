#pragma once
// CudaBatch: the GPU steps of a cached plan, prepared once (variant, compiled kernel, launch
// shape and parameter template per kernel) and then run at every repetition of the plan:
// launched one by one the first times, then, once the plan has repeated, replayed as one CUDA
// graph. Each replay writes this run's buffer pointers into the graph's kernel nodes where
// they changed (cudaGraphExecKernelNodeSetParams: later launches only, earlier replays still
// in flight keep theirs), and re-records a GEMM's cuBLAS graph where its operands moved.
#include "runtime/backend.h"
#include "runtime/cuda/cuda_gemm.h"
#include "runtime/cuda/kernel_cache.h"

#include <vector>

namespace kiln::detail {

class CudaBatch final : public StepBatch {
public:
  CudaBatch(CudaKernelCache& kernels, CudaGemm& gemm, cudaStream_t stream,
            llvm::ArrayRef<BatchItem> items);
  ~CudaBatch() override;
  void run(llvm::ArrayRef<Buffer*> buffers, bool graphs, Stats& stats) override;

  /// Direct runs before a batch is replayed as a graph: one-off plans never pay for one.
  static constexpr int kRunsBeforeGraph = 2;

private:
  struct Launch {
    BatchItem item;
    // Kernels.
    CudaVariant variant;
    CudaLaunch shape;
    cudaKernel_t fn = nullptr;
    ParamTemplate params; // bytes as last launched or set in the graph
    // GEMMs: operands as last recorded in the graph.
    const void* gemm_ptrs[3] = {nullptr, nullptr, nullptr};
    bool tf32 = false;
    cudaGraphNode_t node = nullptr; // null: nothing to launch (empty)
  };

  void prepare(llvm::ArrayRef<void*> base);
  bool same_alignment(llvm::ArrayRef<void*> base) const;
  void launch_direct(llvm::ArrayRef<void*> base);
  void instantiate(llvm::ArrayRef<void*> base);
  bool update(llvm::ArrayRef<void*> base); // true if a pointer changed
  void drop_graph();

  CudaKernelCache& kernels_;
  CudaGemm& gemm_;
  cudaStream_t stream_;
  std::vector<Launch> launches_;
  std::vector<uint8_t> align_; // per slot: base address mod 16 when the variants were chosen
  bool prepared_ = false;
  int runs_ = 0;
  bool graph_failed_ = false;   // instantiation or an update failed: launch directly from now on
  cudaGraph_t graph_ = nullptr; // kept while exec_ lives: updates name nodes of this graph
  cudaGraphExec_t exec_ = nullptr;
};

} // namespace kiln::detail

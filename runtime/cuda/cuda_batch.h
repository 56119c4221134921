#pragma once
// CudaBatch: the GPU steps of a cached plan, prepared once (variant, compiled kernel, launch
// shape and parameter template per kernel) and then run at every repetition of the plan:
// launched one by one the first times, then, once the plan has repeated, replayed as a CUDA
// graph.
//
// A graph holds the pointers it was built with. A batch keeps a few graph instances, each for
// the set of buffer addresses it holds, and replays the one whose addresses match this run's:
// a recurrent loop whose state alternates between two buffers (h read by step t+1's GEMM while
// step t+1 writes the new h elsewhere) replays two instances without touching either. When no
// instance matches and the batch holds its maximum, or it has no GEMM and few of its slots moved
// for its number of launches (cheaper_to_update), the least recently used one is updated:
// kernel nodes get the new pointers (cudaGraphExecKernelNodeSetParams, which affects later
// launches only, so a replay in flight keeps its own), and a GEMM whose operands moved is
// recorded again (cuBLAS takes pointers by value) and swapped in
// (cudaGraphExecChildGraphNodeSetParams). Recording a GEMM again costs several microseconds, so
// a GEMM operand seen to move twice (a slice of a sequence at a new row each step) is staged
// instead: instances are rebuilt with a copy that brings the operand into a buffer of the
// instance, the GEMM reads that buffer, and an update only points the copy elsewhere. The copy
// is a generated kernel node, not a memcpy node: repointing a kernel node costs the host almost
// nothing, a memcpy node ~1.4 us per step (tools/graph-costs, measured on the H100).
//
// Replays, with the kernel node updates before them, are issued from the backend's launch thread
// (runtime/cuda/launch_thread.h) unless it is off; anything else that touches the stream or
// the instances first waits for the launches queued so far.
#include "ir/errors.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_gemm.h"
#include "runtime/cuda/index_error.h"
#include "runtime/cuda/kernel_cache.h"
#include "runtime/cuda/ordered_stream.h"

#include <array>
#include <vector>

namespace kiln::detail {

/// The nodes a new graph node follows, and whether each edge is programmatic (only from a
/// kernel node to a kernel node).
struct GraphPredecessors {
  llvm::SmallVector<cudaGraphNode_t, 4> nodes;
  llvm::SmallVector<bool, 4> programmatic;
  void add(cudaGraphNode_t n, bool is_programmatic) {
    nodes.push_back(n);
    programmatic.push_back(is_programmatic);
  }
};

class CudaBatch final : public StepBatch {
public:
  CudaBatch(CudaKernelCache& kernels, CudaGemm& gemm, OrderedStream& stream,
            IndexErrorFlag& index_error, llvm::ArrayRef<BatchItem> items);
  ~CudaBatch() override;
  void run(llvm::ArrayRef<Buffer*> buffers, bool graphs, Stats& stats) override;

  /// Direct runs before a batch is replayed as a graph: one-off plans never pay for one.
  static constexpr int kRunsBeforeGraph = 2;
  /// Graph instances per batch (sets of buffer addresses replayed without an update; a batch
  /// of many launches of which few moved is updated instead, cheaper_to_update).
  static constexpr size_t kMaxInstances = 4;

private:
  struct Launch {
    BatchItem item;
    CudaVariant variant; // kernels
    CudaLaunch shape;
    cudaKernel_t fn = nullptr; // null: nothing to launch (empty)
    ParamTemplate params;      // pointers as last launched directly
    bool standin = false;      // fn is the stand-in interpreter (params and shape are its own)
    // GEMMs: per operand (a, b), how often it moved in an update, and whether instances stage
    // it (bytes > 0: the span of elements the GEMM reads).
    int moved[2] = {0, 0};
    size_t staged_bytes[2] = {0, 0};
    // The staged operands' copy kernels: slot 0 the operand's first element, slot 1 the buffer.
    struct Copy {
      cudaKernel_t fn = nullptr;
      CudaLaunch shape;
      ParamTemplate params;
    };
    Copy copy[2];
    // Merged launches (cuda_batch_groups.cpp): consecutive launches of one small kernel, all
    // in the group's variant. Once the merged kernel is loaded the group's first launch (its
    // leader) runs them all and the others nothing; until then each runs on its own.
    int group = 0;                   // the leader: launches in the group, itself included; else 0
    int leader = -1;                 // a later member: its leader's index
    CudaRepeat repeat;               // the leader: the variant, the merged grid
    cudaKernel_t group_fn = nullptr; // the leader: the merged kernel, once loaded
    bool group_settled = false;      // the leader: its merged kernel loaded, or never will be
    ParamTemplate group_params;      // the leader: the members' Params in order
  };
  struct Instance {
    cudaGraph_t graph = nullptr; // kept while exec lives: updates name nodes of this graph
    cudaGraphExec_t exec = nullptr;
    std::vector<const void*> addresses;       // of used_slots_, as the nodes hold them
    std::vector<cudaGraphNode_t> nodes;       // per launch (null: nothing to launch)
    std::vector<std::vector<std::byte>> args; // per launch: kernel Params as in the node
    struct Staging {
      cudaGraphNode_t copy = nullptr; // a kernel node (Launch::copy)
      void* buffer = nullptr;
      std::vector<std::byte> args; // the copy kernel's Params as in the node
    };
    std::vector<std::array<Staging, 2>> staging; // per launch, per GEMM operand
    bool tf32 = false;                           // GEMMs recorded with TF32 allowed
    uint64_t last_used = 0;
  };

  void prepare(llvm::ArrayRef<void*> base);
  /// Groups the runs of launches that can merge (merge_launches()) and sets their variant.
  void form_groups(llvm::ArrayRef<void*> base);
  /// Asks for the groups' merged kernels not loaded yet; true if one just was (the graph
  /// instances, built with a node per member, are then dropped).
  bool load_merged();
  bool merged(size_t i) const { // launch i runs inside a merged launch it does not lead
    return launches_[i].leader >= 0 && launches_[launches_[i].leader].group_fn;
  }
  static bool in_group(const Launch& l) { return l.group > 0 || l.leader >= 0; }
  bool leads_merged(size_t i) const { return launches_[i].group > 0 && launches_[i].group_fn; }
  /// The members' constants into a leader's merged Params; true if any changed.
  bool patch_group_values(std::vector<std::byte>& params, size_t leader) const;
  /// The predecessors of a merged launch: those of its members outside the group.
  GraphPredecessors group_predecessors(const Instance& in, size_t leader,
                                       llvm::ArrayRef<llvm::SmallVector<int, 4>> deps,
                                       llvm::ArrayRef<llvm::SmallVector<bool, 4>> links,
                                       bool pdl) const;
  /// Replaces stand-ins whose binaries the background compiles finished; true when none is
  /// left (until then the batch launches directly, never as a graph).
  bool swap_in_compiled();
  void prefetch_kernels(llvm::ArrayRef<void*> base);
  bool same_alignment(llvm::ArrayRef<void*> base) const;
  void launch_direct(llvm::ArrayRef<void*> base);
  Instance build(llvm::ArrayRef<void*> base, llvm::ArrayRef<Buffer*> buffers);
  // Launch i's node(s) in `in`, after `after`: its kernel node, or its staging copies and GEMM.
  cudaGraphNode_t add_launch(Instance& in, size_t i, llvm::ArrayRef<void*> base,
                             const GraphPredecessors& after);
  // Point `in` at this run's buffers; true if anything changed. Kernel node updates go into
  // `queued` when the launch thread issues the replay (else they are made at once).
  bool update(Instance& in, llvm::ArrayRef<void*> base, GraphLaunch* queued);
  /// The kernels' current constants into the launches' Params (and, with `in`, into that
  /// instance's nodes); true if an instance node changed.
  void write_constants();
  bool update_constants(Instance& in, GraphLaunch* queued);
  void set_node(Instance& in, cudaGraphNode_t node, cudaKernel_t fn, const CudaLaunch& shape,
                const std::vector<std::byte>& args, GraphLaunch* queued);
  bool has_gemms() const;
  Instance* matching(llvm::ArrayRef<void*> base);
  /// Whether updating the least recently used instance to `base` beats building another: few
  /// of the used slots moved for the number of launches.
  bool cheaper_to_update(llvm::ArrayRef<void*> base) const;
  bool stage_moving_operands();
  void prepare_copy(Launch& l, int which);
  // The copy kernel node of a staged operand: add it to the graph after `after`, or repoint it.
  cudaGraphNode_t add_copy(Instance& in, size_t i, int which, llvm::ArrayRef<void*> base,
                           const GraphPredecessors& after);
  bool repoint_copy(Instance& in, size_t i, int which, llvm::ArrayRef<void*> base,
                    GraphLaunch* queued);
  void destroy(Instance& in); // waits for queued launches (they may name it)
  // A graph could not be built, updated or launched: launch directly from now on.
  void fall_back(const Error& e, llvm::ArrayRef<void*> base, Stats& stats);
  static const void* operand_start(const GemmStep& g, int which, llvm::ArrayRef<void*> base);

  CudaKernelCache& kernels_;
  CudaGemm& gemm_;
  OrderedStream& stream_;
  IndexErrorFlag& index_error_; // where gather/scatter kernels report an index out of range
  std::vector<Launch> launches_;
  std::vector<uint8_t> align_;  // per used slot: address mod 16 when the variants were chosen
  std::vector<int> used_slots_; // slots any launch reads or writes
  bool prepared_ = false;
  int runs_ = 0;
  int standins_ = 0;       // launches running as the stand-in
  int groups_waiting_ = 0; // groups whose merged kernel is not loaded yet
  int merged_kernels_ = 0; // launches inside merged ones, per run (Stats::kernels_merged)
  uint64_t clock_ = 0;
  bool graph_failed_ = false;  // building or updating failed: launch directly from now on
  uint64_t failures_seen_ = 0; // stream_.launches().failures() when last looked
  std::vector<Instance> instances_;
};

} // namespace kiln::detail

#pragma once
// The planner's passes and the data they share (planner.cpp runs them in order).
#include "engine/schedule.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <string>
#include <variant>
#include <vector>

namespace kiln::detail {

// The longest chain of ops one kernel computes: the builder's compute() recurses once per op
// of a chain (a loop recorded without evaluation, `acc = acc * 0.5f + x`, chains two per
// step), and ~7,000 of them overflowed an 8 MB stack. Longer chains are split
// (split_long_chains, and the builder as a safety net).
constexpr size_t kMaxChainDepth = 512;

// The distinct index maps through which one kernel may compute a value in registers. A value
// read through two chains of views that read other elements (x and a transpose of x) is computed
// once for each; in a loop without evaluation whose step reads the last one's value both ways,
// the maps of the values before it double with every step (exponential planning time). Past
// this many, the value is written instead and read from memory.
constexpr int kMaxIndexMaps = 32;

// The Params fields one kernel may have: 8 KB, a quarter of CUDA's 32 KB parameter limit; a
// graph node's parameters are copied at every update, and large kernels compile slowly.
constexpr int64_t kMaxParamFields = 1024;

// The small matmuls (FusedKernel::dots) one kernel may compute. Each takes shared memory in the
// CUDA layouts (the dot layout: a block's partial sums, 256 x 8 bytes; the GEMM tile: a T x T
// tile of sums), and a launch gets 48 KB of static shared memory. A training step's weight
// gradient, the sum over time steps of outer products, has one dot per step.
constexpr size_t kMaxKernelDots = 16;
// kMaxKernelDots, or half as many in reproducible mode, whose double-double partial sums take
// twice the shared memory (kernel_limits.cpp).
size_t max_kernel_dots();
// The segments one segmented kernel may have (FusedKernel::segments): each is a compare in
// every block's dispatch in the CUDA layout.
constexpr size_t kMaxKernelSegments = 32;
/// The Params fields a segment of a segmented kernel takes (codegen/cuda_params.cpp): its size
/// and shape, a pointer and strides per operand, two per constant, its end in the grid. An
/// upper bound, to stay within kMaxParamFields.
int64_t segment_param_fields(const FusedKernel& k);
// The reductions one kernel may compute, in units of 4 KB of shared memory (a column
// reduction's two buffers of 256 partial sums in double; argmax's indices take as much again).
constexpr int kMaxKernelReductions = 8;
// The units reduction n takes: 2 for a sum in double-double (of f64, or any floating sum in
// reproducible mode), whose partial sums are twice as wide, else 1 (kernel_limits.cpp).
int reduction_units(const Node* n);

struct Info {
  Node* n = nullptr;
  llvm::SmallVector<Node*, 2> consumers; // in-plan consumers, one entry per use
  bool materialize = false;
  bool no_merge = false; // must get its own kernel (set when a merge failed)
  Why reason = Why::none;
  int group = -1;
  // Cheap and read by several kernels: each of them recomputes it rather than reading it from
  // memory (a cast or one op of values already in memory).
  bool recompute = false;
  bool counted = false; // recomputed: already listed as fused by one kernel of this build
};

struct Group {
  enum class Kind : uint8_t {
    elementwise,
    reduce,
    gemm,
    concat,
    transfer,
    index // gather, scatter_add (ir/index_step.h)
  } kind = Kind::elementwise;
  Shape shape;              // iteration space
  uint32_t axes = 0;        // reduce: the reduced axes of `shape`
  std::vector<Node*> roots; // nodes this group writes (roots[0] is the primary)
};

/// The builder's request to mark one more node and plan again.
struct Retry {
  Node* node;
  Why reason;
};

/// What the passes know about the pending nodes of one evaluation: an Info per pending node,
/// in creation (= topological) order, and the walk they came from. collect() makes it, the
/// passes after it read and fill it in.
struct PlanGraph {
  explicit PlanGraph(const Walk& w) : walk(&w) {}
  const Walk* walk;
  llvm::DenseMap<Node*, unsigned> index; // pending node -> its Info
  std::vector<Info> infos;

  /// The node's Info; null for a realized node (it is read, never planned).
  Info* info(Node* n) {
    auto it = index.find(n);
    return it == index.end() ? nullptr : &infos[it->second];
  }
  const Info* info(Node* n) const { return const_cast<PlanGraph*>(this)->info(n); }
  Node* node(int walk_index) const { return walk->nodes[walk_index]; }
  /// Mark the node n stands for (a view's root) to be written, unless it is realized or
  /// already marked (the first reason wins).
  void mark(Node* n, Why reason);
};

// The passes, in the order plan() (planner.cpp) runs them, each in a file of its own.

/// The pending nodes the walk's targets need, and their in-plan consumers (mark.cpp).
PlanGraph collect(const Walk& w);
/// Mark the nodes that must be written, each with the reason (mark.cpp).
void mark_all(PlanGraph& pg, llvm::ArrayRef<Node*> targets);
/// Cut chains one kernel cannot hold, before grouping (split_chains.cpp).
void split_long_chains(PlanGraph& pg);
/// Nodes into groups, one step each (grouping.cpp; sibling kernels merge in
/// sibling_fusion.cpp). Sets each Info's group and recompute.
std::vector<Group> group_all(PlanGraph& pg);
/// Every group's step, in dependency order, or the nodes that must be written first, at most one
/// per group (kernel_builder.cpp).
std::variant<Schedule, std::vector<Retry>> build_all(PlanGraph& pg,
                                                     const std::vector<Group>& groups);
/// Launch the elementwise kernels whose outputs no later step reads as one segmented kernel per
/// device (horizontal_fusion.cpp).
void fuse_sink_kernels(Schedule& s);
/// Let elementwise outputs take over input buffers whose last reference dies with this
/// evaluation (buffer_reuse.cpp).
void reuse_buffers(const PlanGraph& pg, Schedule& s);
/// The marks and groups as text, for KILN_DUMP=passes (pass_dump.cpp).
std::string dump_state(const PlanGraph& pg, const std::vector<Group>& groups, const char* pass);

/// Groups of the kernels that consume n, looking through views and recomputed values; whether
/// any consumer reads it through a view (grouping.cpp).
void consumer_groups(const PlanGraph& pg, Node* n, llvm::SmallVectorImpl<int>& out,
                     bool& through_view);
/// Merge the groups `gs` (sibling kernels of one unwritten value) into one if that is safe;
/// the merged group, or -1 (sibling_fusion.cpp).
int merge_siblings(PlanGraph& pg, std::vector<Group>& groups, llvm::ArrayRef<int> gs);

// Which matmuls a kernel computes (small_matmul.cpp).
/// A matmul computed as dot products inside the elementwise kernel that reads it.
bool small_matmul(const Node* n);
/// A small matmul with more rows and columns than a dot per element suits: its kernel must read
/// it at its own (row, column), so that the GEMM-tile layout computes it tile by tile.
bool tiled_matmul(const Node* n);
/// A small matmul of a few columns and more rows: its reader must not see it through a view.
bool few_column_matmul(const Node* n);
/// A small matmul, computed in a kernel: where a kernel cannot compute it (read by a
/// reduction, through a view or a broadcast), in a kernel of its own. Whether a matmul is a
/// GEMM step never depends on its readers, so that lazy and eager give the same bits.
inline bool fused_matmul(const Node* n) {
  return small_matmul(n);
}

} // namespace kiln::detail

#pragma once
// Planner internals shared by planner.cpp (marking, grouping) and kernel_builder.cpp.
#include "engine/schedule.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

// The longest chain of ops one kernel computes: the builder's compute() recurses once per op
// of a chain (a loop recorded without evaluation, `acc = acc * 0.5f + x`, chains two per
// step), and ~7,000 of them overflowed an 8 MB stack. Longer chains are split
// (Planner::split_long_chains, and the builder as a safety net).
constexpr size_t kMaxChainDepth = 512;

// The Params fields one kernel may have: 8 KB, a quarter of CUDA's 32 KB parameter limit; a
// graph node's parameters are copied at every update, and large kernels compile slowly.
constexpr int64_t kMaxParamFields = 1024;

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
    transfer
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

class Planner {
public:
  explicit Planner(const Walk& w) : walk_(w) {}
  void collect();
  void mark_all(llvm::ArrayRef<Node*> targets);
  void split_long_chains();
  void group_all();
  /// Build every group's step; a Retry if a node must be materialized first.
  std::optional<Retry> build_all();
  /// Let elementwise outputs take over input buffers whose last reference dies with this
  /// evaluation (buffer_reuse.cpp). Runs on the schedule of a successful build_all.
  void reuse_buffers();
  /// The schedule built by the last successful build_all (steps in dependency order).
  Schedule take();
  Info* info(Node* n);
  /// A matmul computed as dot products inside the elementwise kernel that reads it.
  static bool small_matmul(const Node* n);
  /// A small matmul with more rows than a dot per element suits: its kernel must read it at
  /// its own (row, column), so that the GEMM-tile layout computes it tile by tile.
  static bool tiled_matmul(const Node* n);
  /// A small matmul, computed in a kernel: where a kernel cannot compute it (read by a
  /// reduction, through a view or a broadcast), in a kernel of its own. Whether a matmul is a
  /// GEMM step never depends on its readers, so that lazy and eager give the same bits.
  bool fused_matmul(Node* n) { return small_matmul(n); }
  /// A reduction that joined group g's kernel (join_consumer_kernel), if any.
  Node* joined_reduction(int g);
  size_t size() const { return infos_.size(); }
  /// The marks and groups as text, for KILN_DUMP=passes (pass_dump.cpp).
  std::string dump_state(const char* pass) const;

  // Used by the kernel builder.
  std::vector<Group> groups_;
  Schedule sched_;
  llvm::DenseMap<Node*, int> slot_of_; // node (root or realized leaf) -> slot
  llvm::DenseMap<Buffer*, int> slot_of_buffer_;
  int slot_for_leaf(Node* n); // realized node or materialized root
  Node* node(int walk_index) const { return walk_.nodes[walk_index]; }
  /// The buffer a slot reads, if it is a realized input.
  Buffer* leaf_buffer(int slot) const;

private:
  void mark(Node* n, Why reason);
  void consumer_groups(Node* n, llvm::SmallVectorImpl<int>& out, bool& through_view);
  int new_group(Node* root);
  bool join_consumer_kernel(Info& in);
  bool cheap_to_recompute(Node* n);
  int merge_siblings(llvm::ArrayRef<int> groups);
  std::optional<Retry> build_group(int g);
  std::optional<Retry> kernel_step(int g);
  Step gemm_step(Node* mm);
  Step integer_matmul(Node* mm);
  Step transfer_step(Node* t);
  void concat_steps(Node* c);

  const Walk& walk_;
  llvm::DenseMap<Node*, unsigned> index_;
  std::vector<Info> infos_;
};

} // namespace kiln::detail

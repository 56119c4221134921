#pragma once
// The schedule under construction (kernel_builder.cpp builds the steps of the groups;
// concat_slices.cpp the concats' slices and copies), and what both files share.
#include "engine/planner_impl.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <optional>
#include <utility>

namespace kiln::detail {

IndexClass classify(const Shape& shape, const Shape& strides);
Origin origin(Node* n);

// The schedule under construction: the slots of the values its steps read and write, and the
// steps, built group by group.
struct StepBuilder {
  StepBuilder(PlanGraph& g, const std::vector<Group>& gs) : pg(g), groups(gs) {}
  PlanGraph& pg;
  const std::vector<Group>& groups;
  Schedule sched;
  llvm::DenseMap<Node*, int> slot_of; // node (root or realized leaf) -> slot
  // Concat pieces written by their own kernel straight into their slice of the concat's buffer
  // (no copy): the written node -> the concat, and the offset (elements) and strides its
  // output takes; and the concat inputs so written (the node itself or a reshape of it).
  struct Slice {
    Node* concat;
    int64_t offset;
    Shape strides;
  };
  llvm::DenseMap<Node*, Slice> slices;
  // Values that keep a buffer of their own (other kernels read them) and are written into
  // concat slices as well, by extra outputs of their kernel: the value -> those slices.
  llvm::DenseMap<Node*, llvm::SmallVector<Slice, 1>> copies;
  llvm::DenseSet<Node*> written_pieces;
  // Per concat: who writes its pieces, where (both kinds above).
  llvm::DenseMap<Node*, std::vector<std::pair<Node*, Slice>>> piece_writers;
  llvm::DenseMap<Node*, int> last_writer; // concat -> the last step that wrote a piece of it

  void plan_slices();
  bool plan_piece(Node* c, Node* x, int64_t offset, const Shape& strides);
  /// Output `v` of step `st` for `root`: its own buffer, or its slice of a concat's.
  KernelOutput output_for(Step& st, Node* root, int v, const Shape& shape, bool reduced);
  /// Output `v` of step `st` into slice s of a concat.
  KernelOutput slice_output(Step& st, Node* root, int v, const Slice& s, bool reduced);

  Info* info(Node* n) { return pg.info(n); }
  Node* node(int walk_index) const { return pg.node(walk_index); }
  int slot_for_leaf(Node* n); // realized node or materialized root
  /// A reduction that joined group g's kernel (grouping.cpp, join_consumer_kernel), if any.
  Node* joined_reduction(int g);
  /// Further nodes to materialize that kernel_step found in a group besides the one it
  /// returned.
  std::vector<Retry> more_retries;
  /// Build group g's step(s); a Retry if a node must be materialized first.
  std::optional<Retry> build_group(int g);
  std::optional<Retry> kernel_step(int g);
  Step gemm_step(Node* mm);
  Step integer_matmul(Node* mm);
  Step transfer_step(Node* t);
  Step index_step(Node* n);
  void concat_steps(Node* c);
};

/// Slot and layout of an operand that is realized or reached through views of a written root.
std::pair<int, Layout> operand(StepBuilder& p, Node* x);
/// Why fusion stopped at an input: it is in memory already, or an earlier step wrote it.
void note_input(StepBuilder& p, Step& st, int slot, Origin what);
/// The values a step writes, each with why it is written.
void note_outputs(StepBuilder& p, Step& st);

} // namespace kiln::detail

#pragma once
// A traced evaluation (kiln::compile, engine/compile.cpp): one evaluation of a function's
// results, kept so that it can run again with other realized inputs without recording the ops
// that led to it. A replay binds the new inputs to the plan's leaf slots, makes a node for each
// value the plan realizes, and runs the cached plan (its batches and CUDA graphs included).
//
// A replay is only as right as its plan, so it runs only where the plan would have been the same
// one: the leaves (realized inputs) must key as they did when traced (leaf_key: dtype, shape,
// strides, storage sharing, and the liveness in-place reuse reads), and nothing the plan reads
// may have changed meaning: random draws (their counters would repeat) and results with gradient
// history are refused when traced. The function is given fresh nodes for its inputs and state
// (engine/compile.cpp), so reads through them are told from reads of the same values through
// other variables, which the trace captures.
#include "engine/plan_cache.h"
#include "engine/plan_key.h"

#include <kiln/tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::detail {

class TracedEval {
public:
  TracedEval() = default;
  TracedEval(const TracedEval&) = delete;
  TracedEval& operator=(const TracedEval&) = delete;
  ~TracedEval(); // releases the captured leaves

  /// Where a leaf or a target comes from at a replay: the caller's node `known[index]`, a view
  /// of one made inside the function (`aliases_[index]`), a node captured when traced
  /// (`captured_[index]`), the plan's value at walk index `index`, or a view of a value the
  /// plan computes (`views_[index]`).
  struct Source {
    enum Kind : uint8_t { known, alias, captured, produced, view } kind = produced;
    int index = 0;
  };

  /// Evaluates `targets` as realize() does, in one plan, and keeps what a replay needs. Leaves
  /// that are among `known` (the caller's inputs) or views of them are taken from the call's
  /// nodes at a replay; others are captured: held, and read by every replay. `held` as for
  /// replay(); a null `known` node stands for none. Returns why the evaluation cannot be replayed
  /// (empty if it can); it was evaluated either way.
  std::string trace(llvm::ArrayRef<Node*> targets, llvm::ArrayRef<Node*> known,
                    llvm::ArrayRef<int> held);

  /// Runs the traced plan with `known` standing in for the nodes trace() was given, and returns
  /// the targets' values (one handle each) in `out`. `held[j]`: uses of known[j] that the caller
  /// holds itself (not readers the plan could see). Returns false, running nothing, when the
  /// nodes would not key alike (leaf_key): the caller evaluates the function instead.
  bool replay(llvm::ArrayRef<Node*> known, llvm::ArrayRef<int> held, std::vector<Tensor>& out);

private:
  struct Produced { // a value the plan realizes: a replay makes a node for it
    int walk = 0;
    OpCode op = OpCode::buffer;
    DType dtype = DType::f32;
    Device device;
    Shape shape;
    int constant = -1; // a constant's value it carries (index into constants_), or -1
    bool kept = true;  // a replay makes a node for it (else: unbound_node(), executor.h)
  };
  struct Alias { // a realized view of a known node (its buffer), made by the function
    int known = 0;
    Layout layout;            // over the known node's buffer, when traced
    int64_t known_offset = 0; // the known node's offset then
    DType dtype = DType::f32;
    Device device;
    const Node* traced = nullptr; // the node it stands for; valid during trace() only
  };
  struct View {    // a result that is a view: an alias of its root's storage after the run
    int root = 0;  // walk index of the value whose storage it reads
    Layout layout; // over that storage, when traced
    int64_t root_offset = 0; // the root's offset in its buffer when traced
    DType dtype = DType::f32;
    Device device;
  };
  struct Constant { // a constant whose value the plan's kernels read (Schedule::constants)
    int walk = 0;
    std::unique_ptr<Node> value; // never published: holds the value only
  };
  std::string plan_traced(llvm::ArrayRef<Node*> pending, llvm::ArrayRef<Node*> known,
                          llvm::ArrayRef<int> held);
  void describe(const Walk& w, llvm::ArrayRef<Node*> known, llvm::ArrayRef<int> held);
  Source source_of(Node* n, llvm::ArrayRef<Node*> known); // a realized node: known or captured
  Node* leaf_node(const Source& s, llvm::ArrayRef<Node*> known) const; // known or captured
  Node* make_alias(const Alias& a, llvm::ArrayRef<Node*> known) const;
  Tensor result(const Source& s, llvm::ArrayRef<Node*> nodes, llvm::ArrayRef<Node*> known) const;

  std::shared_ptr<CachedPlan> plan_; // null: every target was realized already
  size_t walk_size_ = 0;
  std::vector<int> leaves_;          // walk indices of the realized nodes
  std::vector<Source> leaf_sources_; // per leaf
  std::vector<uint64_t> leaf_key_;   // leaf_key() of the leaves when planned
  std::vector<Produced> produced_;
  std::vector<Constant> constants_;
  std::vector<Source> targets_;
  std::vector<bool> target_requires_grad_; // per target: marked as a leaf to differentiate
  std::vector<View> views_;
  std::vector<Alias> aliases_;
  std::vector<Node*> captured_; // one handle each
};

} // namespace kiln::detail

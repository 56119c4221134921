#pragma once
// Node: one value of the lazy graph. A Tensor is a handle to a Node.
//
// Two counts drive liveness (DESIGN.md, "Refcount-driven liveness"):
//   handles: user Tensor objects referring to the node;
//   uses:    pending nodes consuming it (and plans running it).
// A node with neither is destroyed; if it was still pending its work never runs.
#include "ir/layout.h"
#include "ir/ops_table.h"
#include "runtime/backend.h"

#include <kiln/device.h>
#include <kiln/dtype.h>

#include <llvm/ADT/SmallVector.h>

#include <bit>
#include <cstddef>
#include <cstdint>

namespace kiln::detail {

struct GradRecord;                    // engine/autograd.h
void free_grad_record(GradRecord* r); // engine/autograd.h

/// What an op node carries besides its op, inputs, dtype, device and shape (meaning depends on
/// the op). Attributes an op does not use are zero on every node of that op, so comparing all
/// of them is exact.
struct NodeAttrs {
  double scalar = 0;    // constant value; iota start
  int64_t iscalar = 0;  // constant value for integer dtypes (exact beyond 2^53)
  double scalar2 = 0;   // iota step
  uint64_t seed = 0;    // rand: Philox key
  uint64_t counter = 0; // rand: first counter
  ViewPrim view;        // view (its layout, derived from its input's, is Node::layout)
  uint32_t axes = 0;    // reduce: bitmask over input dims
  bool keepdim = false; // reduce
  int dim = 0;          // concat, gather, scatter_add
  bool select = false;  // gather: recorded by index_select (its errors name that op)

  /// Every attribute as 64-bit words, in one fixed order, and for a view its layout. CSE's
  /// comparison and hash and the plan key all read attributes through this one list, so an
  /// attribute added above and here reaches all three. Without `constant_values` a constant's
  /// value reads as 0: the plan key leaves it out, as the executor writes the values of each
  /// run into the plan's kernels (Schedule::constants).
  template <class Put>
  void visit_attrs(OpCode op, const Layout& layout, Put&& put, bool constant_values = true) const {
    const bool value = constant_values || op != OpCode::constant;
    put(value ? std::bit_cast<uint64_t>(scalar) : 0); // bitwise: 0.0 and -0.0 differ
    put(value ? static_cast<uint64_t>(iscalar) : 0);
    put(std::bit_cast<uint64_t>(scalar2));
    put(seed);
    put(counter);
    put(axes | static_cast<uint64_t>(static_cast<uint32_t>(dim)) << 32 |
        static_cast<uint64_t>(select) << 62 | static_cast<uint64_t>(keepdim) << 63);
    if (op != OpCode::view) return;
    put(static_cast<uint64_t>(view.kind) | static_cast<uint64_t>(view.shape.size()) << 8 |
        static_cast<uint64_t>(static_cast<uint32_t>(view.dim)) << 32);
    for (int64_t d : view.shape) put(static_cast<uint64_t>(d));
    put(static_cast<uint64_t>(view.start));
    put(static_cast<uint64_t>(view.step));
    put(static_cast<uint64_t>(view.length));
    for (int64_t d : layout.strides) put(static_cast<uint64_t>(d));
    put(static_cast<uint64_t>(layout.offset));
  }
};

/// Whether nodes of `op` may carry attributes: elementwise computations, matmuls and transfers
/// have none, so theirs are all zero (NodeAttrs) and need not be read. The plan key leaves them
/// out for these ops (plan_key.cpp): an attribute given to one of them must change this first.
inline bool has_attrs(OpCode op) {
  const OpKind k = op_kind(op);
  return k == OpKind::Source || !(is_elementwise(k) || k == OpKind::Gemm || k == OpKind::Transfer);
}

struct Node : NodeAttrs {
  // The fields every pass over the pending graph reads (a flush's cut, the plan key's walk,
  // destroying the nodes after it) come first, in three cache lines: a loop's flush walks
  // hundreds of nodes that later recording pushed out of the host's caches.
  OpCode op = OpCode::buffer;
  DType dtype = DType::f32;
  Device device;
  uint32_t handles = 0;
  uint32_t uses = 0;
  // A pending node recorded in a confirmed loop: the number that stands for its static words
  // (op, dtype, device, shape, attributes) when a flush's walk compares it with the last plan,
  // interned (engine/plan_key.h, static_words_token); 0: the walk spells the words out.
  uint32_t key_token = 0;
  uint64_t id = 0;                    // creation order; inputs always have smaller ids
  llvm::SmallVector<Node*, 3> inputs; // pending nodes only; each holds one use
  BufferRef buffer;                   // set once realized

  // Scratch of the evaluation being planned (engine/plan_key.cpp): the node's position in the
  // walk of the pending graph, valid while walk_stamp is the current walk's. kiln::grad's walk
  // of a history marks the nodes it has seen with a stamp of its own (next_walk_stamp).
  uint64_t walk_stamp = 0; // 64 bits: a 32-bit stamp would wrap within hours of small steps
  uint32_t walk_index = 0;
  uint32_t walk_uses = 0; // the plan key's walk: its nodes that read this one (edges)

  Node* prev_pending = nullptr; // intrusive list of pending nodes
  Node* next_pending = nullptr;

  bool internal = false; // an op's own operand (cast, scalar): its handle is not the user's
  bool fused = false;    // computed in registers by a kernel that ran (not "dropped")

  // Common subexpression elimination (engine/cse.cpp).
  bool in_cse = false;    // in the table of pending nodes that identical ops are answered from
  bool duplicate = false; // an op's constant operand whose op was merged with an identical one:
                          // an equal constant is computed there, so it is not "dropped"
  unsigned cse_hash = 0;  // structural hash, set when the node is published
  // Autodiff's history of this node (below); read here by every node's destructor.
  GradRecord* grad_record = nullptr;

  // Realized: where the elements are in `buffer`. Pending: where they will be (contiguous for
  // computed values; a view's layout is relative to its root's contiguous layout).
  Layout layout;

  // Autodiff (engine/autograd.h). A node requires grad when the user marked it (a leaf) or an
  // op recorded it from an input that does: then `grad_record` holds its history until
  // kiln::grad consumes it (`grad_freed`). `distinct` nodes are never merged by CSE: a
  // detach() alias has grad flags of its own.
  bool requires_grad = false;
  bool grad_freed = false;
  bool distinct = false;
  uint32_t grad_slot = 0; // kiln::grad's scratch: the node's position in its walk of a history

  // What the op was, for finding loops in the stream of the user's ops (engine/loop_detect.h);
  // 0 for values no user op recorded (buffers the user made, an op's own constants). Kept once
  // realized.
  uint64_t loop_kind = 0;

  bool realized() const { return buffer != nullptr; }
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Inline: a flush destroys every node it ran, and a call per node was ~40 instructions.
  ~Node() {
    if (grad_record) free_grad_record(grad_record);
  }

  // Nodes come from a free list of freed nodes (node_pool.cpp): a loop of small steps creates
  // and frees a node per op call, and malloc + free was ~0.05 us of each.
  static void* operator new(std::size_t bytes);
  static void operator delete(void* p, std::size_t bytes) noexcept;
  const Shape& shape() const { return layout.shape; }
  int64_t numel() const { return layout.shape.numel(); }
  int64_t nbytes() const { return numel() * itemsize(dtype); }
};

/// The node whose storage a view chain reads (the node itself if it is not a pending view).
inline Node* view_root(Node* n) {
  while (!n->realized() && n->op == OpCode::view) n = n->inputs[0];
  return n;
}

} // namespace kiln::detail

#pragma once
// Reverse-mode autodiff over the lazy graph (docs/autograd.md).
//
// An op whose input requires grad records a GradRecord on its output node: the op, its
// attributes and handles to the inputs its gradient rule reads. The engine's own `inputs` are
// dropped when a node is realized, so the record is what keeps the history. kiln::grad walks the
// records from the output and records the backward ops as ordinary lazy ops (under no-grad),
// which the planner fuses with the forward ops still pending; then it frees the records, so the
// saved values are no longer held and may stay in registers.
#include "engine/node.h"

#include <kiln/tensor.h>

#include <llvm/ADT/ArrayRef.h>

#include <llvm/ADT/SmallVector.h>
#include <optional>
#include <utility>

namespace kiln::detail {

/// What a gradient rule knows about one input of the op.
struct GradInput {
  Tensor value; // held when the input requires grad or the rule reads its value; for a
                // scalar operand only while a rule runs (restore_scalar_operands)
  Shape shape;  // always known, for unbroadcasting and zero fills
  DType dtype{};
  Device device;
  bool requires_grad = false;
  bool scalar_operand = false; // an op's own scalar (x * 2, maximum(x, 0), clamp bounds),
                               // kept as its value: a held pending constant would stay pending
  double scalar = 0;
  int64_t iscalar = 0;
};

struct GradRecord {
  GradRecord();
  ~GradRecord();
  GradRecord(const GradRecord&) = delete;
  GradRecord& operator=(const GradRecord&) = delete;
  // From a free list (autograd_record.cpp): a training step makes and frees one per op call
  // that records history (~1,800 per step of an LSTM over 64 steps).
  static void* operator new(std::size_t bytes);
  static void operator delete(void* p, std::size_t bytes) noexcept;
  static inline int64_t live = 0;      // records alive now (live_grad_records)
  static inline int64_t recording = 0; // of those, made since the last evaluation
  static inline uint64_t evaluations = 0;
  static inline int backward_passes = 0; // grad() calls under way (BackwardRecording)
  uint64_t made_after = evaluations;     // the evaluations done when the record was made
  OpCode op{};
  NodeAttrs attrs; // the node's attributes at record time (a realized node forgets its op)
  llvm::SmallVector<GradInput, 3> inputs;
};

/// Gradient records alive now, whatever their nodes' state.
inline int64_t live_grad_records() {
  return GradRecord::live;
}
/// Whether a gradient history is being recorded: records were made since the last evaluation
/// (a training step's forward) or grad() is recording a backward pass. While it is, no early
/// flush cuts the step and the loop detector rests. A history kept from before the last
/// evaluation (a loss held with its record, a graph retained for a second grad()) does neither.
/// Inline: every recorded op asks.
inline bool history_recording() {
  return GradRecord::recording > 0 || GradRecord::backward_passes > 0;
}
/// An evaluation ran: the records made so far belong to computed work.
inline void note_history_evaluated() {
  ++GradRecord::evaluations;
  GradRecord::recording = 0;
}

/// While grad() records a backward pass, it counts as a history being recorded.
struct BackwardRecording {
  BackwardRecording() { ++GradRecord::backward_passes; }
  ~BackwardRecording() { --GradRecord::backward_passes; }
  BackwardRecording(const BackwardRecording&) = delete;
  BackwardRecording& operator=(const BackwardRecording&) = delete;
};

/// Whether ops record gradient history now (false inside a NoGradGuard).
bool grad_enabled();
void set_grad_enabled(bool on);

/// Whether an op `op` with output dtype `out`, some input of which requires grad, records a
/// GradRecord (grad mode, a floating output, a differentiable op).
bool records_grad(OpCode op, DType out);
/// Whether an op `op` with output dtype `out` over `inputs` records a GradRecord. Inline: every
/// recorded op asks, and most have no input that requires grad.
inline bool wants_grad_record(OpCode op, DType out, llvm::ArrayRef<Node*> inputs) {
  for (const Node* in : inputs)
    if (in->requires_grad) return records_grad(op, out);
  return false;
}
/// Attach a GradRecord for `op` over `inputs` to the published node `out`; marks it as
/// requiring grad. Realized views record explicitly (their node has no inputs to read).
void record_grad(Node* out, OpCode op, const NodeAttrs& attrs, llvm::ArrayRef<Node*> inputs);
/// Free a node's record. Records hold handles, so freeing one may free others: the work is
/// queued and drained iteratively, never recursing once per node of a long history.
void free_grad_record(GradRecord* r);

/// Recreate the scalar operands of `r` as constants for a rule to read / drop them again.
void restore_scalar_operands(GradRecord& r);
void drop_scalar_operands(GradRecord& r);

/// The gradient of `slice` view `p` of an input of shape `in`, given the slice's gradient g:
/// g at the sliced positions, zeros elsewhere.
Tensor slice_backward(const Tensor& g, const Shape& in, const ViewPrim& p);

/// Whether a matmul operand is the 2-D transpose of a value that requires grad (its record a
/// permute [1, 0]): nn::Linear's `x @ W^T`.
bool transposed_matrix(const GradInput& in);
/// The node that receives the gradient backward_rule gives input i of r: the input itself, or
/// for a transposed matmul operand the matrix before the transpose (matmul's rule gives that
/// matrix's gradient directly).
Node* gradient_target(const GradRecord& r, size_t i);

/// The gradients of an op's inputs given the gradient `g` of its output `out` (entries of
/// inputs that do not require grad stay undefined, as do those in the bit mask `skip`). Records
/// the backward ops; call under no-grad.
llvm::SmallVector<Tensor, 3> backward_rule(const GradRecord& r, const Tensor& out, const Tensor& g,
                                           unsigned skip = 0);

/// A 2-D matmul's contribution to its right operand's gradient as factors: P^T Q (P and Q with
/// the batch rows first), or nothing when the operands are not 2-D.
std::optional<std::pair<Tensor, Tensor>> weight_gradient_factors(const GradRecord& r,
                                                                 const Tensor& g);

} // namespace kiln::detail

#pragma once
// Recording a confirmed loop's op calls from a template. The op call at a position of the loop's
// body compares its operands with what the same position recorded in an earlier body; where
// they are alike it makes the node that body's call made, without the front-end's type and
// shape inference, the kind hash, and publish's CSE and gradient checks. In a loop of small
// steps that inference is most of the host's cost of recording an op (docs/architecture.md,
// "Loop templates").
//
// An entry is a pure function of what it compares: the call's form and op, each operand's dtype,
// device and shape (a matmul's strides too; a view's whole layout and its primitive), a
// scalar's kind. Alike arguments make the node the front-end would make, whatever the loop does
// next; the body position only picks the entry to try, so a loop that changes costs a miss, never a
// wrong node.
#include "engine/graph.h"
#include "engine/node.h"

#include <kiln/ops.h>
#include <kiln/tensor.h>

namespace kiln::detail {

/// How a front-end turns its operands into a node: the forms a template entry can replay.
enum class CallForm : uint8_t {
  none,
  binary,          // op(a, b), no casts
  scalar,          // op(a, constant of the scalar)
  scalar_reversed, // op(constant of the scalar, a)
  unary,           // op(a), no cast
  matmul,          // matmul(a, b) of two matrices, read in place
  view,            // a view of a pending a
};

/// One op call as its front-end sees it, before inference.
struct LoopCall {
  CallForm form = CallForm::none;
  OpCode op = OpCode::buffer; // the op the front-end was asked for
  Node* a = nullptr;
  Node* b = nullptr;              // binary and matmul
  Scalar scalar = 0.0;            // scalar forms
  const char* name = nullptr;     // scalar forms: the op named by a scalar's error
  const ViewPrim* prim = nullptr; // view
  // Set by from_template while a loop is confirmed: the loop position the call's node will be
  // noted at, and the first node id the call may make.
  int64_t position = -1;
  uint64_t first_id = 0;
};

/// The call's node made from the template's entry, or an undefined tensor: the front-end then
/// records it and hands it to learned(). Inline up to the loop check: code outside a confirmed
/// loop (a training step) pays a load and a compare per op call.
Tensor make_from_template(LoopCall& c);
inline Tensor from_template(LoopCall& c) {
  const EngineState& e = engine();
  if (e.loop.period() == 0 || !e.loop_template) return {};
  return make_from_template(c);
}
/// `made`, which the front-end recorded for `c`, becomes the template's entry at c's position
/// if it is a node an entry can make (one fresh pending node of c's operands, no casts, no
/// gradient history).
void learn(const LoopCall& c, const Node* made);
inline void learned(const LoopCall& c, const Tensor& made) {
  if (c.position >= 0) learn(c, made.node());
}
/// Forget every entry (tests; KILN_LOOP_TEMPLATE switched at run time).
void clear_loop_template();

} // namespace kiln::detail

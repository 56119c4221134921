#include "engine/loop_template.h"

#include "engine/cse.h"
#include "engine/graph.h"
#include "engine/ops_common.h"
#include "engine/plan_key.h"

#include <vector>

namespace kiln::detail {

namespace {

// What one position of the body recorded: the arguments compared and the node they made.
struct TemplateOp {
  CallForm form = CallForm::none;
  OpCode call_op = OpCode::buffer; // the front-end's op
  OpCode op = OpCode::buffer;      // the node's (a boolean add is logical_or)
  DType dtype = DType::f32;
  Device device;
  Layout layout;
  ViewPrim prim; // view
  uint64_t kind = 0;
  int64_t counted_bytes = 0; // what the pending bytes count for the node (graph.cpp, counted)
  DType operand_dtype[2] = {};
  Layout operand[2]; // compared as alike_layouts says
  Scalar::Kind scalar_kind{};
  DType constant_dtype = DType::f32; // scalar forms: the constant's
  // cse_kind_merged(kind), as of cse_merged_kinds_version() == merged_version (0: not asked).
  bool merged = false;
  uint64_t merged_version = 0;
  uint32_t key_token = 0; // the node's (static_words_token)
};

// By loop position modulo the period. At namespace scope: a function's static costs a guard
// check on every op call.
std::vector<TemplateOp> the_template;

// Whether operand layouts `a` and `b` make the same node for form `f`: elementwise ops read
// the shape; a matmul also the strides (whether it reads the matrix in place); a view also the
// offset (its own layout is relative to it). A matmul of a row slice at a new offset each step
// (a sequence's x[t]) is alike.
bool alike_layouts(CallForm f, const Layout& a, const Layout& b) {
  if (a.shape != b.shape) return false;
  if (f == CallForm::matmul) return a.strides == b.strides;
  return f != CallForm::view || (a.strides == b.strides && a.offset == b.offset);
}

bool operand_alike(const TemplateOp& t, int i, const Node* n) {
  if (n->dtype != t.operand_dtype[i] || n->device != t.device || n->requires_grad) return false;
  return alike_layouts(t.form, n->layout, t.operand[i]);
}

bool same_prim(const ViewPrim& a, const ViewPrim& b) {
  return a.kind == b.kind && a.shape == b.shape && a.dim == b.dim && a.start == b.start &&
         a.step == b.step && a.length == b.length;
}

bool two_operands(CallForm f) {
  return f == CallForm::binary || f == CallForm::matmul;
}

bool alike(const TemplateOp& t, const LoopCall& c) {
  if (t.form != c.form || t.call_op != c.op || !operand_alike(t, 0, c.a)) return false;
  switch (c.form) {
  case CallForm::binary:
  case CallForm::matmul:
    return operand_alike(t, 1, c.b);
  case CallForm::scalar:
  case CallForm::scalar_reversed:
    return c.scalar.kind == t.scalar_kind;
  case CallForm::view:
    return !c.a->realized() && same_prim(*c.prim, t.prim);
  default:
    return true;
  }
}

// Whether ops of t's kind merged (cse_kind_merged), asked again only when the merged kinds
// changed: a lookup in the set of merged kinds was ~50 instructions of every call a template
// made (publishes_as_known).
bool kind_merged(TemplateOp& t) {
  const uint64_t version = cse_merged_kinds_version();
  if (t.merged_version != version) {
    t.merged = cse_kind_merged(t.kind);
    t.merged_version = version;
  }
  return t.merged;
}

// The node's inputs, in the order the front-end adds them.
void add_inputs(Node* n, const LoopCall& c, Node* constant) {
  if (c.form == CallForm::scalar_reversed) add_input(n, constant);
  add_input(n, c.a);
  if (c.form == CallForm::scalar) add_input(n, constant);
  if (two_operands(c.form)) add_input(n, c.b);
}

// Whether `n` is what an entry makes for `c`: its inputs are c's operands (no casts), and for a
// scalar form an internal constant.
bool made_of_operands(const LoopCall& c, const Node* n) {
  const size_t want = c.form == CallForm::unary || c.form == CallForm::view ? 1 : 2;
  if (n->inputs.size() != want) return false;
  const bool reversed = c.form == CallForm::scalar_reversed;
  if (n->inputs[reversed ? 1 : 0] != c.a) return false;
  if (two_operands(c.form)) return n->inputs[1] == c.b;
  if (want == 1) return true;
  const Node* k = n->inputs[reversed ? 0 : 1];
  return k->op == OpCode::constant && k->internal;
}

} // namespace

Tensor make_from_template(LoopCall& c) {
  EngineState& e = engine();
  const int64_t period = e.loop.period();
  std::vector<TemplateOp>& ops = the_template;
  if (ops.size() != static_cast<size_t>(period)) ops.assign(static_cast<size_t>(period), {});
  c.position = e.loop.position() + 1;
  c.first_id = e.next_id;
  TemplateOp& t = ops[static_cast<size_t>(c.position % period)];
  // publishes_as_known(e, t.kind), with the entry's answer for its kind.
  if (!alike(t, c) || !skips_cse_in_loop(e) || kind_merged(t)) return {};
  // The constant first, as the front-end makes it: its value may be refused.
  Tensor constant;
  if (c.form == CallForm::scalar || c.form == CallForm::scalar_reversed)
    constant = scalar_tensor(c.name, c.scalar, t.constant_dtype, t.device);
  Node* n = new Node;
  n->op = t.op;
  n->dtype = t.dtype;
  n->device = t.device;
  n->layout = t.layout;
  n->key_token = e.key_tokens ? t.key_token : 0;
  if (c.form == CallForm::view) n->view = t.prim;
  add_inputs(n, c, constant.node());
  return publish_known(n, t.kind, t.counted_bytes);
}

void learn(const LoopCall& c, const Node* n) {
  const EngineState& e = engine();
  // One fresh node noted at the call's position; not a CSE merge's older node.
  if (e.loop.position() != c.position || n->id < c.first_id || n->realized() || n->internal ||
      n->grad_record || n->requires_grad || !made_of_operands(c, n))
    return;
  std::vector<TemplateOp>& ops = the_template;
  if (ops.empty()) return;
  TemplateOp& t = ops[static_cast<size_t>(c.position) % ops.size()];
  t.form = c.form;
  t.call_op = c.op;
  t.op = n->op;
  t.dtype = n->dtype;
  t.device = n->device;
  t.layout = n->layout;
  t.kind = n->loop_kind;
  t.key_token = n->key_token != 0 ? n->key_token : static_words_token(n, n->loop_kind);
  t.merged_version = 0;
  t.counted_bytes = n->op == OpCode::view ? 0 : n->nbytes();
  t.operand_dtype[0] = c.a->dtype;
  t.operand[0] = c.a->layout;
  if (c.b) t.operand_dtype[1] = c.b->dtype, t.operand[1] = c.b->layout;
  if (c.prim) t.prim = *c.prim;
  if (c.form == CallForm::scalar || c.form == CallForm::scalar_reversed) {
    t.scalar_kind = c.scalar.kind;
    t.constant_dtype = n->inputs[c.form == CallForm::scalar ? 1 : 0]->dtype;
  }
}

void clear_loop_template() {
  the_template.clear();
}

} // namespace kiln::detail

// Recording gradient history at op time, and freeing it without recursion.
#include "engine/autograd.h"
#include "engine/graph.h"
#include "runtime/free_list.h"

#include <vector>

namespace kiln::detail {

namespace {

bool differentiable(OpCode op) {
  switch (op_kind(op)) {
  case OpKind::Unary:
  case OpKind::UnaryFloat:
  case OpKind::Cast:
  case OpKind::Binary:
  case OpKind::Ternary:
  case OpKind::View:
  case OpKind::Gemm:
  case OpKind::Concat:
  case OpKind::Transfer:
  case OpKind::Index: // with respect to x and src; the index has no gradient
    return true;
  case OpKind::Reduce:
    return op != OpCode::argmax;
  default:
    return false;
  }
}

// Whether the gradient rule of `op` reads the value of input `i` (not only its shape).
bool rule_reads(OpCode op, size_t i) {
  switch (op) {
  case OpCode::mul:
  case OpCode::div:
  case OpCode::pow:
  case OpCode::maximum:
  case OpCode::minimum:
  case OpCode::matmul:
    return true;
  case OpCode::gather: // the index
  case OpCode::scatter_add:
    return i == 1;
  case OpCode::where: // the condition
  case OpCode::abs:
  case OpCode::relu:
  case OpCode::log:
  case OpCode::log1p:
  case OpCode::sin:
  case OpCode::cos:
  case OpCode::gelu:
  case OpCode::max:
  case OpCode::min:
    return i == 0;
  default:
    return false;
  }
}

bool& grad_mode() {
  static bool enabled = true; // one thread uses kiln at a time (tensor.h)
  return enabled;
}

} // namespace

namespace {

constinit FreeList<sizeof(GradRecord), 4096> free_records;

} // namespace

void* GradRecord::operator new(std::size_t bytes) {
  return free_records.allocate(bytes);
}

void GradRecord::operator delete(void* p, std::size_t bytes) noexcept {
  free_records.release(p, bytes);
}

GradRecord::GradRecord() {
  ++live;
  ++recording;
}
GradRecord::~GradRecord() {
  if (made_after == evaluations) --recording;
  --live;
}

bool grad_enabled() {
  return grad_mode();
}

void set_grad_enabled(bool on) {
  grad_mode() = on;
}

bool records_grad(OpCode op, DType out) {
  return grad_mode() && is_floating(out) && differentiable(op);
}

void record_grad(Node* out, OpCode op, const NodeAttrs& attrs, llvm::ArrayRef<Node*> inputs) {
  auto* r = new GradRecord;
  r->op = op;
  r->attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Node* in = inputs[i];
    GradInput& gi = r->inputs.emplace_back();
    gi.shape = in->shape();
    gi.dtype = in->dtype;
    gi.device = in->device;
    gi.requires_grad = in->requires_grad;
    gi.scalar_operand = in->internal && in->op == OpCode::constant && !in->realized();
    if (gi.scalar_operand) {
      gi.scalar = in->scalar;
      gi.iscalar = in->iscalar;
    } else if (gi.requires_grad || rule_reads(op, i)) {
      // Held, an op's own operand (a promotion cast) becomes a value in its own right: a held
      // value that no flush computed would stay pending, pinning its inputs.
      if (in->internal) expose(in);
      retain_handle(in);
      gi.value = Tensor(in);
    }
  }
  out->grad_record = r;
  out->requires_grad = true;
}

void restore_scalar_operands(GradRecord& r) {
  for (GradInput& in : r.inputs) {
    if (!in.scalar_operand) continue;
    Node* c = new_node(OpCode::constant, in.dtype, in.device, in.shape);
    c->scalar = in.scalar;
    c->iscalar = in.iscalar;
    in.value = publish(c, /*internal=*/true);
  }
}

void drop_scalar_operands(GradRecord& r) {
  for (GradInput& in : r.inputs)
    if (in.scalar_operand) in.value = Tensor();
}

void free_grad_record(GradRecord* r) {
  // Never destroyed, like the node pool: tensors freed during static destruction still drain.
  static auto& queue = *new std::vector<GradRecord*>;
  static bool draining = false;
  queue.push_back(r);
  if (draining) return; // an outer call is draining: it deletes r too
  draining = true;
  while (!queue.empty()) {
    GradRecord* next = queue.back();
    queue.pop_back();
    delete next; // releases input handles, which may queue more records
  }
  draining = false;
}

} // namespace kiln::detail

// The steps of a plan that are not fused kernels: a BLAS call, an integer matmul's reduction
// kernel, a transfer between devices, a gather or scatter (StepBuilder, step_builder.h).
#include "engine/step_builder.h"

#include <initializer_list>
#include <tuple>
#include <utility>

namespace kiln::detail {

namespace {

// Step st writes n into `slot`, having read `read` (each input's slot and node): its
// bookkeeping, and the notes that say why each value crosses memory.
void writes(StepBuilder& p, Step& st, int slot, Node* n,
            std::initializer_list<std::pair<int, Node*>> read) {
  st.writes.push_back(slot);
  st.realizes.push_back(static_cast<int>(n->walk_index));
  for (const auto& [in_slot, in] : read)
    if (in_slot >= 0) note_input(p, st, in_slot, origin(in));
  note_outputs(p, st);
}

} // namespace

// Integer matmul has no BLAS on either backend: it becomes a reduction kernel over the
// iteration space (batch..., M, N, K), summing a[..., m, k] * b[..., k, n] over k (products
// wrap in the element type, the sum accumulates in 64 bits).
Step StepBuilder::integer_matmul(Node* mm) {
  Step st;
  st.device = mm->device;
  auto [sa, la] = operand(*this, mm->inputs[0]);
  auto [sb, lb] = operand(*this, mm->inputs[1]);
  const int rank = mm->shape().size(); // batch + 2
  FusedKernel& k = st.kernel()->kernel;
  k.kind = FusedKernel::Kind::reduce;
  k.shape = mm->shape();
  k.shape.push_back(la.shape[rank - 1]); // K
  KernelInput a{sa, mm->dtype, {}, la.offset, IndexClass::strided, origin(mm->inputs[0])};
  KernelInput b{sb, mm->dtype, {}, lb.offset, IndexClass::strided, origin(mm->inputs[1])};
  for (int d = 0; d < rank - 2; ++d) {
    a.strides.push_back(la.strides[d]);
    b.strides.push_back(lb.strides[d]);
  }
  a.strides.push_back(la.strides[rank - 2]); // m
  b.strides.push_back(0);
  a.strides.push_back(0); // n
  b.strides.push_back(lb.strides[rank - 1]);
  a.strides.push_back(la.strides[rank - 1]); // k
  b.strides.push_back(lb.strides[rank - 2]);
  a.cls = classify(k.shape, a.strides);
  b.cls = classify(k.shape, b.strides);
  k.inputs = {a, b};
  TapeInst la_inst, lb_inst, mul;
  la_inst.dtype = lb_inst.dtype = mul.dtype = mm->dtype;
  la_inst.a = 0;
  lb_inst.a = 1;
  mul.op = OpCode::mul;
  mul.a = 0;
  mul.b = 1;
  TapeInst sum;
  sum.op = OpCode::sum;
  sum.dtype = mm->dtype;
  sum.a = 2;
  k.tape = {la_inst, lb_inst, mul, sum};
  k.reduce_axes = 1u << rank;
  int out = slot_for_leaf(mm);
  k.outputs.push_back({3, out, mm->dtype, contiguous_strides(mm->shape()), 0, origin(mm), true});
  writes(*this, st, out, mm, {{sa, mm->inputs[0]}, {sb, mm->inputs[1]}});
  return st;
}

// A floating matmul too large to be computed inside a kernel: a BLAS (cuBLAS) call.
Step StepBuilder::gemm_step(Node* mm) {
  Step st;
  st.device = mm->device;
  GemmStep& g = st.work.emplace<GemmStep>();
  g.dtype = mm->dtype;
  g.out_shape = mm->shape();
  auto [sa, la] = operand(*this, mm->inputs[0]);
  auto [sb, lb] = operand(*this, mm->inputs[1]);
  g.a_slot = sa;
  g.b_slot = sb;
  g.a = la;
  g.b = lb;
  g.out_slot = slot_for_leaf(mm);
  writes(*this, st, g.out_slot, mm, {{sa, mm->inputs[0]}, {sb, mm->inputs[1]}});
  return st;
}

// A value moved to another device: one contiguous block from device to device.
Step StepBuilder::transfer_step(Node* t) {
  Node* x = t->inputs[0];
  auto [slot, l] = operand(*this, x);
  Step st;
  st.device = t->device;
  TransferStep& tr = st.work.emplace<TransferStep>();
  tr.from = x->device;
  tr.src_slot = slot;
  tr.src_offset = static_cast<size_t>(l.offset) * itemsize(x->dtype);
  tr.bytes = static_cast<size_t>(t->nbytes());
  tr.dst_slot = slot_for_leaf(t);
  writes(*this, st, tr.dst_slot, t, {{slot, x}});
  return st;
}

// gather / scatter_add: an unfused step over its operands in memory (index maps as layouts).
Step StepBuilder::index_step(Node* n) {
  Step st;
  st.device = n->device;
  IndexStep& ix = st.work.emplace<IndexStep>();
  ix.op = n->op == OpCode::gather ? IndexStep::Op::gather : IndexStep::Op::scatter_add;
  ix.select = n->select;
  ix.dtype = n->dtype;
  ix.index_dtype = n->inputs[1]->dtype;
  ix.dim = n->dim;
  ix.out_shape = n->shape();
  std::tie(ix.x_slot, ix.x) = operand(*this, n->inputs[0]);
  std::tie(ix.index_slot, ix.index) = operand(*this, n->inputs[1]);
  if (n->inputs.size() > 2) std::tie(ix.src_slot, ix.src) = operand(*this, n->inputs[2]);
  ix.out_slot = slot_for_leaf(n);
  st.name = ix.name();
  Node* src = n->inputs.size() > 2 ? n->inputs[2] : nullptr; // scatter_add's values
  writes(*this, st, ix.out_slot, n,
         {{ix.x_slot, n->inputs[0]}, {ix.index_slot, n->inputs[1]}, {ix.src_slot, src}});
  return st;
}

} // namespace kiln::detail

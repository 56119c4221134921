// Queries over FusedKernel shared by the planner, the dumps and the backends.
#include "ir/fused_kernel.h"

#include <algorithm>

namespace kiln::detail {

bool is_reduction(OpCode op) {
  return op_kind(op) == OpKind::Reduce;
}

int FusedKernel::compute_ops() const {
  int n = 0;
  for (const TapeInst& i : tape)
    if (i.op != OpCode::load && i.op != OpCode::constant) ++n;
  return n;
}

ReducePasses reduce_passes(const FusedKernel& k) {
  ReducePasses rp;
  rp.level.resize(k.tape.size(), 0);
  for (size_t i = 0; i < k.tape.size(); ++i) {
    const TapeInst& in = k.tape[i];
    if (in.op == OpCode::load || in.op == OpCode::matmul) continue; // a indexes inputs/dots
    int l = 0;
    for (int x : {in.a, in.b, in.c})
      if (x >= 0) l = std::max<int>(l, rp.level[x]);
    if (is_reduction(in.op)) {
      rp.passes = std::max(rp.passes, l + 1);
      ++l;
    }
    rp.level[i] = static_cast<int8_t>(l);
  }
  for (const KernelOutput& o : k.outputs)
    if (!o.reduced) rp.passes = std::max(rp.passes, rp.level[o.value] + 1);
  return rp;
}

bool FusedKernel::dot_operand(int j) const {
  return std::any_of(dots.begin(), dots.end(),
                     [j](const KernelDot& d) { return d.a == j || d.b == j; });
}

const char* index_class_name(IndexClass c) {
  switch (c) {
  case IndexClass::contiguous:
    return "contiguous";
  case IndexClass::scalar:
    return "scalar";
  case IndexClass::strided:
    return "strided";
  }
  return "?";
}

} // namespace kiln::detail

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

FusedKernel FusedKernel::segment(int s) const {
  const KernelSegment& seg = segments[s];
  const KernelSegment begin = s == 0 ? KernelSegment{} : segments[s - 1];
  FusedKernel k;
  k.kind = kind;
  k.reproducible = reproducible;
  k.shape = seg.shape;
  k.inputs.assign(inputs.begin() + begin.inputs_end, inputs.begin() + seg.inputs_end);
  k.tape.assign(tape.begin() + begin.tape_end, tape.begin() + seg.tape_end);
  for (TapeInst& t : k.tape) {
    if (t.op == OpCode::load) {
      t.a -= begin.inputs_end;
      continue;
    }
    for (int* v : {&t.a, &t.b, &t.c})
      if (*v >= 0) *v -= begin.tape_end;
  }
  k.outputs.assign(outputs.begin() + begin.outputs_end, outputs.begin() + seg.outputs_end);
  for (KernelOutput& o : k.outputs) o.value -= begin.tape_end;
  return k;
}

void FusedKernel::append_segment(const FusedKernel& part) {
  reproducible = reproducible || part.reproducible; // one mode per plan
  const int in0 = static_cast<int>(inputs.size());
  const int v0 = static_cast<int>(tape.size());
  inputs.insert(inputs.end(), part.inputs.begin(), part.inputs.end());
  for (TapeInst t : part.tape) {
    if (t.op == OpCode::load)
      t.a += in0;
    else
      for (int* v : {&t.a, &t.b, &t.c})
        if (*v >= 0) *v += v0;
    tape.push_back(t);
  }
  for (KernelOutput o : part.outputs) {
    o.value += v0;
    outputs.push_back(o);
  }
  segments.push_back({part.shape, static_cast<int>(inputs.size()), static_cast<int>(tape.size()),
                      static_cast<int>(outputs.size())});
  shape = Shape{(segments.size() > 1 ? shape[0] : 0) + part.shape.numel()};
}

int FusedKernel::segment_of_output(int o) const {
  for (size_t s = 0; s < segments.size(); ++s)
    if (o < segments[s].outputs_end) return static_cast<int>(s);
  return 0;
}

int FusedKernel::segment_of_input(int j) const {
  for (size_t s = 0; s < segments.size(); ++s)
    if (j < segments[s].inputs_end) return static_cast<int>(s);
  return 0;
}

const Shape& FusedKernel::output_space(int o) const {
  return segmented() ? segments[segment_of_output(o)].shape : shape;
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

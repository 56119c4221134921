// A kernel's identity is written once, in visit_identity: every field that changes the code
// generated for a FusedKernel, in order. Two sinks read that one visit: KeyText (the readable
// key, e.g. "ew r1 in:f32:contiguous mul:f32:0,1 out:2:f32:c", which the disk cache and the
// golden sources carry) and SignatureBytes (the same fields as compact bytes, built without
// formatting, for the in-memory cache). A field added to the visit reaches both, so the two
// cannot disagree about what makes kernels different.
#include "ir/kernel_key.h"

#include <fmt/format.h>
#include <llvm/ADT/Hashing.h>

namespace kiln::detail {

namespace {

template <class Sink> void visit_identity(const FusedKernel& k, Sink& s) {
  if (k.segmented()) { // the segments' identities in order
    s.field(0, 2, [&] { return fmt::format("seg{}", k.segments.size()); });
    s.count(k.segments.size());
    for (int i = 0; i < static_cast<int>(k.segments.size()); ++i) {
      s.field(' ', 0, [] { return std::string("{"); });
      visit_identity(k.segment(i), s);
      s.field(0, 0, [] { return std::string("}"); });
    }
    return;
  }
  const bool reduce = k.kind == FusedKernel::Kind::reduce;
  s.field(0, reduce, [&] { return std::string(reduce ? "reduce" : "ew"); });
  s.field(' ', k.shape.size(), [&] { return fmt::format("r{}", k.shape.size()); });
  s.count(k.inputs.size());
  for (const KernelInput& in : k.inputs) {
    s.field(' ', int(in.dtype), [&] { return fmt::format("in:{}", dtype_name(in.dtype)); });
    s.field(':', int(in.cls), [&] { return std::string(index_class_name(in.cls)); });
    if (in.cls != IndexClass::strided) continue;
    int64_t zeros = 0; // which dims broadcast is structural; sizes are not
    for (int d = 0; d < in.strides.size(); ++d) zeros |= int64_t(in.strides[d] == 0) << d;
    s.field(':', zeros, [&] {
      std::string p;
      for (int64_t st : in.strides) p += st == 0 ? '0' : 's';
      return p;
    });
  }
  s.count(k.tape.size());
  for (const TapeInst& t : k.tape) {
    s.field(' ', int(t.op), [&] { return std::string(op_name(t.op)); });
    s.field(':', int(t.dtype), [&] { return std::string(dtype_name(t.dtype)); });
    const int operands[3] = {t.a, t.b, t.c};
    const char seps[3] = {':', ',', ','};
    for (int i = 0; i < 3; ++i) // absent operands (-1): no text, code 0
      s.field(operands[i] >= 0 ? seps[i] : 0, operands[i] + 1,
              [&] { return operands[i] >= 0 ? std::to_string(operands[i]) : std::string(); });
  }
  s.count(k.outputs.size());
  for (const KernelOutput& o : k.outputs) {
    const bool contiguous = reduce || is_contiguous({k.shape, o.strides, 0});
    const char how = o.reduced ? 'r' : contiguous ? 'c' : 's';
    s.field(' ', o.value, [&] { return fmt::format("out:{}", o.value); });
    s.field(':', int(o.dtype), [&] { return std::string(dtype_name(o.dtype)); });
    s.field(':', how, [&] { return std::string(1, how); });
  }
  if (reduce) s.field(' ', k.reduce_axes, [&] { return fmt::format("axes{:x}", k.reduce_axes); });
  s.count(k.dots.size());
  for (const KernelDot& d : k.dots) {
    s.field(' ', d.a, [&] { return fmt::format("dot:{}", d.a); });
    s.field(',', d.b, [&] { return std::to_string(d.b); });
    s.field(',', d.same_k, [&] { return fmt::format("k{}", d.same_k); });
  }
  s.field(k.reproducible ? ' ' : 0, k.reproducible,
          [&] { return std::string(k.reproducible ? "repro" : ""); });
}

} // namespace

std::string kernel_key(const FusedKernel& k) {
  KeyText t;
  visit_identity(k, t);
  return std::move(t.out);
}

void kernel_signature(const FusedKernel& k, llvm::SmallVectorImpl<char>& out) {
  SignatureBytes b{out};
  visit_identity(k, b);
}

std::string kernel_name(const FusedKernel& k) {
  return kernel_name(k, kernel_key(k));
}

std::string kernel_name(const FusedKernel& k, const std::string& key) {
  std::string name = "kiln";
  if (k.segmented()) name += fmt::format("_seg{}", k.segments.size());
  int shown = 0;
  for (const TapeInst& t : k.tape) {
    if (t.op == OpCode::load || t.op == OpCode::constant) continue;
    if (shown++ == 4) {
      name += "_etc";
      break;
    }
    name += '_';
    name += op_name(t.op);
  }
  if (shown == 0 && k.kind == FusedKernel::Kind::elementwise) name += "_copy";
  if (!k.outputs.empty()) name += std::string("_") + dtype_name(k.outputs[0].dtype);
  uint64_t h = static_cast<uint64_t>(llvm::hash_value(key));
  return fmt::format("{}_{:06x}", name, h & 0xffffff);
}

} // namespace kiln::detail

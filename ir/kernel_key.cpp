#include "ir/kernel_key.h"

#include <fmt/format.h>
#include <llvm/ADT/Hashing.h>

namespace kiln::detail {

std::string kernel_key(const FusedKernel& k) {
  std::string key =
      fmt::format("{} r{}", k.kind == FusedKernel::Kind::reduce ? "reduce" : "ew", k.shape.size());
  for (const KernelInput& in : k.inputs) {
    key += fmt::format(" in:{}:{}", dtype_name(in.dtype), index_class_name(in.cls));
    if (in.cls == IndexClass::strided) { // which dims broadcast is structural, sizes are not
      key += ':';
      for (int64_t s : in.strides) key += s == 0 ? '0' : 's';
    }
  }
  for (const TapeInst& t : k.tape) {
    key += fmt::format(" {}:{}", op_name(t.op), dtype_name(t.dtype));
    if (t.a >= 0) key += fmt::format(":{}", t.a);
    if (t.b >= 0) key += fmt::format(",{}", t.b);
    if (t.c >= 0) key += fmt::format(",{}", t.c);
  }
  for (const KernelOutput& o : k.outputs) {
    bool contiguous = k.kind == FusedKernel::Kind::reduce || is_contiguous({k.shape, o.strides, 0});
    key += fmt::format(" out:{}:{}:{}", o.value, dtype_name(o.dtype),
                       o.reduced    ? 'r'
                       : contiguous ? 'c'
                                    : 's');
  }
  if (k.kind == FusedKernel::Kind::reduce) key += fmt::format(" axes{:x}", k.reduce_axes);
  for (const KernelDot& d : k.dots) key += fmt::format(" dot:{},{},k{}", d.a, d.b, d.same_k);
  return key;
}

void kernel_signature(const FusedKernel& k, llvm::SmallVectorImpl<char>& out) {
  auto put = [&](int64_t v) { // small non-negative values in one byte, others in nine
    if (v >= 0 && v < 255) {
      out.push_back(static_cast<char>(v));
    } else {
      out.push_back(static_cast<char>(255));
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
    }
  };
  put(static_cast<int>(k.kind));
  put(k.shape.size());
  put(static_cast<int64_t>(k.inputs.size()));
  for (const KernelInput& in : k.inputs) {
    put(static_cast<int>(in.dtype));
    put(static_cast<int>(in.cls));
    if (in.cls == IndexClass::strided) {
      int64_t zeros = 0; // broadcast pattern: which strides are 0
      for (int d = 0; d < in.strides.size(); ++d) zeros |= int64_t(in.strides[d] == 0) << d;
      put(zeros);
    }
  }
  put(static_cast<int64_t>(k.tape.size()));
  for (const TapeInst& t : k.tape) {
    put(static_cast<int>(t.op));
    put(static_cast<int>(t.dtype));
    put(t.a + 1);
    put(t.b + 1);
    put(t.c + 1);
  }
  put(static_cast<int64_t>(k.outputs.size()));
  for (const KernelOutput& o : k.outputs) {
    bool contiguous = k.kind == FusedKernel::Kind::reduce || is_contiguous({k.shape, o.strides, 0});
    put(o.value);
    put(static_cast<int>(o.dtype));
    put(contiguous + 2 * o.reduced);
  }
  if (k.kind == FusedKernel::Kind::reduce) put(k.reduce_axes);
  put(static_cast<int64_t>(k.dots.size()));
  for (const KernelDot& d : k.dots) {
    put(d.a);
    put(d.b);
    put(d.same_k);
  }
}

std::string kernel_name(const FusedKernel& k) {
  std::string name = "kiln";
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
  uint64_t h = static_cast<uint64_t>(llvm::hash_value(kernel_key(k)));
  return fmt::format("{}_{:06x}", name, h & 0xffffff);
}

} // namespace kiln::detail

#pragma once
// OpCode and its classification, generated from op_table.def.
#include <cstdint>

namespace kiln::detail {

enum class OpKind : uint8_t {
  Leaf,
  Source,
  Unary,
  UnaryFloat,
  Logical,
  Cast,
  Binary,
  Compare,
  Ternary,
  View,
  Reduce,
  Gemm,
  Concat,
  Transfer,
  Index,
  Load
};

enum class OpCode : uint8_t {
#define KILN_OP(name, kind, arity) name,
#include "ir/op_table.def"
};

struct OpInfo {
  const char* name;
  OpKind kind;
  int arity; // -1: variadic
};

// In the header: every recorded op asks for its kind and name a few times, and a call into
// the library per question was 1% of a small loop's host instructions (callgrind).
inline constexpr OpInfo kOpTable[] = {
#define KILN_OP(name, kind, arity) {#name, OpKind::kind, arity},
#include "ir/op_table.def"
};

inline const OpInfo& op_info(OpCode op) {
  return kOpTable[static_cast<int>(op)];
}
inline const char* op_name(OpCode op) {
  return op_info(op).name;
}
inline OpKind op_kind(OpCode op) {
  return op_info(op).kind;
}

/// Elementwise ops (and sources) can be computed inside a fused kernel.
inline bool is_elementwise(OpKind k) {
  switch (k) {
  case OpKind::Source:
  case OpKind::Unary:
  case OpKind::UnaryFloat:
  case OpKind::Logical:
  case OpKind::Cast:
  case OpKind::Binary:
  case OpKind::Compare:
  case OpKind::Ternary:
    return true;
  default:
    return false;
  }
}

} // namespace kiln::detail

#include "ir/ops_table.h"

namespace kiln::detail {

namespace {
constexpr OpInfo kOps[] = {
#define KILN_OP(name, kind, arity) {#name, OpKind::kind, arity},
#include "ir/op_table.def"
};
} // namespace

const OpInfo& op_info(OpCode op) {
  return kOps[static_cast<int>(op)];
}

} // namespace kiln::detail

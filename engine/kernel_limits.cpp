// The per-kernel limits of planner_impl.h that depend on the engine's mode.
#include "engine/graph.h"
#include "engine/planner_impl.h"

namespace kiln::detail {

size_t max_kernel_dots() {
  return engine().reproducible ? kMaxKernelDots / 2 : kMaxKernelDots;
}

int reduction_units(const Node* n) {
  const bool sum = n->op == OpCode::sum || n->op == OpCode::mean;
  const DType in = n->inputs[0]->dtype;
  return sum && (in == DType::f64 || (engine().reproducible && is_floating(in))) ? 2 : 1;
}

} // namespace kiln::detail

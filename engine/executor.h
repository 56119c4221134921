#pragma once
// Running a cached plan for one evaluation (engine/executor.cpp): realize() and the replay of
// a traced evaluation (engine/trace.h) share it.
#include "engine/plan_cache.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>

namespace kiln::detail {

/// Runs plan `p` for the evaluation whose nodes, by walk index, are `nodes`: writes their
/// constants into the plan, runs its steps and realizes the nodes they compute. `done` runs
/// after the last step, while those nodes are still pinned (a replay takes its outputs then).
void run_plan(CachedPlan& p, llvm::ArrayRef<Node*> nodes, llvm::function_ref<void()> done = {});

/// Stands in `nodes` for a value that no node needs to hold: one computed in registers (the run
/// marks it fused), a pending view realized as an alias (the run finds nothing to alias), or a
/// value a replay binds to no node (engine/trace.h) because nothing reads it after the run (the
/// run writes its buffer and frees it with the run's others, realizing nothing). Held and
/// internal, so that the run's uses neither free nor count it.
Node* unbound_node();

} // namespace kiln::detail

#pragma once
// gather / scatter_add on the CPU (ir/index_step.h).
#include "ir/index_step.h"

namespace kiln::detail::cpu {

/// Runs s over the slots' base pointers (layouts' offsets are in elements from them). Throws
/// kiln::Error naming the op, the index and the valid range at the first index out of range;
/// the output, a buffer of its own, is then left unfinished and dropped by the executor.
void run_index(const IndexStep& s, const char* x, const char* index, const char* src, char* out);

} // namespace kiln::detail::cpu

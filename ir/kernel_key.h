#pragma once
// Structural identity of a FusedKernel: the key text (tape, dtypes, index class and broadcast
// pattern of each input, rank, reduction) with sizes left out, so one kernel serves all sizes;
// and a readable name with a short hash, e.g. "kiln_mul_add_tanh_f32_3fa2c1".
#include "ir/fused_kernel.h"

#include <llvm/ADT/SmallVector.h>

#include <string>

namespace kiln::detail {

std::string kernel_key(const FusedKernel& k);
/// The same structure as kernel_key, as compact bytes built without formatting (tens of
/// nanoseconds): what the in-memory kernel cache looks kernels up by.
void kernel_signature(const FusedKernel& k, llvm::SmallVectorImpl<char>& out);
std::string kernel_name(const FusedKernel& k);

} // namespace kiln::detail

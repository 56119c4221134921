#pragma once
// The CPU backend's FusedKernel interpreter: evaluates a tape over blocks of elements, one
// tight loop per instruction (loops the compiler vectorizes), so a fused chain touches memory
// once per input and output while each op's loop stays simple.
#include "engine/fused_kernel.h"

#include <llvm/ADT/ArrayRef.h>

namespace kiln::detail::cpu {

/// base[i]: start of slot i's storage (null for slots the kernel does not touch).
void run_elementwise(const FusedKernel& k, llvm::ArrayRef<char*> base);
void run_reduce(const FusedKernel& k, llvm::ArrayRef<char*> base);

} // namespace kiln::detail::cpu

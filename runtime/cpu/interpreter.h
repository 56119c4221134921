#pragma once
// The CPU backend's FusedKernel interpreter: evaluates a tape over blocks of elements, one
// tight loop per instruction (loops the compiler vectorizes), so a fused chain touches memory
// once per input and output while each op's loop stays simple.
#include "ir/fused_kernel.h"
#include "runtime/backend.h"

#include <llvm/ADT/ArrayRef.h>

namespace kiln::detail::cpu {

/// buffers[i]: slot i's storage (null for slots the kernel does not touch). Only the slots the
/// kernel names are read: an evaluation of many steps has many slots.
void run_elementwise(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers);
void run_reduce(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers);

} // namespace kiln::detail::cpu

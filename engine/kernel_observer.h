#pragma once
// A test hook: called with every FusedKernel the executor is about to run (codegen tests use
// it to collect the kernel shapes the op suite produces). Not thread-safe; tests only.
#include "ir/fused_kernel.h"

#include <functional>

namespace kiln::detail {

using KernelObserver = std::function<void(const FusedKernel&)>;
/// Install (or clear, with an empty function) the observer; returns the previous one.
KernelObserver set_kernel_observer(KernelObserver f);

} // namespace kiln::detail

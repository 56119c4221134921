#pragma once
#include "ir/fused_kernel.h"

namespace kiln::detail::cpu {

/// out (contiguous, batch..., M, N) = a @ b with the operands' index maps in g.
void run_gemm(const GemmStep& g, const char* a_base, const char* b_base, char* out);

} // namespace kiln::detail::cpu

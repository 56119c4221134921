#pragma once
#include "ir/fused_kernel.h"

namespace kiln::detail::cpu {

/// out (contiguous, batch..., M, N) = a @ b with the operands' index maps in g. OpenBLAS runs
/// single-threaded; a large product is split over kiln's own pool (KILN_NUM_THREADS).
void run_gemm(const GemmStep& g, const char* a_base, const char* b_base, char* out);
/// The threads OpenBLAS uses (once a GEMM has run: before, its own default).
int blas_threads();

} // namespace kiln::detail::cpu

#pragma once
// kiln's code generation version, on its own so that tools reading the kernel cache
// (tools/kiln-cache) need no other codegen header.

namespace kiln::detail {

/// Bumped whenever generated code changes meaning; part of every kernel key.
inline constexpr int kCodegenVersion = 15; // 2: --fmad=false; 3: column layout, float max/min
                                           // accumulators, per-row constants; 4: f16/bf16 exp and
                                           // division approximated, row-vector weights; 5: f16/bf16
                                           // exp flushes subnormal results; 6: GEMM-tile layout;
                                           // 7: its K groups; 8: entry points named by FNV-1a
                                           // (older caches hold binaries with other names);
                                           // 9: keys end with pasted_sources_tag();
                                           // 10: few-column dots leave the GEMM-tile layout;
                                           // kernels wait for their predecessors (PDL);
                                           // 11: GEMM tiles stage operands k-major, loading
                                           // those with stride 1 along k along k; short dots
                                           // 12: dot kernels load the tape's inputs before the
                                           // dot products (no change in results);
                                           // 13: dot sums added by warp shuffles first;
                                           // 14: through dot_sum.cuh's helpers, shared with
                                           // the stand-in (no change in results);
                                           // 15: GEMM tiles' K groups park their partial tiles
                                           // swizzled and add them into registers (no change in
                                           // results)

} // namespace kiln::detail

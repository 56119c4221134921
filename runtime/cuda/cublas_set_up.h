#pragma once
// cuBLAS's set-up, on a thread of its own. The first GEMM of each data type in a process costs
// cuBLAS 80-135 ms of host time for f32 (cuBLASLt's own set-up, once per type and process:
// bench/results/2026-11-27-h100-session32.md), whatever kiln does before it, and a stored
// algorithm or eager module loading does not avoid it. So a training program's first step
// would wait for cuBLAS as it would wait for a compiler. Instead the planner computes a type's
// matmuls in kiln's own kernels until its set-up is done (engine/small_matmul.cpp), and this
// thread does the set-up meanwhile; the kinds that are ready are part of every plan key, so the
// first evaluation after that plans the matmuls for cuBLAS again, whose first call then no longer
// waits for the set-up (a new shape class still loads its kernels: 5-18 ms on the H100).
//
// The thread makes a handle and a stream of its own and runs one small GEMM of the kind, with
// the compute type kiln's GEMMs use (CudaGemm), on scratch memory allocated and freed in its
// stream's order (no device-wide synchronization). A set-up that fails counts as ready: the
// GEMM's own call then reports why. One set-up per kind and process, on the device that asked
// first (multi-GPU is untested: another device's first GEMM may still pay part of it).
//
// At exit the thread is joined before cuBLAS's state is destroyed, as BackgroundBuilds is: by a
// thread_local guard of the thread that starts a set-up (exit() from the main thread runs it
// before any exit handler), and by an exit handler registered again after each set-up (which may
// register cuBLAS's own destructors). A set-up under way cannot be cut short: an exit waits for
// it (at most the 80-135 ms above). In a fork()'s child nothing is joined.
//
// Declared in runtime/backend.h, for the planner: cublas_kind, cublas_ready_kinds,
// compute_while_cublas_sets_up.
namespace kiln::detail {

/// Starts kind k's set-up for CUDA device `device` on the set-up thread, unless it was started
/// already (then nothing: one set-up per kind and process). Throws when no thread can be started
/// (std::system_error) or after the exit handler ran (kiln::Error).
void start_cublas_set_up(int device, int kind);

/// Waits until every set-up started so far has finished (tests, benchmarks).
void wait_for_cublas_set_up();

} // namespace kiln::detail

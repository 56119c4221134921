#pragma once
// The stand-in: how a kernel that NVRTC has not compiled yet runs anyway. The interpreter
// kernel (codegen/device/standin.cu, compiled ahead of time by nvcc and embedded in libkiln)
// evaluates a FusedKernel from a description of it, the Program (codegen/device/
// standin_program.h), to the same bits as the kernel's compiled binary. This file builds a
// launch's argument block and shape; the runtime (runtime/cuda/kernel_cache.h) decides when to
// use it. Pure computation: no driver calls.
//
// Covered: every layout (elementwise, tiled, dot, GEMM tile, row and column reductions) and
// segmented kernels, outside reproducible mode. Not covered (their kernels are compiled before
// they first run, as before): reproducible kernels, index kernels (not FusedKernels), kernels
// with more than standin::kMaxDots dot products or standin::kMaxReductions reductions, tapes with
// more live values than the large interpreter's slots, argument blocks over standin::kArgsBytes.
#include "codegen/cuda_codegen.h"

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace kiln::detail {

struct StandinLaunch {
  ParamTemplate params; // the argument block: the kernel's own Params fields, then the Program
  bool large = false;   // the interpreter with more value slots (standin_entry)
  CudaLaunch shape;     // cluster > 1: the blocks of a thread-block cluster (sm_90)
};

/// The interpreter's launch for (k, v) on t, or nullopt with the reason in `why` (when given)
/// when the interpreter does not cover k.
std::optional<StandinLaunch> plan_standin(const FusedKernel& k, const CudaVariant& v,
                                          const CudaTarget& t, std::string* why = nullptr);

/// The interpreter's entry points in the embedded fatbin.
const char* standin_entry(bool large);

/// The embedded fatbin (empty when libkiln was built without one; not aligned: copy it before
/// loading), and the CUDA version of the
/// nvcc that built it (major * 1000 + minor * 10): its results match NVRTC's kernels bit for bit
/// only when NVRTC is the same version, so the runtime uses it only then.
std::span<const std::byte> standin_fatbin();
int standin_cuda_version();

} // namespace kiln::detail

#pragma once
// The CUDA backend: one stream per device, stream-ordered pooled memory, NVRTC kernels through
// the kernel cache, cuBLAS GEMMs. Only compiled in builds with the CUDA toolkit.
#include "runtime/backend.h"

namespace kiln::detail {

/// Devices usable in this process (0 without a driver or GPU; never throws).
int cuda_device_count();
/// The backend of CUDA device `index` (created on first use).
Backend& cuda_backend(int index);
/// Synchronize every CUDA backend created so far.
void cuda_synchronize_all();

} // namespace kiln::detail

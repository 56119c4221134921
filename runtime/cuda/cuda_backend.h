#pragma once
// The CUDA backend: one stream per device, stream-ordered pooled memory, NVRTC kernels through
// the kernel cache, cuBLAS GEMMs. Only compiled in builds with the CUDA toolkit.
#include "runtime/backend.h"

#include <string>

namespace kiln::detail {

/// Devices usable in this process (0 without a driver or GPU; never throws).
int cuda_device_count();
/// Why cuda_device_count() is 0 (the runtime's error text), empty otherwise.
const std::string& cuda_unavailable_reason();
/// The backend of CUDA device `index` (created on first use).
Backend& cuda_backend(int index);
/// Synchronize every CUDA backend created so far.
void cuda_synchronize_all();

} // namespace kiln::detail

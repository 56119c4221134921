#pragma once
// The device-side error flag of the gather / scatter_add kernels (codegen/cuda_index.h): a
// kernel cannot throw, so it records an out-of-range index in pinned host memory mapped
// into the device, and the backend throws it at its next synchronization (a host read,
// kiln::sync()), where the host waits for the kernels anyway: checking costs one load.
#include "codegen/cuda_index.h"

namespace kiln::detail {

class IndexErrorFlag {
public:
  /// The device's view of the record (allocated at first use).
  IndexError* device_ptr();
  /// After the stream was synchronized: throws kiln::Error for a recorded index (once).
  void check(int device);

private:
  IndexError* host_ = nullptr;
  IndexError* device_ = nullptr;
};

} // namespace kiln::detail

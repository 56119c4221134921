#include "runtime/cuda/copy_stream.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/host_copies.h"

namespace kiln::detail {

CopyStream::CopyStream(int device) {
  CurrentDevice on(device); // the stream and the event belong to `device`
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cuda",
             "cudaStreamCreate (copies)");
  cuda_check(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming), "cuda",
             "cudaEventCreate (copies)");
}

void CopyStream::join(cudaStream_t compute, const char* op) {
  cuda_check(cudaEventRecord(copied_, stream_), op, "cudaEventRecord (copy stream)");
  cuda_check(cudaStreamWaitEvent(compute, copied_, 0), op, "cudaStreamWaitEvent (copy stream)");
}

} // namespace kiln::detail

#include "runtime/cuda/copy_stream.h"

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/host_copies.h"

namespace kiln::detail {

CopyStream::CopyStream(int device) : device_(device) {
  CurrentDevice on(device); // the stream and the events belong to `device`
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cuda",
             "cudaStreamCreate (copies)");
  cuda_check(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming), "cuda",
             "cudaEventCreate (copies)");
}

void CopyStream::join(cudaStream_t compute, const char* op) {
  cuda_check(cudaEventRecord(joined_, stream_), op, "cudaEventRecord (copy stream)");
  cuda_check(cudaStreamWaitEvent(compute, joined_, 0), op, "cudaStreamWaitEvent (copy stream)");
}

void CopyStream::follow(cudaStream_t compute, const char* op) {
  cuda_check(cudaEventRecord(joined_, compute), op, "cudaEventRecord (compute stream)");
  cuda_check(cudaStreamWaitEvent(stream_, joined_, 0), op, "cudaStreamWaitEvent (compute stream)");
}

cudaEvent_t CopyStream::spare_event(const char* op) {
  if (!spare_.empty()) {
    cudaEvent_t e = spare_.back();
    spare_.pop_back();
    return e;
  }
  CurrentDevice on(device_);
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), op, "cudaEventCreate (copies)");
  return e;
}

void CopyStream::retire_passed() {
  while (!marks_.empty() && cudaEventQuery(marks_.front().done) == cudaSuccess) {
    passed_ = marks_.front().ticket;
    spare_.push_back(marks_.front().done);
    marks_.pop_front();
  }
  (void)cudaGetLastError(); // cudaErrorNotReady is not sticky; a real error is reported by wait
}

uint64_t CopyStream::mark(const char* op) {
  retire_passed();
  cudaEvent_t e = spare_event(op);
  if (cudaError_t err = cudaEventRecord(e, stream_); err != cudaSuccess) {
    spare_.push_back(e);
    cuda_check(err, op, "cudaEventRecord (copy stream)");
  }
  marks_.push_back({++issued_, e});
  return issued_;
}

void CopyStream::wait(uint64_t ticket, const char* op) {
  while (passed_ < ticket && !marks_.empty()) {
    const Mark m = marks_.front();
    cuda_check(cudaEventSynchronize(m.done), op, "cudaEventSynchronize (copy stream)");
    passed_ = m.ticket;
    spare_.push_back(m.done);
    marks_.pop_front();
  }
}

void CopyStream::synchronize(const char* op) {
  cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize (copy stream)");
  retire_passed();
}

} // namespace kiln::detail

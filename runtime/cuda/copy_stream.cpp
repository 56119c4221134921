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

void CopyStream::join(cudaStream_t compute) noexcept {
  if (cudaEventRecord(joined_, stream_) == cudaSuccess &&
      cudaStreamWaitEvent(compute, joined_, 0) == cudaSuccess)
    return;
  (void)cudaGetLastError(); // ordered on the host instead; a sticky error is reported later
  (void)cudaStreamSynchronize(stream_);
  (void)cudaGetLastError();
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

void CopyStream::retire_front(std::vector<BufferRef>& released) {
  Mark m = std::move(marks_.front());
  marks_.pop_front();
  passed_ = m.ticket;
  released.push_back(std::move(m.reads)); // may throw: the event is not yet in two places
  spare_.push_back(m.done);
}

void CopyStream::release_passed() {
  std::vector<BufferRef> released;
  while (!marks_.empty() && cudaEventQuery(marks_.front().done) == cudaSuccess)
    retire_front(released);
  (void)cudaGetLastError(); // cudaErrorNotReady is not sticky; a real error is reported by wait
}

uint64_t CopyStream::mark(BufferRef reads, const char* op) {
  release_passed();
  cudaEvent_t e = spare_event(op);
  if (cudaError_t err = cudaEventRecord(e, stream_); err != cudaSuccess) {
    spare_.push_back(e);
    (void)cudaStreamSynchronize(stream_); // `reads` is released on return: the copy must be done
    (void)cudaGetLastError();
    cuda_check(err, op, "cudaEventRecord (copy stream)");
  }
  marks_.push_back({++issued_, e, std::move(reads)});
  return issued_;
}

void CopyStream::wait(uint64_t ticket, const char* op) {
  std::vector<BufferRef> released;
  while (passed_ < ticket && !marks_.empty()) {
    cuda_check(cudaEventSynchronize(marks_.front().done), op, "cudaEventSynchronize (copy stream)");
    retire_front(released);
  }
}

void CopyStream::synchronize(const char* op) {
  cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize (copy stream)");
  release_passed();
}

} // namespace kiln::detail

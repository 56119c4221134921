#include "runtime/cuda/index_error.h"

#include "runtime/cuda/cuda_check.h"

#include <new>

namespace kiln::detail {

IndexError* IndexErrorFlag::device_ptr() {
  if (!device_) {
    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, sizeof(IndexError), cudaHostAllocMapped), "eval",
               "cudaHostAlloc (index error flag)");
    host_ = new (p) IndexError;
    cuda_check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), p, 0), "eval",
               "cudaHostGetDevicePointer (index error flag)");
  }
  return device_;
}

void IndexErrorFlag::check(int device) {
  if (!host_ || *static_cast<volatile int32_t*>(&host_->flag) == 0) return;
  const IndexError e = *host_;
  *static_cast<volatile int32_t*>(&host_->flag) = 0; // reported once
  static const char* const kOps[] = {"gather", "index_select", "scatter_add"};
  fail(kOps[e.op >= 0 && e.op < 3 ? e.op : 0],
       "index {} is out of range [0, {}) for dim {} (found on cuda:{} by a kernel that ran "
       "before this synchronization; its result skipped the index: gather wrote 0 there, "
       "scatter_add added nothing)",
       e.value, e.size, e.dim, device);
}

} // namespace kiln::detail

// Pinned host tensors: CPU tensors whose storage is page-locked memory from the CUDA backend's
// pool (runtime/cuda/pinned_pool.h), so that copies to a GPU read it directly at the link's
// speed and without blocking the caller.
#include "engine/graph.h"
#include "engine/ops_common.h"
#include "runtime/backend.h"
#include "runtime/cpu/thread_pool.h"

#include <kiln/ops.h>

#include <cstring>

namespace kiln {

using namespace detail;

Tensor Tensor::pin_memory() const {
  Node* n = arg(*this, "pin_memory");
  if (!n->device.is_cpu())
    fail("pin_memory", "the tensor (shape {}) is on {}; only CPU tensors are pinned", n->shape(),
         n->device.str());
  if (is_pinned() && is_contiguous()) return *this;
  const Device gpu = Device::cuda(0);
  if (!is_available(gpu))
    fail("pin_memory", "page-locked host memory comes from the CUDA driver, and {} is not usable",
         gpu.str());
  Tensor src = n->realized() && is_contiguous() ? *this : kiln::contiguous(*this);
  Node* s = src.node();
  if (!s->realized()) realize({s});
  const size_t bytes = static_cast<size_t>(s->numel()) * itemsize(s->dtype);
  BufferRef pinned = backend_for(gpu, "pin_memory").allocate_pinned_host(bytes);
  if (bytes) {
    const char* from =
        static_cast<const char*>(s->buffer->data) + s->layout.offset * itemsize(s->dtype);
    char* to = static_cast<char*>(pinned->data);
    cpu::parallel_for(static_cast<int64_t>(bytes), int64_t(1) << 20, [&](int64_t b, int64_t e) {
      std::memcpy(to + b, from + b, static_cast<size_t>(e - b));
    });
  }
  return publish(
      new_realized(s->dtype, Device::cpu(), std::move(pinned), contiguous_layout(s->shape())));
}

bool Tensor::is_pinned() const {
  Node* n = arg(*this, "is_pinned");
  return n->realized() && n->buffer && n->buffer->pinned_host;
}

} // namespace kiln

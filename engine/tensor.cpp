// Tensor handle methods and host reads.
#include "engine/graph.h"
#include "ir/errors.h"
#include "ir/host_convert.h"
#include "runtime/cpu/thread_pool.h"

#include <kiln/ops.h>
#include <kiln/tensor.h>

#include <cstdint>
#include <vector>

#include <sys/mman.h>

namespace kiln {

using detail::Node;

Tensor::Tensor(Node* adopt) : node_(adopt) {}
Tensor::Tensor(const Tensor& o) : node_(o.node_) {
  if (node_) detail::retain_handle(node_);
}
Tensor& Tensor::operator=(const Tensor& o) {
  if (o.node_) detail::retain_handle(o.node_);
  if (node_) detail::release_handle(node_);
  node_ = o.node_;
  return *this;
}
Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    if (node_) detail::release_handle(node_);
    node_ = o.node_;
    o.node_ = nullptr;
  }
  return *this;
}
Tensor::~Tensor() {
  if (node_) detail::release_handle(node_);
}

namespace {
Node* need(const Tensor& t, const char* what) {
  if (!t.defined()) throw Error(std::string("[") + what + "] the tensor is undefined");
  return t.node();
}
} // namespace

const Shape& Tensor::shape() const {
  return need(*this, "shape")->layout.shape;
}
const Shape& Tensor::strides() const {
  return need(*this, "strides")->layout.strides;
}
DType Tensor::dtype() const {
  return need(*this, "dtype")->dtype;
}
Device Tensor::device() const {
  return need(*this, "device")->device;
}
bool Tensor::is_realized() const {
  return need(*this, "is_realized")->realized();
}
bool Tensor::is_contiguous() const {
  return detail::is_contiguous(need(*this, "is_contiguous")->layout);
}

int64_t Tensor::size(int dim) const {
  const Shape& s = shape();
  int d = dim < 0 ? dim + s.size() : dim;
  if (d < 0 || d >= s.size())
    detail::fail("size", "dim {} out of range for a tensor of shape {}", dim, s);
  return s[d];
}

Tensor Tensor::to(Device d) const {
  Node* n = need(*this, "to");
  if (n->device == d) return *this;
  detail::backend_for(d, "to");
  Tensor src = kiln::contiguous(*this); // copies move one contiguous block
  detail::Node* t = detail::new_node(detail::OpCode::transfer, n->dtype, d, n->layout.shape);
  detail::add_input(t, src.node());
  return detail::publish(t);
}

Tensor Tensor::astype(DType t) const {
  return cast(*this, t);
}
Tensor Tensor::contiguous() const {
  return kiln::contiguous(*this);
}
Tensor Tensor::reshape(const Shape& s) const {
  return kiln::reshape(*this, s);
}

void detail::prepare_host_pages(void* data, size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20, kPage = 4096;
  if (!data || bytes < 4 * kHuge) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (p + kHuge - 1) & ~(kHuge - 1), end = (p + bytes) & ~(kHuge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  // Fault the pages in on several threads: MADV_POPULATE_WRITE (Linux 5.14) has the kernel do
  // it without a write from here; else a write to each page (the resize that follows zeroes
  // them anyway).
  const uintptr_t first = (p + kPage - 1) & ~(kPage - 1), last = (p + bytes) & ~(kPage - 1);
  if (last <= first) return;
  detail::cpu::parallel_for(
      static_cast<int64_t>((last - first) / kPage), 2048, [first](int64_t b, int64_t e) {
        char* from = reinterpret_cast<char*>(first + static_cast<uintptr_t>(b) * kPage);
        const size_t n = static_cast<size_t>(e - b) * kPage;
#ifdef MADV_POPULATE_WRITE
        if (madvise(from, n, MADV_POPULATE_WRITE) == 0) return;
#endif
        for (size_t i = 0; i < n; i += kPage) static_cast<volatile char*>(from)[i] = 0;
      });
}

void Tensor::copy_to_host(void* dst, DType as, size_t count, const char* op) const {
  Node* n = need(*this, op);
  detail::note_host_read();
  if (count != static_cast<size_t>(n->numel())) {
    if (std::string_view(op) == "item")
      detail::fail("item", "a tensor of shape {} has {} elements, not 1", n->layout.shape,
                   n->numel());
    detail::fail(op, "the destination holds {} elements, the tensor (shape {}, {}) has {}", count,
                 n->layout.shape, dtype_name(n->dtype), n->numel());
  }
  if (count == 0) return;
  Tensor src = *this;
  if (!detail::is_contiguous(n->layout)) src = kiln::contiguous(*this);
  Node* s = src.node();
  if (!s->realized()) detail::realize({s});
  detail::Backend& be = detail::backend_for(s->device, "to_vector");
  size_t bytes = count * itemsize(s->dtype);
  size_t offset = static_cast<size_t>(s->layout.offset) * itemsize(s->dtype);
  detail::wait_written(*s->buffer); // a download still in flight
  if (s->dtype == as) {
    be.copy_to_host(dst, *s->buffer, offset, bytes);
    return;
  }
  std::vector<unsigned char> tmp(bytes);
  be.copy_to_host(tmp.data(), *s->buffer, offset, bytes);
  // Booleans land as bytes 0/1, which is also the representation of bool.
  detail::convert_elements(tmp.data(), s->dtype, dst, as, count);
}

} // namespace kiln

// Memory kiln does not own: tensors over the caller's memory (from_blob), a realized value's
// address (data_ptr), and DLPack, the exchange format of PyTorch, CuPy, JAX and others
// (to_dlpack, from_dlpack). Adopted memory is a Buffer without an owner (runtime/backend.h):
// kiln reads it, never writes into it, and calls its deleter when the last reference goes.
#include "engine/graph.h"
#include "engine/ops_common.h"
#include "ir/shape_math.h"
#include "runtime/backend.h"

#include <kiln/dlpack.h>

#include <dlpack/dlpack.h>

#include <cstdio>
#include <memory>

namespace kiln {

using namespace detail;

namespace {

// The element past the last one a layout reaches (0 for an empty shape); nullopt when strides
// are negative or the offset arithmetic overflows.
std::optional<uint64_t> reach(const Shape& shape, const Shape& strides) {
  uint64_t end = 1;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    if (strides[d] < 0) return std::nullopt;
    uint64_t step = 0;
    if (__builtin_mul_overflow(uint64_t(shape[d] - 1), uint64_t(strides[d]), &step) ||
        __builtin_add_overflow(end, step, &end))
      return std::nullopt;
  }
  return end;
}

// Checks what from_blob and from_dlpack adopt; throws kiln::Error naming `op` and the problem.
void check_adopted(const char* op, const void* data, size_t bytes, DType dtype, const Shape& shape,
                   const Shape& strides, Device device) {
  check_extents(op, shape, dtype);
  if (strides.size() != shape.size())
    fail(op, "{} strides for shape {}: one per dim", strides.size(), shape);
  const std::optional<uint64_t> end = reach(shape, strides);
  if (!end) fail(op, "strides {} for shape {} are negative or overflow", strides, shape);
  if (*end == 0) return;
  if (!data) fail(op, "data is a null pointer but shape {} has {} elements", shape, shape.numel());
  if (reinterpret_cast<uintptr_t>(data) % itemsize(dtype) != 0)
    fail(op, "data {} is not aligned to {}'s {} bytes", data, dtype_name(dtype), itemsize(dtype));
  if (*end > bytes / itemsize(dtype))
    fail(op, "strides {} over shape {} reach element {} of {}, past the {} bytes given", strides,
         shape, *end - 1, dtype_name(dtype), bytes);
  if (std::string why = backend_for(device, op).check_adopted(data, bytes); !why.empty())
    fail(op, "{} on {}: {}", data, device.str(), why);
}

// Buffer::release_external for adopted memory: the user's deleter, once. A destructor calls
// it, so an exception is reported and swallowed.
void give_back(void* data, void* ctx) {
  std::unique_ptr<Deleter> d(static_cast<Deleter*>(ctx));
  try {
    (*d)(data);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: the deleter of memory adopted at %p threw (%s); ignored\n", data,
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "kiln: the deleter of memory adopted at %p threw; ignored\n", data);
  }
}

Tensor adopt(void* data, size_t bytes, DType dtype, const Shape& shape, const Shape& strides,
             Device device, Deleter deleter) {
  BufferRef b(new Buffer);
  b->data = data;
  b->bytes = bytes;
  if (deleter) {
    b->external_ctx = new Deleter(std::move(deleter));
    b->release_external = give_back;
    Backend& be = backend_for(device, "from_blob");
    if (be.asynchronous()) b->external_device = &be; // queued kernels may still read it
  }
  return publish(new_realized(dtype, device, std::move(b), Layout{shape, strides, 0}));
}

} // namespace

Tensor from_blob(void* data, size_t bytes, DType dtype, const Shape& shape, const Shape& strides,
                 Device device, Deleter deleter) {
  const Shape s = strides.size() == 0 && shape.size() > 0 ? contiguous_strides(shape) : strides;
  check_adopted("from_blob", data, bytes, dtype, shape, s, device);
  return adopt(data, bytes, dtype, shape, s, device, std::move(deleter));
}

const void* Tensor::data_ptr() const {
  Node* n = arg(*this, "data_ptr");
  note_host_read();
  if (!n->realized()) realize({n});
  backend_for(n->device, "data_ptr").synchronize();
  if (!n->buffer) return nullptr; // an empty value
  wait_written(*n->buffer);       // a download still in flight
  return static_cast<const char*>(n->buffer->data) + n->layout.offset * itemsize(n->dtype);
}

// ---- DLPack ----------------------------------------------------------------------------------

namespace {

// DLPack 0.6 (Debian's) has no bool code; 0.8 added kDLBool = 6, which PyTorch uses.
constexpr uint8_t kDLBoolCode = 6;

DLDataType dl_type(DType t) {
  switch (t) {
  case DType::f32:
    return {kDLFloat, 32, 1};
  case DType::f64:
    return {kDLFloat, 64, 1};
  case DType::f16:
    return {kDLFloat, 16, 1};
  case DType::bf16:
    return {kDLBfloat, 16, 1};
  case DType::i32:
    return {kDLInt, 32, 1};
  case DType::i64:
    return {kDLInt, 64, 1};
  case DType::boolean:
    return {kDLBoolCode, 8, 1};
  }
  return {};
}

std::optional<DType> kiln_type(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  for (DType d :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    const DLDataType x = dl_type(d);
    if (x.code == t.code && x.bits == t.bits) return d;
  }
  return std::nullopt;
}

// What an exported DLManagedTensor owns: a handle to the value, and its shape and strides.
struct Export {
  DLManagedTensor managed{};
  Tensor value;
  std::vector<int64_t> shape, strides;
};

} // namespace

DLManagedTensor* to_dlpack(const Tensor& t) {
  const void* data = t.data_ptr(); // realized, and finished on its device
  Node* n = t.node();
  auto e = std::make_unique<Export>();
  e->value = t;
  e->shape.assign(n->layout.shape.begin(), n->layout.shape.end());
  e->strides.assign(n->layout.strides.begin(), n->layout.strides.end());
  DLTensor& d = e->managed.dl_tensor;
  d.data = const_cast<void*>(data);
  d.device = n->device.is_cuda() ? DLDevice{kDLCUDA, n->device.index} : DLDevice{kDLCPU, 0};
  d.ndim = n->layout.shape.size();
  d.dtype = dl_type(n->dtype);
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  d.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<Export*>(self->manager_ctx);
  };
  return &e.release()->managed;
}

Tensor from_dlpack(DLManagedTensor* m) {
  if (!m) fail("from_dlpack", "the DLManagedTensor is a null pointer");
  const DLTensor& d = m->dl_tensor;
  const std::optional<DType> dtype = kiln_type(d.dtype);
  if (!dtype)
    fail("from_dlpack", "DLPack dtype (code {}, {} bits, {} lanes) has no kiln dtype", d.dtype.code,
         d.dtype.bits, d.dtype.lanes);
  Device device = Device::cpu();
  if (d.device.device_type == kDLCUDA)
    device = Device::cuda(d.device.device_id);
  else if (d.device.device_type != kDLCPU)
    fail("from_dlpack", "DLPack device type {} is neither the CPU nor CUDA",
         int(d.device.device_type));
  if (d.ndim < 0 || (d.ndim > 0 && !d.shape))
    fail("from_dlpack", "a tensor of {} dims without its shape", d.ndim);
  Shape shape, strides;
  for (int i = 0; i < d.ndim; ++i) shape.push_back(d.shape[i]);
  if (d.strides)
    for (int i = 0; i < d.ndim; ++i) strides.push_back(d.strides[i]);
  else
    strides = contiguous_strides(shape);
  void* data = static_cast<char*>(d.data) + d.byte_offset;
  // The producer gives no size: the memory is taken to be exactly what the layout reaches.
  const std::optional<uint64_t> end = reach(shape, strides);
  const size_t bytes = end ? size_t(*end) * itemsize(*dtype) : 0;
  check_adopted("from_dlpack", data, bytes, *dtype, shape, strides, device);
  Deleter release;
  if (m->deleter) release = [m](void*) { m->deleter(m); };
  return adopt(data, bytes, *dtype, shape, strides, device, std::move(release));
}

} // namespace kiln

// Factories: constants, ranges, host data and counter-based random numbers.
#include "engine/ops_common.h"
#include "ir/shape_math.h"

#include <cmath>
#include <memory>

namespace kiln {

using namespace detail;

namespace {

Tensor random(OpCode op, const char* name, const Shape& shape, DType dt,
              std::optional<Device> device) {
  check_extents(name, shape, dt);
  if (!is_floating(dt)) fail(name, "needs a floating-point dtype, got {}", dtype_name(dt));
  Device dev = resolve_device(device, name);
  Node* n = new_node(op, dt, dev, shape);
  EngineState& e = engine();
  n->seed = e.seed;
  n->counter = e.rng_counter;
  e.rng_counter += static_cast<uint64_t>(shape.numel());
  return publish(n);
}

Tensor constant(const char* op, const Shape& shape, Scalar value, DType dtype,
                std::optional<Device> device) {
  check_extents(op, shape, dtype);
  Device dev = resolve_device(device, op);
  Node* n = new_node(OpCode::constant, dtype, dev, shape);
  std::unique_ptr<Node> guard(n); // not yet published: freed if the value is rejected
  set_constant(op, n, value, /*finite_range=*/true);
  return publish(guard.release());
}

} // namespace

Tensor full(const Shape& shape, Scalar value, DType dtype, std::optional<Device> device) {
  return constant("full", shape, value, dtype, device);
}

Tensor zeros(const Shape& shape, DType dtype, std::optional<Device> device) {
  return constant("zeros", shape, 0, dtype, device);
}

Tensor ones(const Shape& shape, DType dtype, std::optional<Device> device) {
  return constant("ones", shape, 1, dtype, device);
}

Tensor zeros_like(const Tensor& a, std::optional<DType> dtype) {
  Node* n = arg(a, "zeros_like");
  return constant("zeros_like", n->layout.shape, 0, dtype.value_or(n->dtype), n->device);
}

Tensor ones_like(const Tensor& a, std::optional<DType> dtype) {
  Node* n = arg(a, "ones_like");
  return constant("ones_like", n->layout.shape, 1, dtype.value_or(n->dtype), n->device);
}

Tensor arange(double start, double stop, double step, DType dtype, std::optional<Device> device) {
  if (step == 0 || !std::isfinite(step))
    fail("arange", "step must be finite and nonzero, got {}", step);
  if (!std::isfinite(start) || !std::isfinite(stop))
    fail("arange", "start and stop must be finite, got {} and {}", start, stop);
  check_dtype("arange", dtype);
  double count = std::ceil((stop - start) / step);
  // 2^63 is exactly representable; anything at or above it is not an int64 count.
  if (!(count < 0x1p63))
    fail("arange", "[{}, {}) in steps of {} has {} elements, more than an int64 can count", start,
         stop, step, count);
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  check_extents("arange", Shape{n}, dtype);
  Device dev = resolve_device(device, "arange");
  Node* node = new_node(OpCode::iota, dtype, dev, Shape{n});
  node->scalar = start;
  node->scalar2 = step;
  return publish(node);
}

Tensor arange(int64_t stop, DType dtype, std::optional<Device> device) {
  return arange(0.0, static_cast<double>(stop), 1.0, dtype, device);
}

Tensor from_data(const void* data, DType dtype, const Shape& shape, std::optional<Device> device) {
  check_extents("from_data", shape, dtype);
  if (!data && shape.numel() > 0)
    fail("from_data", "data is a null pointer but shape {} has {} elements", shape, shape.numel());
  Device dev = resolve_device(device, "from_data");
  Backend& be = backend_for(dev, "from_data");
  size_t bytes = static_cast<size_t>(shape.numel()) * itemsize(dtype);
  BufferRef buf = be.upload(data, bytes, nullptr, nullptr, "from_data");
  return publish(new_realized(dtype, dev, std::move(buf), contiguous_layout(shape)));
}

namespace detail {
void check_host_count(const char* op, size_t count, const Shape& shape) {
  auto span = span_of(shape); // an invalid shape is reported by from_data, with its dtype
  if (span && static_cast<uint64_t>(shape.numel()) != count)
    fail(op, "got {} elements for shape {}, which holds {}", count, shape, shape.numel());
}
} // namespace detail

Tensor rand(const Shape& shape, DType dtype, std::optional<Device> device) {
  return random(OpCode::rand_uniform, "rand", shape, dtype, device);
}

Tensor randn(const Shape& shape, DType dtype, std::optional<Device> device) {
  return random(OpCode::rand_normal, "randn", shape, dtype, device);
}

void manual_seed(uint64_t seed) {
  engine().seed = seed;
  engine().rng_counter = 0;
}

} // namespace kiln

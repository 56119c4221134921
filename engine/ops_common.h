#pragma once
// Helpers shared by the op front-ends: argument checks and node construction.
#include "engine/graph.h"
#include "engine/owner_thread.h"
#include "ir/errors.h"

#include <kiln/ops.h>

namespace kiln::detail {

/// The node of a defined tensor, or an error naming the op.
inline Node* arg(const Tensor& t, const char* op) {
  check_owner_thread(op);
  if (!t.defined()) fail(op, "argument is an undefined tensor");
  return t.node();
}

/// Normalize a possibly negative dim for a tensor of rank `rank` (any width: a wide one out of
/// range is named, not wrapped).
inline int norm_dim(const char* op, int64_t dim, int rank) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    fail(op, "dim {} is out of range for a tensor with {} dimensions", dim, rank);
  return static_cast<int>(d);
}

inline void same_device(const char* op, const Node* a, const Node* b) {
  if (a->device != b->device)
    fail(op, "tensors are on different devices: {} and {}", a->device.str(), b->device.str());
}

inline Device resolve_device(const std::optional<Device>& d, const char* op) {
  check_owner_thread(op);
  Device dev = d ? *d : default_device();
  backend_for(dev, op);
  return dev;
}

/// `t` as dtype `to`, recording a cast only when the dtype differs. Internal casts (operand
/// promotion) fuse into their op even in eager mode.
Tensor cast_to(const Tensor& t, DType to, bool internal = true);
/// t in dtype `to`: t itself where it has it, else its cast recorded into `storage`. Op
/// front-ends read their operands through it: a cast_to that returns t copies a handle (and
/// drops it again) on every op call.
inline const Tensor& as_dtype(const Tensor& t, DType to, Tensor& storage) {
  if (t.dtype() == to) return t;
  storage = cast_to(t, to);
  return storage;
}
/// Store a scalar's value in a constant node (double, and exact int64 for integer dtypes).
/// Throws "[op] ..." when the value has no representation in n's dtype: an integer dtype's range
/// is exceeded or the value is NaN or infinite; with `finite_range`, also a finite value that
/// would round to infinity in a floating dtype (PyTorch's rule for fill values).
void set_constant(const char* op, Node* n, Scalar s, bool finite_range);
/// A 0-d constant of dtype `dt`, an operand of `op`.
Tensor scalar_tensor(const char* op, Scalar s, DType dt, Device dev);
/// A pending view of `a` (or a realized alias when `a` is realized) with layout `l`.
Tensor make_view(const Tensor& a, const ViewPrim& prim, const Layout& l);
/// An internal binary op of the table (sigmoid_grad, tanh_grad) on g and y, with the public
/// binary ops' broadcasting and typing.
Tensor binary_op(OpCode op, const Tensor& g, const Tensor& y);

} // namespace kiln::detail

#pragma once
// Helpers shared by the op front-ends: argument checks and node construction.
#include "engine/errors.h"
#include "engine/graph.h"

#include <kiln/ops.h>

namespace kiln::detail {

/// The node of a defined tensor, or an error naming the op.
inline Node* arg(const Tensor& t, const char* op) {
  if (!t.defined()) fail(op, "argument is an undefined tensor");
  return t.node();
}

/// Normalize a possibly negative dim for a tensor of rank `rank`.
inline int norm_dim(const char* op, int dim, int rank) {
  int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    fail(op, "dim {} is out of range for a tensor with {} dimensions", dim, rank);
  return d;
}

inline void same_device(const char* op, const Node* a, const Node* b) {
  if (a->device != b->device)
    fail(op, "tensors are on different devices: {} and {}", a->device.str(), b->device.str());
}

inline Device resolve_device(const std::optional<Device>& d, const char* op) {
  Device dev = d ? *d : default_device();
  backend_for(dev, op);
  return dev;
}

/// `t` as dtype `to`, recording a cast only when the dtype differs. Internal casts (operand
/// promotion) fuse into their op even in eager mode.
Tensor cast_to(const Tensor& t, DType to, bool internal = true);
/// Store a scalar's value in a constant node (double, and exact int64 for integer dtypes).
void set_constant(Node* n, Scalar s);
/// A 0-d constant of dtype `dt`.
Tensor scalar_tensor(Scalar s, DType dt, Device dev);
/// A pending view of `a` (or a realized alias when `a` is realized) with layout `l`.
Tensor make_view(const Tensor& a, const ViewPrim& prim, const Layout& l);

} // namespace kiln::detail

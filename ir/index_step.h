#pragma once
// IndexStep: gather and scatter_add over values in memory, an unfused step (like GemmStep).
// The planner writes its operands first (their index maps are strided layouts of buffers), so
// a backend reads data-dependent addresses only from memory it knows the extents of.
//
//   gather:      out[p] = x[p with p[dim] = index[p]]            p over the index's shape
//   scatter_add: out = x; out[p with p[dim] = index[p]] += src[p] p over the index's shape
//
// Every backend adds scatter_add's contributions to one output element in increasing p[dim]
// (each thread owns whole fibers along dim), so duplicate indices give the same bits on
// every run and on every device.
#include "ir/layout.h"

#include <kiln/dtype.h>

namespace kiln::detail {

struct IndexStep {
  enum class Op : uint8_t { gather, scatter_add } op = Op::gather;
  bool select = false;            // a gather recorded by index_select: its errors name that op
  DType dtype = DType::f32;       // x, src and out
  DType index_dtype = DType::i64; // i32 or i64
  int dim = 0;
  int x_slot = 0, index_slot = 0, src_slot = -1, out_slot = 0;
  Layout x;        // over x's shape
  Layout index;    // over the index's shape
  Layout src;      // scatter_add: over src's shape (read only where the index has elements)
  Shape out_shape; // gather: the index's shape; scatter_add: x's (contiguous)

  /// The op a user called: "gather", "index_select" or "scatter_add".
  const char* name() const {
    return op == Op::scatter_add ? "scatter_add" : select ? "index_select" : "gather";
  }
};

} // namespace kiln::detail

// The column layout of reductions: a reduction over outer axes (the innermost dim is kept),
// neighbouring output rows ("columns") on neighbouring threads so that a warp's loads are
// coalesced, the rest of the block down the reduced axis (the emitter: Emitter::column_body).
#include "codegen/cuda_codegen_internal.h"

#include <algorithm>

namespace kiln::detail::cg {

int column_vec(const FusedKernel& k, const CudaVariant& v) {
  return v.vec && v.rows_per_block > 1 ? elems_per_vec(k) : 1;
}
int column_rows_per_step(const FusedKernel& k, const CudaVariant& v) {
  const int u = column_vec(k, v) > 1 ? 4 : 8;
  return k.compute_ops() > kMaxCachedRowOps ? u / 2 : u;
}

// Vector accesses along the columns of the column layout (the innermost dim L is kept, some
// outer dim reduced): every memory operand either moves along L with stride 1 from a 16-byte
// aligned base with all its other strides multiples of V (so each thread's V columns, which
// start at a multiple of V along L, are one aligned vector at every row), or, for inputs, is
// constant along L (one element serves the V columns); the extent of L is a multiple of V, so
// V columns never straddle two runs of L. At least one input is read as vectors.
bool column_vec_ok(const FusedKernel& k, llvm::ArrayRef<void*> slot_base) {
  const int last = k.shape.size() - 1;
  if (last < 0 || k.reduce_axes == 0 || (k.reduce_axes & (1u << last))) return false;
  const int V = elems_per_vec(k);
  if (k.shape[last] % V != 0) return false;
  auto vector_ok = [&](const Shape& strides, int slot, int64_t offset, DType dt) {
    if (strides[last] != 1) return false;
    for (int d = 0; d < last; ++d)
      if (strides[d] % V != 0) return false;
    return aligned16(slot_base, slot, offset, dt);
  };
  bool any = false;
  for (const KernelInput& in : k.inputs) {
    if (in.cls == IndexClass::scalar) continue;
    if (in.cls == IndexClass::strided && in.strides[last] == 0) continue; // one element
    if (!vector_ok(in.strides, in.slot, in.offset, in.dtype)) return false;
    any = true;
  }
  for (const KernelOutput& o : k.outputs)
    if (!o.reduced && !vector_ok(o.strides, o.slot, o.offset, o.dtype)) return false;
  return any;
}

// V columns per thread read as 16-byte vectors where column_vec_ok allows. bx threads along
// the columns: 8 with vectors (8 x 16 bytes: a warp reads whole 128-byte lines of 4 rows),
// else 32; fewer when there are fewer columns, so that the rest of the block goes down the
// reduced axis (never 1, which is the row layout). False: not a column reduction.
bool choose_column_reduce(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, CudaVariant& v) {
  if (k.shape.size() == 0) return false;
  const int last = k.shape.size() - 1;
  if ((k.reduce_axes & (1u << last)) || k.shape[last] <= 1) return false;
  v.vec = column_vec_ok(k, slot_base);
  const int V = v.vec ? elems_per_vec(k) : 1;
  int64_t O = 1;
  for (int d = 0; d <= last; ++d)
    if (!(k.reduce_axes & (1u << d))) O *= k.shape[d];
  int bx = v.vec ? 8 : 32;
  while (bx > 2 && int64_t(bx / 2) * V >= O) bx /= 2;
  v.rows_per_block = bx;
  return true;
}

// bx threads along bx * V columns, the rest of the block down the reduced axis while each
// thread still gets a whole step of rows (more threads would only run the one-row loop).
CudaLaunch launch_column_reduce(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  return reduce_launch(k, v, t, column_rows_per_step(k, v), column_vec(k, v));
}

} // namespace kiln::detail::cg

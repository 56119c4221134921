// The row layout of reductions: one output row per block (a grid-stride loop over rows), the
// row's elements split between the block's threads, read as 16-byte vectors where aligned,
// with rows of several passes kept in registers or shared memory (the emitter:
// Emitter::reduce_body).
#include "codegen/cuda_codegen_internal.h"

namespace kiln::detail::cg {

namespace {

// Vector accesses along rows: a reduction over trailing axes (one row per block) whose rows
// are whole vectors (R a multiple of elems_per_vec), every input contiguous over the iteration
// space, scalar or strided (read element by element), and at least one contiguous, aligned one.
bool reduce_vec_ok(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, int rows_per_block) {
  if (rows_per_block != 1 || !trailing_reduce(k)) return false;
  int64_t R = 1;
  for (int d = 0; d < k.shape.size(); ++d)
    if (k.reduce_axes & (1u << d)) R *= k.shape[d];
  const int epv = elems_per_vec(k);
  if (R < epv || R % epv != 0) return false;
  bool any = false;
  for (const KernelInput& in : k.inputs) {
    if (in.cls != IndexClass::contiguous) continue;
    if (!aligned16(slot_base, in.slot, in.offset, in.dtype)) return false;
    any = true;
  }
  for (const KernelOutput& o : k.outputs)
    if (!o.reduced && (!out_contiguous(k, o) || !aligned16(slot_base, o.slot, o.offset, o.dtype)))
      return false;
  return any;
}

// The strided inputs of a vec row layout that can be read as vectors too: contiguous over the
// (trailing) reduced dims, every kept-dim stride a multiple of the vector (0 for a broadcast),
// from a 16-byte aligned base, so that each row's run is whole aligned vectors.
uint32_t vec_inputs(const FusedKernel& k, llvm::ArrayRef<void*> slot_base) {
  const int epv = elems_per_vec(k);
  uint32_t mask = 0;
  for (size_t j = 0; j < k.inputs.size() && j < 32; ++j) {
    const KernelInput& in = k.inputs[j];
    if (in.cls != IndexClass::strided) continue;
    bool ok = aligned16(slot_base, in.slot, in.offset, in.dtype);
    int64_t run = 1; // the stride a contiguous run has at dim d
    for (int d = k.shape.size() - 1; ok && d >= 0; --d) {
      if (k.reduce_axes & (1u << d)) {
        ok = k.shape[d] == 1 || in.strides[d] == run;
        run *= k.shape[d];
      } else {
        ok = in.strides[d] % epv == 0;
      }
    }
    if (ok) mask |= 1u << j;
  }
  return mask;
}

} // namespace

int64_t shared_row_bytes(const FusedKernel& k) {
  int64_t R = 1;
  for (int d = 0; d < k.shape.size(); ++d)
    if (k.reduce_axes & (1u << d)) R *= k.shape[d];
  int64_t bytes = 0;
  for (const KernelInput& in : k.inputs)
    if (in.cls == IndexClass::contiguous) bytes += R * itemsize(in.dtype);
  return bytes;
}

void choose_row_reduce(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, CudaVariant& v) {
  v.vec = reduce_vec_ok(k, slot_base, v.rows_per_block);
  if (v.vec) v.vec_inputs = vec_inputs(k, slot_base);
  // Rows of several passes whose vectors fit in a few registers per thread are read once.
  // Only for short tapes: every pass unrolls over the cached vectors, and a long tape
  // (layer_norm's nine ops with strided weight loads) then spills and runs slower than
  // re-reading the row from cache (measured on the H100: 80% -> 63% of copy bandwidth).
  if (v.vec && reduce_passes(k).passes > 1 && k.compute_ops() <= kMaxCachedRowOps) {
    int64_t R = 1;
    for (int d = 0; d < k.shape.size(); ++d)
      if (k.reduce_axes & (1u << d)) R *= k.shape[d];
    const int64_t per_block = int64_t(kBlock) * elems_per_vec(k);
    int cached = 1;
    while (cached * per_block < R && cached < kMaxCachedVecs) cached *= 2;
    if (cached * per_block >= R) v.cached_vecs = cached;
  }
  // Otherwise a row that fits in shared memory is kept there (layer_norm: 3 passes over
  // each row read memory once).
  if (v.vec && v.cached_vecs == 0 && reduce_passes(k).passes > 1) {
    const int64_t bytes = shared_row_bytes(k);
    v.smem_row = bytes > 0 && bytes <= kMaxSharedRowBytes;
  }
}

// As many threads as the row has elements (vectors), up to the block size (at least a warp).
CudaLaunch launch_row_reduce(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  CudaLaunch l = reduce_launch(k, v, t, v.vec ? elems_per_vec(k) : 1, 1);
  if (v.smem_row) l.shared_bytes = static_cast<uint32_t>(shared_row_bytes(k));
  return l;
}

} // namespace kiln::detail::cg

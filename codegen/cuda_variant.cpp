// Variant choice and launch shapes, across the layouts: which layout a kernel takes and the
// fields of its variant (each layout's own rule and launch shape are in codegen/layouts/), the
// index width every layout shares, and the variant's part of the kernel's identity.
#include "codegen/cuda_codegen_internal.h"
#include "ir/kernel_key.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace kiln::detail {

namespace cg {

bool aligned16(llvm::ArrayRef<void*> slot_base, int slot, int64_t offset, DType dt) {
  if (slot < 0 || static_cast<size_t>(slot) >= slot_base.size()) return false;
  uintptr_t p = reinterpret_cast<uintptr_t>(slot_base[slot]) + offset * itemsize(dt);
  return p % 16 == 0;
}

// Row layout: one row per block (grid-stride over rows), column layout: bx threads side by
// side along bx * V columns. The rest of the block goes down the reduced axis while each
// thread still gets a whole step of `per_thread` elements.
CudaLaunch reduce_launch(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t,
                         int64_t per_thread, int V) {
  CudaLaunch l;
  CgPlan pl = cuda_make_plan(k, {});
  const int64_t O = static_cast<int64_t>(pl.fields[0].bits),
                R = static_cast<int64_t>(pl.fields[1].bits);
  const int bx = v.rows_per_block;
  int by = 1;
  while (bx * by < kBlock && by * per_thread < R) by *= 2;
  l.block = static_cast<uint32_t>(std::max(32, bx * by));
  const int64_t cols = int64_t(bx) * V;
  const int64_t row_blocks = (O + cols - 1) / cols;
  const int sms = std::max(1, t.sm_count);
  l.grid =
      static_cast<uint32_t>(std::min<int64_t>(row_blocks, int64_t(sms) * (2048 / l.block) * 2));
  return l;
}

} // namespace cg

using namespace cg; // the internals of cuda_codegen_internal.h

namespace {

// The largest |offset| (elements) an operand reaches over `shape` with these strides.
int64_t reach(const Shape& shape, const Shape& strides) {
  int64_t r = 0;
  for (int d = 0; d < shape.size(); ++d)
    r += (shape[d] > 0 ? shape[d] - 1 : 0) * (strides[d] < 0 ? -strides[d] : strides[d]);
  return r;
}

// The variant's part of a kernel's identity, one visit for the key text and the in-memory
// bytes (the sinks of ir/kernel_key.h). Fields at their defaults add no text. The column
// layout's rows per step and the outputs' contiguity are derived from k and v, but are in the
// key text so that disk caches tell apart kernels from before they existed.
template <class Sink> void visit_variant(const FusedKernel& k, const CudaVariant& v, Sink& s) {
  if (k.segmented()) { // the segments' variants in order
    for (int i = 0; i < static_cast<int>(k.segments.size()); ++i)
      visit_variant(k.segment(i), v.segments[i], s);
    return;
  }
  s.field(' ', 0, [] { return std::string("|"); });
  int64_t outc_bits = 0;
  for (size_t i = 0; i < k.outputs.size(); ++i)
    outc_bits |= int64_t(out_contiguous(k, k.outputs[i])) << i;
  s.field(' ', outc_bits, [&] {
    std::string t = "outc:";
    for (const KernelOutput& o : k.outputs) t += out_contiguous(k, o) ? 'c' : 's';
    return t;
  });
  s.field(' ', v.index32, [&] { return std::string(v.index32 ? "i32" : "i64"); });
  const bool column = v.rows_per_block > 1;
  s.field(column ? ' ' : 0, v.rows_per_block, [&] {
    return column ? fmt::format("bx{} u{}", v.rows_per_block, column_rows_per_step(k, v))
                  : std::string();
  });
  auto optional = [&](bool on, int64_t code, auto text) {
    s.field(on ? ' ' : 0, code, [&] { return on ? text() : std::string(); });
  };
  // (tile_inputs without tile_dim is never chosen; shown all the same, as the bytes have it)
  const bool tiled = v.tile_dim >= 0 || v.tile_inputs;
  optional(tiled, v.tile_dim + 1, [&] { return fmt::format("tile{}", v.tile_dim); });
  s.field(tiled ? ':' : 0, v.tile_inputs,
          [&] { return tiled ? fmt::format("{:x}", v.tile_inputs) : std::string(); });
  optional(v.cached_vecs > 0, v.cached_vecs, [&] { return fmt::format("rc{}", v.cached_vecs); });
  optional(v.smem_row, v.smem_row, [] { return std::string("srow"); });
  optional(v.vec_inputs != 0, v.vec_inputs, [&] { return fmt::format("rv{:x}", v.vec_inputs); });
  optional(v.splat_inputs != 0, v.splat_inputs,
           [&] { return fmt::format("sp{:x}", v.splat_inputs); });
  optional(v.vec, v.vec, [&] { return fmt::format("vec{}", elems_per_vec(k)); });
  optional(v.vec_group > 0, v.vec_group, [&] { return fmt::format("grp{}", v.vec_group); });
  optional(v.dot_bx != 0, v.dot_bx, [&] { return fmt::format("dot{}", v.dot_bx); });
  optional(v.dot_cluster > 1, v.dot_cluster, [&] { return fmt::format("cl{}", v.dot_cluster); });
  optional(v.gemm_tile > 0, v.gemm_tile, [&] { return fmt::format("gemm{}", v.gemm_tile); });
  optional(v.gemm_short_dots != 0, v.gemm_short_dots,
           [&] { return fmt::format("sd{:x}", v.gemm_short_dots); });
  optional(v.gemm_a_along_k != 0, v.gemm_a_along_k,
           [&] { return fmt::format("ak{:x}", v.gemm_a_along_k); });
  optional(v.gemm_b_along_k != 0, v.gemm_b_along_k,
           [&] { return fmt::format("bk{:x}", v.gemm_b_along_k); });
}

} // namespace

void append_variant(const FusedKernel& k, const CudaVariant& v, llvm::SmallVectorImpl<char>& out) {
  SignatureBytes b{out};
  visit_variant(k, v, b);
}

std::string variant_key(const FusedKernel& k, const CudaVariant& v) {
  KeyText t;
  visit_variant(k, v, t);
  return std::move(t.out);
}

CudaLayout layout_of(const FusedKernel& k, const CudaVariant& v) {
  if (k.kind == FusedKernel::Kind::reduce)
    return v.rows_per_block > 1 ? CudaLayout::column_reduce : CudaLayout::row_reduce;
  if (!k.dots.empty()) return v.gemm_tile > 0 ? CudaLayout::gemm_tile : CudaLayout::dot;
  return v.tile_dim >= 0 ? CudaLayout::tiled : CudaLayout::elementwise;
}

CudaVariant choose_variant(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                           const CudaTarget& t) {
  if (k.segmented()) return choose_segmented(k, slot_base, t);
  CudaVariant v;
  const int64_t blocks = 2 * int64_t(std::max(1, t.sm_count)); // about two per SM
  // 32-bit indices: the flat index plus a grid-stride step, and every offset, fit in int32.
  constexpr int64_t kMax32 = (int64_t(1) << 31) - (int64_t(1) << 26) - 1;
  int64_t n = k.shape.numel();
  bool fits = n <= kMax32;
  for (const KernelInput& in : k.inputs) fits &= reach(k.shape, in.strides) <= kMax32;
  for (const KernelOutput& o : k.outputs)
    if (!o.reduced) fits &= reach(k.shape, o.strides) <= kMax32;
  for (const KernelDot& d : k.dots) // a dot also reaches K - 1 rows past each element's start
    for (int j : {d.a, d.b})
      fits &= reach(k.shape, k.inputs[j].strides) +
                  (d.K > 0 ? d.K - 1 : 0) * std::abs(j == d.a ? d.a_k : d.b_k) <=
              kMax32;
  v.index32 = fits;
  if (!k.dots.empty()) {
    if (!choose_gemm_tile(k, v, blocks)) choose_dot(k, v, blocks);
  } else if (k.kind == FusedKernel::Kind::reduce) {
    if (!choose_column_reduce(k, slot_base, v)) choose_row_reduce(k, slot_base, v);
  } else if (!choose_tiled(k, v)) {
    choose_elementwise(k, slot_base, t.sm_count, v);
    // A block per N vectors steps the loop by about the whole index range: 32-bit indices
    // need room for twice it.
    if (v.vec && (!v.index32 || 2 * n <= kMax32)) v.vec_group = elementwise_vec_group(k, t);
  }
  return v;
}

CudaLaunch launch_for(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  if (k.segmented()) return launch_segmented(k, v);
  switch (layout_of(k, v)) {
  case CudaLayout::elementwise:
    return launch_elementwise(k, v, t);
  case CudaLayout::tiled:
    return launch_tiled(k, v, t);
  case CudaLayout::dot:
    return launch_dot(k, v, t);
  case CudaLayout::gemm_tile:
    return launch_gemm_tile(k, v, t);
  case CudaLayout::row_reduce:
    return launch_row_reduce(k, v, t);
  case CudaLayout::column_reduce:
    return launch_column_reduce(k, v, t);
  }
  return {};
}

} // namespace kiln::detail

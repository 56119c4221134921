// Variant choice and launch shapes: the CudaVariant a launch takes (index width, 16-byte
// vectors, the row or column layout of a reduction, tiling, cached rows), decided from the
// kernel's shape and strides and its pointers' alignment, and the grid and block each variant
// launches with. The per-variant numbers the emitter shares (elems_per_vec, column_vec,
// column_rows_per_step) are here too, next to the choices that depend on them.
#include "codegen/cuda_codegen_internal.h"
#include "ir/kernel_key.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace kiln::detail {

namespace {

constexpr int kMaxCachedVecs = 8;   // registers per thread for a cached row: 8 x 16 bytes per input
constexpr int kMaxCachedRowOps = 8; // longest tape that keeps its rows in registers

} // namespace

namespace cg {

int elems_per_vec(const FusedKernel& k) {
  int narrowest = 8;
  for (const KernelInput& in : k.inputs)
    if (in.cls != IndexClass::scalar) narrowest = std::min(narrowest, itemsize(in.dtype));
  for (const KernelOutput& o : k.outputs) narrowest = std::min(narrowest, itemsize(o.dtype));
  return std::clamp(16 / narrowest, 4, 8);
}

int column_vec(const FusedKernel& k, const CudaVariant& v) {
  return v.vec && v.rows_per_block > 1 ? elems_per_vec(k) : 1;
}
int column_rows_per_step(const FusedKernel& k, const CudaVariant& v) {
  const int u = column_vec(k, v) > 1 ? 4 : 8;
  return k.compute_ops() > kMaxCachedRowOps ? u / 2 : u;
}

int64_t shared_row_bytes(const FusedKernel& k) {
  int64_t R = 1;
  for (int d = 0; d < k.shape.size(); ++d)
    if (k.reduce_axes & (1u << d)) R *= k.shape[d];
  int64_t bytes = 0;
  for (const KernelInput& in : k.inputs)
    if (in.cls == IndexClass::contiguous) bytes += R * itemsize(in.dtype);
  return bytes;
}

bool gemm_f64(const FusedKernel& k) {
  return !k.dots.empty() && k.inputs[k.dots[0].a].dtype == DType::f64;
}

int gemm_bk(const FusedKernel& k, const CudaVariant& v) {
  return v.gemm_tile > 0 ? std::min(64, (gemm_f64(k) ? 1024 : 2048) / v.gemm_tile) : 0;
}

int gemm_groups(const CudaVariant& v) {
  const int threads_per_edge = v.gemm_tile / kGemmRegTile;
  return kBlock / (threads_per_edge * threads_per_edge);
}

int64_t gemm_smem_elems(const FusedKernel& k, const CudaVariant& v) {
  const int T = v.gemm_tile, BK = gemm_bk(k, v), G = gemm_groups(v);
  const int64_t chunks = int64_t(2) * BK * (T + kGemmRegTile + T);
  const int64_t sums = int64_t(k.dots.size()) * T * T + (G > 1 ? int64_t(G) * T * T : 0);
  return std::max(chunks, sums);
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

bool aligned16(llvm::ArrayRef<void*> slot_base, int slot, int64_t offset, DType dt) {
  if (slot < 0 || static_cast<size_t>(slot) >= slot_base.size()) return false;
  uintptr_t p = reinterpret_cast<uintptr_t>(slot_base[slot]) + offset * itemsize(dt);
  return p % 16 == 0;
}

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

// Tiling pays when an input is read with stride 1 along some dim other than the last while
// the outputs are written along the last (a transpose): without it one of the two sides is
// uncoalesced. Picks the dim that the most inputs are transposed along.
void choose_tiling(const FusedKernel& k, CudaVariant& v) {
  const int rank = k.shape.size();
  if (rank < 2 || k.shape.numel() < 1024) return;
  const int last = rank - 1;
  for (const KernelOutput& o : k.outputs)
    if (!is_contiguous(Layout{k.shape, o.strides, 0})) return;
  if (k.shape[last] < 8) return;
  int best = 0;
  for (int d = 0; d < last; ++d) {
    if (k.shape[d] < 8) continue;
    uint32_t mask = 0;
    int count = 0;
    for (size_t j = 0; j < k.inputs.size() && j < 32; ++j) {
      const KernelInput& in = k.inputs[j];
      if (in.cls == IndexClass::strided && in.strides[d] == 1 && in.strides[last] != 1 &&
          in.strides[last] != 0) {
        mask |= 1u << j;
        ++count;
      }
    }
    if (count > best) {
      best = count;
      v.tile_dim = d;
      v.tile_inputs = mask;
    }
  }
}

// The GEMM-tile layout (Emitter::gemm_body) takes kernels over [batch..., M, N] with more
// than kGemmMinRows rows per matrix (fewer: the dot layout, which splits each element's K over
// a block) whose every dot reads row m of A and column n of B at element (m, n), through
// strided index maps, all with one accumulator type. The tile: the smallest of 16, 32 and 64
// that keeps the grid within ~two blocks per SM (`blocks`; 264 on the H100); a block's 256 threads
// then split each K chunk between 16, 4 or 1 groups (gemm_groups). Clusters of up to 8 blocks split
// K further while the grid stays within that and every block keeps two chunks of K. Measured by
// hand-written variants of the seed step and seven other shapes, side by side
// (tools/gemm-tile/seed_lab.cu; bench/results/2026-11-22-h100-gemm-k-groups.md): the seed
// loop's 256 x 256 x 256 takes 5.5 us per step in tiles of 16 (256 blocks), 5.8 in tiles of
// 32 with clusters of 2 and 7.1 in tiles of 64 with clusters of 8; 512 x 128 x 256 (512
// tiles of 16) is fastest in tiles of 32. False when no tile's shared memory fits the 48 KB a
// launch gets without opting in.
constexpr int64_t kGemmMinRows = 4;
constexpr int64_t kGemmMaxSharedBytes = int64_t(48) << 10;

bool choose_gemm_tile(const FusedKernel& k, CudaVariant& v, int64_t blocks) {
  const int r = k.shape.size();
  if (r < 2 || k.shape[r - 2] <= kGemmMinRows) return false;
  const bool f64 = gemm_f64(k);
  int64_t max_k = 0;
  for (const KernelDot& d : k.dots) {
    const KernelInput &a = k.inputs[d.a], &b = k.inputs[d.b];
    if (a.cls != IndexClass::strided || b.cls != IndexClass::strided) return false;
    if (a.strides[r - 1] != 0 || b.strides[r - 2] != 0) return false;
    if ((a.dtype == DType::f64) != f64 || (b.dtype == DType::f64) != f64) return false;
    max_k = std::max(max_k, d.K);
  }
  const int64_t M = k.shape[r - 2], N = k.shape[r - 1];
  if (N <= 0) return false; // (M > 4 above)
  const int64_t batch = k.shape.numel() / (M * N);
  auto tiles = [&](int T) { return batch * ((M + T - 1) / T) * ((N + T - 1) / T); };
  auto fits = [&](int T) {
    CudaVariant t;
    t.gemm_tile = T;
    return gemm_smem_elems(k, t) * (f64 ? 8 : 4) <= kGemmMaxSharedBytes;
  };
  int T = 0;
  for (int t : {16, 32, 64})
    if (fits(t) && (T == 0 || tiles(T) > blocks)) T = t;
  if (T == 0) return false;
  v.gemm_tile = T;
  const int BK = gemm_bk(k, v);
  while (v.dot_cluster < 8 && tiles(T) * v.dot_cluster * 2 <= blocks &&
         max_k >= int64_t(v.dot_cluster) * 4 * BK)
    v.dot_cluster *= 2;
  return true;
}

// The variant's part of a kernel's identity, one visit for the key text and the in-memory
// bytes (the sinks of ir/kernel_key.h). Fields at their defaults add no text. The column
// layout's rows per step and the outputs' contiguity are derived from k and v, but are in the
// key text so that disk caches tell apart kernels from before they existed.
template <class Sink> void visit_variant(const FusedKernel& k, const CudaVariant& v, Sink& s) {
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
  optional(v.dot_bx != 0, v.dot_bx, [&] { return fmt::format("dot{}", v.dot_bx); });
  optional(v.dot_cluster > 1, v.dot_cluster, [&] { return fmt::format("cl{}", v.dot_cluster); });
  optional(v.gemm_tile > 0, v.gemm_tile, [&] { return fmt::format("gemm{}", v.gemm_tile); });
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

CudaVariant choose_variant(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                           const CudaTarget& t) {
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
    if (choose_gemm_tile(k, v, blocks)) return v;
    // Dot layout: dot_bx elements side by side (neighbouring columns of B: 8 x 4 bytes fill a
    // 32-byte sector), the rest of the block down K. Wider when there are elements enough to
    // give every SM blocks anyway.
    v.dot_bx = 8;
    while (v.dot_bx < 32 && n >= int64_t(v.dot_bx) * blocks) v.dot_bx *= 2;
    // Few element groups (an LSTM's 256 hidden units are 32 of them): their blocks would each
    // stream a large share of B through one SM, whose loads in flight are capped, while most
    // SMs idle (the LSTM cell took 14.5 us in 32 blocks under ncu). A cluster of up to 8
    // blocks per group splits K further, up to ~two blocks per SM, while every thread
    // keeps at least one k.
    const int64_t groups = (n + v.dot_bx - 1) / v.dot_bx;
    int64_t max_k = 0;
    for (const KernelDot& d : k.dots) max_k = std::max(max_k, d.K);
    const int by = kBlock / v.dot_bx;
    while (v.dot_cluster < 8 && groups * v.dot_cluster * 2 <= blocks &&
           int64_t(by) * v.dot_cluster * 2 <= max_k)
      v.dot_cluster *= 2;
    return v;
  }
  // A reduction over outer axes (the innermost dim is kept) takes the column layout:
  // neighbouring output rows on neighbouring threads, so that a warp's loads are coalesced,
  // with V columns per thread read as 16-byte vectors where column_vec_ok allows. bx threads
  // along the columns: 8 with vectors (8 x 16 bytes: a warp reads whole 128-byte lines of 4
  // rows), else 32; fewer when there are fewer columns, so that the rest of the block goes down
  // the reduced axis (never 1, which is the row layout).
  if (k.kind == FusedKernel::Kind::reduce && k.shape.size() > 0) {
    const int last = k.shape.size() - 1;
    if (!(k.reduce_axes & (1u << last)) && k.shape[last] > 1) {
      v.vec = column_vec_ok(k, slot_base);
      const int V = v.vec ? elems_per_vec(k) : 1;
      int64_t O = 1;
      for (int d = 0; d <= last; ++d)
        if (!(k.reduce_axes & (1u << d))) O *= k.shape[d];
      int bx = v.vec ? 8 : 32;
      while (bx > 2 && int64_t(bx / 2) * V >= O) bx /= 2;
      v.rows_per_block = bx;
      return v;
    }
  }
  if (k.kind == FusedKernel::Kind::reduce) {
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
    return v;
  }
  choose_tiling(k, v);
  if (v.tile_dim >= 0) return v;
  // Vector accesses: elementwise, every output contiguous and 16-byte aligned, every input
  // scalar, contiguous and aligned, or strided such that each vector's elements (consecutive
  // along the last dim, never straddling a row: its extent is a multiple of the vector) are
  // one aligned vector of it (stride 1 along the last dim, the other strides multiples of the
  // vector) or one element (stride 0 along the last dim).
  const int epv = elems_per_vec(k);
  if (n < epv) return v;
  const int last = k.shape.size() - 1;
  bool vec = true;
  for (size_t j = 0; j < k.inputs.size(); ++j) {
    const KernelInput& in = k.inputs[j];
    if (in.cls == IndexClass::scalar) continue;
    if (in.cls == IndexClass::contiguous) {
      vec &= aligned16(slot_base, in.slot, in.offset, in.dtype);
      continue;
    }
    if (j >= 32 || last < 0 || k.shape[last] % epv != 0) {
      vec = false;
      break;
    }
    bool whole = in.strides[last] == 1 && aligned16(slot_base, in.slot, in.offset, in.dtype);
    for (int d = 0; d < last; ++d) whole &= in.strides[d] % epv == 0;
    if (whole)
      v.vec_inputs |= 1u << j;
    else if (in.strides[last] == 0)
      v.splat_inputs |= 1u << j;
    else
      vec = false;
  }
  for (const KernelOutput& o : k.outputs)
    vec &= out_contiguous(k, o) && aligned16(slot_base, o.slot, o.offset, o.dtype);
  v.vec = vec;
  if (!vec) v.vec_inputs = v.splat_inputs = 0;
  return v;
}

CudaLaunch launch_for(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  CudaLaunch l;
  int sms = std::max(1, t.sm_count);
  if (k.kind == FusedKernel::Kind::reduce) {
    CgPlan pl = cuda_make_plan(k, {});
    int64_t O = static_cast<int64_t>(pl.fields[0].bits),
            R = static_cast<int64_t>(pl.fields[1].bits);
    const int bx = v.rows_per_block;
    // Row layout: one row per block (grid-stride over rows); it gets as many threads as it has
    // elements (vectors), up to the block size (at least a warp). Column layout: bx threads
    // along bx * V columns, the rest of the block down the reduced axis while each thread still
    // gets a whole step of rows (more threads would only run the one-row loop).
    int by = 1;
    const int64_t per_thread = bx > 1 ? column_rows_per_step(k, v) : v.vec ? elems_per_vec(k) : 1;
    while (bx * by < kBlock && by * per_thread < R) by *= 2;
    l.block = static_cast<uint32_t>(std::max(32, bx * by));
    const int64_t cols = int64_t(bx) * column_vec(k, v);
    int64_t row_blocks = (O + cols - 1) / cols;
    l.grid =
        static_cast<uint32_t>(std::min<int64_t>(row_blocks, int64_t(sms) * (2048 / l.block) * 2));
    if (v.smem_row) l.shared_bytes = static_cast<uint32_t>(shared_row_bytes(k));
    return l;
  }
  int64_t n = k.shape.numel();
  if (v.gemm_tile > 0) { // x: column tiles (a cluster each), y: row tiles, z: matrices
    const int T = v.gemm_tile, r = k.shape.size(), c = t.arch >= 90 ? v.dot_cluster : 1;
    const int64_t M = k.shape[r - 2], N = k.shape[r - 1];
    if (n == 0) {
      l.grid = 0;
      return l;
    }
    constexpr int64_t kMaxYZ = 65535; // more row tiles or matrices: blocks loop over them
    l.block = kBlock;
    l.grid = static_cast<uint32_t>((N + T - 1) / T * c);
    l.grid_y = static_cast<uint32_t>(std::min((M + T - 1) / T, kMaxYZ));
    l.grid_z = static_cast<uint32_t>(std::min(n / (M * N), kMaxYZ));
    return l;
  }
  if (v.dot_bx > 0) { // whole clusters (dot_cluster blocks each, on sm_90+)
    const int c = t.arch >= 90 ? v.dot_cluster : 1;
    l.block = kBlock;
    l.grid = static_cast<uint32_t>(
        std::min<int64_t>((n + v.dot_bx - 1) / v.dot_bx, int64_t(sms) * (2048 / kBlock) / c) * c);
    return l;
  }
  if (v.tile_dim >= 0 && n > 0) {
    const int64_t D = k.shape[v.tile_dim], L = k.shape[k.shape.size() - 1];
    const int64_t tiles = n / (D * L) * ((D + 31) / 32) * ((L + 31) / 32);
    l.block = kBlock;
    l.grid = static_cast<uint32_t>(std::min<int64_t>(tiles, int64_t(sms) * 8));
    return l;
  }
  int64_t per_block = int64_t(kBlock) * (v.vec ? elems_per_vec(k) : 1);
  l.block = kBlock;
  l.grid =
      static_cast<uint32_t>(std::min<int64_t>((n + per_block - 1) / per_block, int64_t(sms) * 8));
  return l; // grid 0 (n == 0): nothing to launch
}

} // namespace kiln::detail

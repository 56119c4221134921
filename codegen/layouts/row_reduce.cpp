// The row layout of reductions: one output row per block (a grid-stride loop over rows), the
// row's elements split between the block's threads, read as 16-byte vectors where aligned,
// with rows of several passes kept in registers or shared memory (the emitter:
// Emitter::reduce_body).
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

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
  // Rows of several passes whose vectors fit in a few registers per thread are read once,
  // every vector of the row in flight at once. Short tapes always; a longer one (layer_norm's
  // nine ops) only where a copy of its row in shared memory would leave room for fewer blocks
  // than an SM holds. Measured on the H100, layer_norm over 8192 columns: f32 rows (32 KB)
  // 82% -> 94% of copy bandwidth in registers; bf16 rows (16 KB) 78% in shared memory, 73% in
  // registers (64 registers a thread: half the blocks). Rows too long for shared memory are
  // read again by each pass, as before: in registers they would take more than 100 registers a
  // thread (f64 over 8192 columns: 114), not measured.
  const int64_t row_bytes = shared_row_bytes(k);
  const bool cache_row =
      k.compute_ops() <= kMaxCachedRowOps ||
      (row_bytes > kFullOccupancySharedRowBytes && row_bytes <= kMaxSharedRowBytes);
  if (v.vec && reduce_passes(k).passes > 1 && cache_row) {
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

// ---- the emitter ---------------------------------------------------------------------------

// Row layout (rows_per_block 1): one output row per block, threads stride along the row,
// partial accumulators combined by warp shuffles. Each row is walked once per pass (see
// ReducePasses): values are recomputed, and their loads hit the cache, rather than kept
// (except cached_vecs); a reduction's result is a row variable from the pass after the one
// that folds it.
void Emitter::reduce_body() {
  ReduceState st;
  st.rp = reduce_passes(k_);
  st.consts = row_constants();
  hoist_ = &st.consts;
  st.reds = reductions();
  reduce_declare_shared(st.reds);
  line(1, "const idx_t O = (idx_t)p.O, R = (idx_t)p.R;");
  line(1, "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x "
          ">> 5;");
  line(1, "const int tx = 0, ty = threadIdx.x, by = blockDim.x;");
  if (v_.smem_row) reduce_shared_row_pointers();
  open_output_loop(1, "const idx_t o = ob + tx;");
  if (v_.cached_vecs > 0) reduce_cache_row();
  for (st.pass = 0; st.pass < st.rp.passes; ++st.pass) reduce_pass(st);
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (k_.outputs[j].reduced)
      line(2, fmt::format("if (ty == 0 && valid) p.out{}[o] = {};", j, stored(j)));
  line(2, "__syncthreads(); // the shared accumulators are reused by the next row");
  line(1, "}");
  hoist_ = nullptr;
}

// One slot per warp for each reduction's partial accumulator (and argmax index): combine()
// meets the warps' results there.
void Emitter::reduce_declare_shared(const std::vector<Red>& reds) {
  for (const Red& r : reds) {
    line(1, fmt::format("__shared__ {} k_s{}[32];", r.A, r.t));
    if (r.arg) line(1, fmt::format("__shared__ long long k_sa{}[32];", r.t));
  }
}

// smem_row: the row of each contiguous input kept in dynamic shared memory, one after the other
// (R elements each), so that the passes after the first read it there instead of from memory.
void Emitter::reduce_shared_row_pointers() {
  const int epv = elems_per_vec(k_);
  line(1, "extern __shared__ __align__(16) unsigned char k_smem[];");
  std::string at = "k_smem";
  for (size_t j = 0; j < pl_.in.size(); ++j) {
    if (pl_.in[j].mode != M::contiguous) continue;
    const std::string t = cg::st_name(k_.inputs[j].dtype);
    line(1,
         fmt::format("k_vec<{0}, {1}>* const k_srow{2} = reinterpret_cast<k_vec<{0}, {1}>*>({3});",
                     t, epv, j, at));
    at = fmt::format("(unsigned char*)(k_srow{} + R / {})", j, epv);
  }
}

// cached_vecs: the thread's vectors of the row's contiguous inputs (c = ty + u * by), loaded
// into registers once and read by every pass.
void Emitter::reduce_cache_row() {
  const int epv = elems_per_vec(k_), cached = v_.cached_vecs;
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (pl_.in[j].mode == M::contiguous)
      line(2, fmt::format("k_vec<{}, {}> k_row{}[{}];", cg::st_name(k_.inputs[j].dtype), epv, j,
                          cached));
  line(2, "#pragma unroll");
  line(2, fmt::format("for (int u = 0; u < {}; ++u) {{", cached));
  line(3, "const idx_t c = ty + u * by;");
  line(3, fmt::format("if (!valid || c >= R / {}) break;", epv));
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (pl_.in[j].mode == M::contiguous)
      line(3, fmt::format("k_row{1}[u] = *reinterpret_cast<const k_vec<{0}, {2}>*>(p.in{1} + "
                          "o * R + c * {2});",
                          cg::st_name(k_.inputs[j].dtype), j, epv));
  line(2, "}");
}

// One pass over the row: the row constants it needs, the accumulators of the reductions it
// folds, the threads' strided walk along the row (whole vectors in the vec variant), and the
// block combine that makes each result a row value v<t> for the passes after this one.
void Emitter::reduce_pass(const ReduceState& st) {
  row_constants_of(2, st.consts, st.rp, st.pass);
  for (const Red& r : st.reds) {
    if (!folded_in_pass(st, r)) continue;
    line(2, fmt::format("{} acc{} = {};", r.A, r.t, r.init));
    if (r.arg) line(2, fmt::format("long long arg{} = -1;", r.t));
  }
  if (v_.vec) {
    reduce_vector_loop(st);
  } else {
    line(2, "#pragma unroll 4"); // several loads in flight per thread (column layout)
    line(2, "for (idx_t r = ty; valid && r < R; r += by) {");
    line(3, "const idx_t i = o * R + r;");
    reduce_element(
        3, st, [&](int j) { return element_load(j); }, false);
    line(2, "}");
  }
  for (const Red& r : st.reds)
    if (folded_in_pass(st, r)) combine(2, r);
}

// The vec variant's walk along the row, whose start is 16-byte aligned (R is a multiple of
// epv): whole vectors only, each thread's c = ty + u * by. Per vector: its loads, then its epv
// elements (reduce_element()), whose elementwise outputs gather into one vector store and whose
// half sums add up in a float partial first, folded into the double accumulator once.
void Emitter::reduce_vector_loop(const ReduceState& st) {
  const int epv = elems_per_vec(k_), cached = v_.cached_vecs;
  if (cached > 0) { // the row's vectors of this thread: c = ty + u * by, u < cached
    line(2, "#pragma unroll");
    line(2, fmt::format("for (int u = 0; u < {}; ++u) {{", cached));
    line(3, "const idx_t c = ty + u * by;");
    line(3, fmt::format("if (!valid || c >= R / {}) break;", epv));
  } else {
    line(2, "#pragma unroll 2"); // loads of the next vector issue before this one's folds
    line(2, fmt::format("for (idx_t c = ty; valid && c < R / {0}; c += by) {{", epv));
  }
  reduce_vector_loads(st, epv);
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (stored_in_pass(st, j))
      line(3, fmt::format("k_vec<{}, {}> y{};", cg::st_name(k_.outputs[j].dtype), epv, j));
  for (const Red& r : st.reds)
    if (r.half_sum && folded_in_pass(st, r)) line(3, fmt::format("float pacc{} = 0;", r.t));
  line(3, "#pragma unroll");
  line(3, fmt::format("for (int e = 0; e < {}; ++e) {{", epv));
  line(4, "const idx_t i = i0 + e, r = c * " + std::to_string(epv) + " + e;");
  reduce_element(
      4, st,
      [&](int j) {
        return pl_.in[j].mode == M::contiguous || vec_input(j) ? fmt::format("x{}.v[e]", j)
                                                               : element_load(j);
      },
      true);
  line(3, "}");
  for (const Red& r : st.reds)
    if (r.half_sum && folded_in_pass(st, r))
      line(3, fmt::format("acc{0} += (double)pacc{0};", r.t));
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (stored_in_pass(st, j))
      line(3, fmt::format("*reinterpret_cast<k_vec<{}, {}>*>(p.out{} + i0) = y{};",
                          cg::st_name(k_.outputs[j].dtype), epv, j, j));
  line(2, "}");
}

// Vector c of the row of each contiguous input (from the register cache, from shared memory
// after the first pass with smem_row, else from memory; pass 0 fills shared memory), and of
// each vec_input read through its strides.
void Emitter::reduce_vector_loads(const ReduceState& st, int epv) {
  line(3, fmt::format("const idx_t i0 = o * R + c * {};", epv));
  for (size_t j = 0; j < pl_.in.size(); ++j) {
    if (pl_.in[j].mode != M::contiguous) continue;
    const std::string t = cg::st_name(k_.inputs[j].dtype);
    if (v_.cached_vecs > 0)
      line(3, fmt::format("const k_vec<{0}, {2}>& x{1} = k_row{1}[u];", t, j, epv));
    else if (v_.smem_row && st.pass > 0) // this thread's own vector, stored in pass 0
      line(3, fmt::format("const k_vec<{0}, {2}> x{1} = k_srow{1}[c];", t, j, epv));
    else
      line(3, fmt::format("const k_vec<{0}, {2}> x{1} = *reinterpret_cast<const k_vec<{0}, "
                          "{2}>*>(p.in{1} + i0);",
                          t, j, epv));
    if (v_.smem_row && st.pass == 0) line(3, fmt::format("k_srow{0}[c] = x{0};", j));
  }
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (vec_input(j))
      line(3, fmt::format("const k_vec<{0}, {2}> x{1} = *reinterpret_cast<const k_vec<{0}, "
                          "{2}>*>(p.in{1} + ki{1} + c * {2});",
                          cg::st_name(k_.inputs[j].dtype), j, epv));
}

// One element (i, r) of the pass: its offsets, the tape's values, the folds and the stores;
// `load` reads input j. vec_out: inside the vector loop, where half sums fold into their float
// partial and elementwise outputs go into the vector y<j>.
void Emitter::reduce_element(int ind, const ReduceState& st, const Load& load, bool vec_out) {
  declare_offsets(ind, "oi", "ki", "oo", "ko");
  unravel(ind, "r", pl_.nkept, pl_.rank, "oi", "oo");
  tape(ind, load, st.rp.level.data(), st.pass);
  for (const Red& r : st.reds)
    if (folded_in_pass(st, r)) {
      const bool partial = vec_out && r.half_sum;
      fold(ind, r, (partial ? "pacc" : "acc") + std::to_string(r.t), fmt::format("arg{}", r.t),
           fmt::format("({})v{}", partial ? "float" : r.X, k_.tape[r.t].a), "(long long)r");
    }
  for (size_t j = 0; j < pl_.out.size(); ++j) {
    if (!stored_in_pass(st, j)) continue;
    if (vec_out)
      line(ind, fmt::format("y{}.v[e] = {};", j, stored(j)));
    else
      line(ind,
           fmt::format("p.out{}[{}] = {};", j,
                       pl_.out[j].mode == M::strided ? fmt::format("oo{}", j) : "i", stored(j)));
  }
}

} // namespace kiln::detail::cg

// The column layout of reductions: a reduction over outer axes (the innermost dim is kept),
// neighbouring output rows ("columns") on neighbouring threads so that a warp's loads are
// coalesced, the rest of the block down the reduced axis (emitted by Emitter::column_body, below).
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

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

// ---- the emitter ---------------------------------------------------------------------------

// Column layout (rows_per_block = bx > 1): the innermost dim is kept, so the reduced axes are
// outer ones (sum over the first axis, x - mean(x, 0), softmax(x, 0)) and neighbouring output
// rows ("columns") are neighbouring addresses. bx threads of a block sit side by side along
// the columns, each owning V of them: V consecutive columns read as one 16-byte vector per
// operand in the vec variant (V = elems_per_vec), else V = 1. The block's by = blockDim / bx
// threads stack down the reduced axis; their partial accumulators are combined in shared
// memory.
//
// Why this shape (measured on the H100: the former one-column-per-thread loop reached 43% of
// copy bandwidth for a sum over the first axis of 16384 x 16384 f32): HBM3 needs some 40-64
// KB of loads in flight per SM, and a block owns only bx * V columns (no other block helps
// with them: one kernel, no workspace), so 16384 columns are 512 blocks of 256 threads, four
// per SM. The old `#pragma unroll 4` did not help: the loop's `r < R` test sits between the
// unrolled loads and ptxas never hoists a global load above a branch, so each thread had one
// 4-byte load in flight (~4 KB per SM). Now each thread takes U rows per step and issues all
// their loads before any of their arithmetic (the step's condition proves all U rows exist;
// a plain loop takes the rest): U = 4 vectors of 16 bytes are 64 bytes per thread, 64 KB per
// SM at four blocks. A warp reads 32 / bx rows of bx * V * itemsize = 128 contiguous bytes
// each (whole cache lines) in the vec variant; without vectors (misaligned views, kept
// extents not a multiple of V, operands not of stride 1 along the columns) bx = 32 threads
// read 32 columns and U = 8 rows per step.
void Emitter::column_body() {
  ColumnState st;
  st.rp = reduce_passes(k_);
  st.reds = reductions();
  st.bx = v_.rows_per_block;
  st.V = column_vec(k_, v_);
  st.U = column_rows_per_step(k_, v_);
  // Row constants are per column: hoisted with one column per thread (with V they would be
  // arrays like the reductions' k_v; left per element).
  st.consts = row_constants();
  if (st.V == 1) hoist_ = &st.consts;
  // Input j is read as a vector of V columns when it moves along them (stride 1, checked by
  // choose_variant), as one element shared by the V columns when it is constant along them.
  const int last_kept = pl_.nkept - 1;
  for (const CgOperand& in : pl_.in)
    st.vec_in.push_back(st.V > 1 && in.mode == M::strided &&
                        std::find(in.dims.begin(), in.dims.end(), last_kept) != in.dims.end());
  for (const TapeInst& in : k_.tape)
    st.flat_index |=
        in.op == OpCode::iota || in.op == OpCode::rand_uniform || in.op == OpCode::rand_normal;
  column_declare_shared(st);
  line(1, "const idx_t O = (idx_t)p.O, R = (idx_t)p.R;");
  line(1, fmt::format("const int tx = threadIdx.x % {0}, ty = threadIdx.x / {0}, by = "
                      "blockDim.x / {0};",
                      st.bx));
  open_output_loop(
      st.bx * st.V,
      st.V > 1 ? fmt::format("const idx_t o = ob + tx * {}; // the first of {} columns", st.V, st.V)
               : std::string("const idx_t o = ob + tx;"));
  for (st.pass = 0; st.pass < st.rp.passes; ++st.pass) column_pass(st);
  column_store_row_results(st);
  line(2, "__syncthreads(); // the shared accumulators are reused by the next columns");
  line(1, "}");
  hoist_ = nullptr;
}

// The shared arrays through which column_combine() meets the by partial accumulators of each
// column: two buffers per reduction when V > 1, so that column e + 1 writes one while column e
// is read from the other.
void Emitter::column_declare_shared(const ColumnState& st) {
  const int nbuf = st.V > 1 ? 2 : 1;
  for (const Red& r : st.reds) {
    line(1, fmt::format("__shared__ {} k_s{}[{}];", r.A, r.t, nbuf * kBlock));
    if (r.arg) line(1, fmt::format("__shared__ long long k_sa{}[{}];", r.t, nbuf * kBlock));
  }
}

// One pass down the reduced axis: the row constants it needs, the accumulators of the
// reductions it folds, the loop taking U rows per step (all their loads issue before any of
// their arithmetic) and then the rest one row at a time, and the shared-memory combine that
// gives every thread its columns' row values for the passes after this one.
void Emitter::column_pass(ColumnState& st) {
  if (st.V == 1) row_constants_of(2, st.consts, st.rp, st.pass);
  st.now.clear();
  for (const Red& r : st.reds)
    if (folded_in_pass(st, r)) st.now.push_back(&r);
  column_declare_accumulators(st);
  st.stores = false;
  for (size_t j = 0; j < pl_.out.size(); ++j) st.stores |= stored_in_pass(st, j);
  line(2, st.pass == 0 ? "idx_t rb = ty;" : "rb = ty;");
  line(2, fmt::format("for (; valid && rb + {} * by < R; rb += {} * by) {{", st.U - 1, st.U));
  column_rows(3, st.U, st);
  line(2, "}");
  line(2, "for (; valid && rb < R; rb += by) {");
  column_rows(3, 1, st);
  line(2, "}");
  if (!st.now.empty()) column_combine(2, st.now, st.V, st.bx);
  for (const Red* r : st.now) st.known.push_back(r);
}

// The accumulators (and argmax indices) of the reductions folded in this pass, set to their
// initial values: arrays of V, one per column, when a thread owns V columns.
void Emitter::column_declare_accumulators(const ColumnState& st) {
  const int V = st.V;
  for (const Red* r : st.now) {
    line(2, V > 1 ? fmt::format("{} acc{}[{}];", r->A, r->t, V)
                  : fmt::format("{} acc{} = {};", r->A, r->t, r->init));
    if (r->arg)
      line(2, V > 1 ? fmt::format("long long arg{}[{}];", r->t, V)
                    : fmt::format("long long arg{} = -1;", r->t));
  }
  if (V > 1 && !st.now.empty()) {
    line(2, "#pragma unroll");
    line(2, fmt::format("for (int e = 0; e < {}; ++e) {{", V));
    for (const Red* r : st.now) {
      line(3, fmt::format("acc{}[e] = {};", r->t, r->init));
      if (r->arg) line(3, fmt::format("arg{}[e] = -1;", r->t));
    }
    line(2, "}");
  }
}

// `u_count` rows from row rb + u * by: the offsets and loads of all of them first (so that the
// loads are in flight together), then each row's elements (column_row()).
void Emitter::column_rows(int ind, int u_count, const ColumnState& st) {
  for (int u = 0; u < u_count; ++u) {
    const std::string in_var = fmt::format("u{}oi", u), out_var = fmt::format("u{}oo", u);
    declare_offsets(ind, in_var.c_str(), "ki", st.stores ? out_var.c_str() : nullptr, "ko");
    unravel(ind, u ? fmt::format("rb + {} * by", u) : "rb", pl_.nkept, pl_.rank, in_var,
            st.stores ? out_var : "");
  }
  for (int u = 0; u < u_count; ++u)
    for (size_t j = 0; j < pl_.in.size(); ++j) {
      if (pl_.in[j].mode == M::scalar) continue; // unused loads are dead code
      const char* t = cg::st_name(k_.inputs[j].dtype);
      if (st.vec_in[j])
        line(ind, fmt::format("const k_vec<{0}, {1}> u{2}x{3} = *reinterpret_cast<const "
                              "k_vec<{0}, {1}>*>(p.in{3} + u{2}oi{3});",
                              t, st.V, u, j));
      else
        line(ind, fmt::format("const {0} u{1}x{2} = p.in{2}[u{1}oi{2}];", t, u, j));
    }
  for (int u = 0; u < u_count; ++u) column_row(ind, u, st);
}

// Row u of a step, from the values column_rows() loaded: for each of the thread's columns the
// tape, the folds into the accumulators and the elementwise outputs; with V columns those are
// gathered into one vector per output and stored once.
void Emitter::column_row(int ind, int u, const ColumnState& st) {
  const int V = st.V;
  line(ind, "{");
  const int in = ind + 1;
  if (st.flat_index ||
      std::any_of(st.now.begin(), st.now.end(), [](const Red* r) { return r->arg; }))
    line(in, u ? fmt::format("const idx_t r = rb + {} * by;", u) : "const idx_t r = rb;");
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (V > 1 && stored_in_pass(st, j))
      line(in, fmt::format("k_vec<{}, {}> y{};", cg::st_name(k_.outputs[j].dtype), V, j));
  int ein = in;
  if (V > 1) {
    line(in, "#pragma unroll");
    line(in, fmt::format("for (int e = 0; e < {}; ++e) {{", V));
    ein = in + 1;
  }
  if (st.flat_index) // iota and random numbers: the flat index in (kept, reduced) order
    line(ein, V > 1 ? "const idx_t i = (o + e) * R + r;" : "const idx_t i = o * R + r;");
  column_known_values(ein, st);
  tape(
      ein,
      [&](int j) {
        if (pl_.in[j].mode == M::scalar) return fmt::format("p.in{}[0]", j);
        return st.vec_in[j] ? fmt::format("u{}x{}.v[e]", u, j) : fmt::format("u{}x{}", u, j);
      },
      st.rp.level.data(), st.pass);
  const std::string el = V > 1 ? "[e]" : "";
  for (const Red* r : st.now)
    fold(ein, *r, fmt::format("acc{}{}", r->t, el), fmt::format("arg{}{}", r->t, el),
         fmt::format("({})v{}", r->X, k_.tape[r->t].a), "(long long)r");
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (stored_in_pass(st, j))
      line(ein, V > 1 ? fmt::format("y{}.v[e] = {};", j, stored(j))
                      : fmt::format("p.out{}[u{}oo{}] = {};", j, u, j, stored(j)));
  if (V > 1) {
    line(in, "}");
    for (size_t j = 0; j < pl_.out.size(); ++j)
      if (stored_in_pass(st, j))
        line(in, fmt::format("*reinterpret_cast<k_vec<{0}, {1}>*>(p.out{2} + u{3}oo{2}) = y{2};",
                             cg::st_name(k_.outputs[j].dtype), V, j, u));
  }
  line(ind, "}");
}

// Inside a loop over the thread's V columns (e): the row values v<t> of column e of the
// reductions combined in earlier passes, read from the k_v<t> arrays column_combine() filled.
// With one column per thread, column_combine() declares v<t> itself.
void Emitter::column_known_values(int ind, const ColumnState& st) {
  if (st.V == 1) return;
  for (const Red* r : st.known)
    line(ind, fmt::format("const {0} v{1} = k_v{1}[e];", cg::ct_name(k_.tape[r->t].dtype), r->t));
}

// The per-row outputs (reductions' results) after the last pass: thread ty = 0 of each column
// stores them, once per column, V consecutive ones when a thread owns V.
void Emitter::column_store_row_results(const ColumnState& st) {
  bool per_row = false;
  for (const KernelOutput& o : k_.outputs) per_row |= o.reduced;
  if (!per_row) return;
  line(2, "if (ty == 0 && valid) {");
  int in = 3;
  if (st.V > 1) {
    line(3, "#pragma unroll");
    line(3, fmt::format("for (int e = 0; e < {}; ++e) {{", st.V));
    in = 4;
    column_known_values(in, st);
  }
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (k_.outputs[j].reduced)
      line(in, fmt::format("p.out{}[o{}] = {};", j, st.V > 1 ? " + e" : "", stored(j)));
  if (st.V > 1) line(3, "}");
  line(2, "}");
}

// Combines the partial accumulators of the reductions `rs` (folded in the same pass) of the
// column layout through shared memory: every thread writes its own, thread ty = 0 of each
// column folds the by of them in order of ty, and every thread reads the column's result.
// With V columns per thread, column e uses buffer e % 2, so that writing column e + 1 cannot
// race with the reads of column e (the barrier between them orders e + 2's writes).
void Emitter::column_combine(int ind, const std::vector<const Red*>& rs, int V, int bx) {
  int in = ind;
  if (V > 1) {
    line(ind, "#pragma unroll");
    line(ind, fmt::format("for (int e = 0; e < {}; ++e) {{", V));
    in = ind + 1;
    line(in, fmt::format("const int sb = (e & 1) * {};", kBlock));
  }
  const std::string sb = V > 1 ? "sb + " : "";
  const std::string el = V > 1 ? "[e]" : "";
  auto acc = [&](const Red* r) { return fmt::format("acc{}{}", r->t, el); };
  auto arg = [&](const Red* r) { return fmt::format("arg{}{}", r->t, el); };
  for (const Red* r : rs) {
    line(in, fmt::format("k_s{}[{}threadIdx.x] = {};", r->t, sb, acc(r)));
    if (r->arg) line(in, fmt::format("k_sa{}[{}threadIdx.x] = {};", r->t, sb, arg(r)));
  }
  line(in, "__syncthreads();");
  line(in, "if (ty == 0) {");
  line(in + 1, "for (int y = 1; y < by; ++y) {");
  for (const Red* r : rs) {
    line(in + 2, fmt::format("const {} b{} = k_s{}[{}y * {} + tx];", r->A, r->t, r->t, sb, bx));
    if (r->arg)
      line(in + 2,
           fmt::format("const long long ib{} = k_sa{}[{}y * {} + tx];", r->t, r->t, sb, bx));
    fold(in + 2, *r, acc(r), arg(r), fmt::format("b{}", r->t), fmt::format("ib{}", r->t));
  }
  line(in + 1, "}");
  for (const Red* r : rs) {
    line(in + 1, fmt::format("k_s{}[{}tx] = {};", r->t, sb, acc(r)));
    if (r->arg) line(in + 1, fmt::format("k_sa{}[{}tx] = {};", r->t, sb, arg(r)));
  }
  line(in, "}");
  line(in, "__syncthreads();");
  for (const Red* r : rs) {
    line(in, fmt::format("{} = k_s{}[{}tx];", acc(r), r->t, sb));
    if (r->arg) line(in, fmt::format("{} = k_sa{}[{}tx];", arg(r), r->t, sb));
  }
  if (V > 1) line(ind, "}");
  for (const Red* r : rs) {
    const char* ct = cg::ct_name(k_.tape[r->t].dtype);
    if (V == 1) {
      line(ind, fmt::format("const {} v{} = {};", ct, r->t, row_value(*r, acc(r), arg(r))));
      continue;
    }
    line(ind, fmt::format("{} k_v{}[{}];", ct, r->t, V));
    line(ind, "#pragma unroll");
    line(ind, fmt::format("for (int e = 0; e < {}; ++e) k_v{}[e] = {};", V, r->t,
                          row_value(*r, acc(r), arg(r))));
  }
}

} // namespace kiln::detail::cg

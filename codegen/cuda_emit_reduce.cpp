// Source emission of reduce kernels (Emitter, see cuda_emit.cpp): the reductions of the tape,
// their accumulators and folds, and the row layout (one output row per block, partial results
// combined by warp shuffles), which hands reductions that keep the innermost dim to the column
// layout (cuda_emit_column.cpp).
#include "codegen/cuda_codegen_internal.h"
#include "kiln_embedded_sources.h" // codegen/device/*.cuh

#include <fmt/format.h>

#include <string>

namespace kiln::detail::cg {

std::vector<Emitter::Red> Emitter::reductions() const {
  std::vector<Red> reds;
  for (size_t t = 0; t < k_.tape.size(); ++t) {
    const TapeInst& in = k_.tape[t];
    if (!is_reduction(in.op)) continue;
    Red r{static_cast<int>(t),     in.op,   is_floating(k_.tape[in.a].dtype),
          in.op == OpCode::argmax, nullptr, "0"};
    // max/min/argmax are exact in the operand's compute type (float for f32/f16/bf16): no
    // conversion to double and double compares per element. Sums accumulate in double.
    const bool exact = r.op == OpCode::max || r.op == OpCode::min || r.arg;
    r.A = !r.fl ? "long long" : exact && k_.tape[in.a].dtype != DType::f64 ? "float" : "double";
    const bool sum = r.op == OpCode::sum || r.op == OpCode::mean;
    r.half_sum = sum && cg::is_half(in.dtype) && cg::is_half(k_.tape[in.a].dtype);
    r.X = r.A;
    if (sum && k_.tape[in.a].dtype == DType::f64) {
      r.dsum = true;
      r.A = "k_dsum";
      r.X = "double";
      r.init = "k_dsum{0, 0}";
    }
    if (r.op == OpCode::max || r.arg)
      r.init = r.fl ? "-k_inf()" : "-9223372036854775807LL - 1";
    else if (r.op == OpCode::min)
      r.init = r.fl ? "k_inf()" : "9223372036854775807LL";
    reds.push_back(r);
  }
  return reds;
}

bool Emitter::has_dsum() const {
  for (const TapeInst& in : k_.tape)
    if ((in.op == OpCode::sum || in.op == OpCode::mean) && k_.tape[in.a].dtype == DType::f64)
      return true;
  return false;
}

// Double-double sums of f64 (TwoSum, Knuth): hi + lo holds the running total to ~106 bits, so
// the rounded result depends on the order of the additions only when the exact total lies
// within ~2^-100 (relative) of a rounding boundary, as a float sum accumulated in double does.
// The order differs between layouts (a row layout's tree, a column layout's runs down the
// rows), and the layout follows the strides of what a kernel reads: fused (reading a permuted
// input) and unfused (reading a contiguous intermediate) must still round alike. Requires
// --fmad=false (an fma would break TwoSum). A non-finite hi is the result (lo is NaN then).
// An aggregate, so that it can live in __shared__ arrays.
const char* Emitter::dsum_helpers() {
  return kDsumSource; // codegen/device/dsum.cuh
}

// Folds x (element index ix, for argmax) into the accumulator acc (and its index arg).
void Emitter::fold(int ind, const Red& r, const std::string& acc, const std::string& arg,
                   const std::string& x, const std::string& ix) {
  switch (r.op) {
  case OpCode::sum:
  case OpCode::mean:
    line(ind,
         r.fl ? fmt::format("{} += {};", acc, x) : fmt::format("{0} = k_add({0}, {1});", acc, x));
    break;
  case OpCode::max:
    line(ind, fmt::format("k_fold_max({}, {});", acc, x));
    break;
  case OpCode::min:
    line(ind, fmt::format("k_fold_min({}, {});", acc, x));
    break;
  default:
    line(ind, fmt::format("k_fold_argmax({}, {}, {}, {});", acc, arg, x, ix));
    break;
  }
}

// Reduction r's row value from its combined accumulator acc (index ia): the result stored in
// its dtype and read back, as an unfused kernel would load it.
std::string Emitter::row_value(const Red& r, const std::string& acc, const std::string& ia) const {
  const TapeInst& in = k_.tape[r.t];
  const std::string total = r.dsum ? "k_value(" + acc + ")" : acc;
  std::string value = r.arg                   ? cg::from_i64(in.dtype, ia)
                      : !r.fl                 ? cg::from_i64(in.dtype, acc)
                      : in.op == OpCode::mean ? cg::from_double(in.dtype, total + " / (double)R")
                                              : cg::from_double(in.dtype, total);
  return cg::load_cvt(in.dtype, value);
}

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

// Whether pass st.pass folds reduction r (its operand is computed in that pass).
bool Emitter::folded_in_pass(const ReduceState& st, const Red& r) const {
  return st.rp.level[k_.tape[r.t].a] == st.pass;
}

// Whether pass st.pass stores output j: an elementwise (not per-row) output computed in it.
bool Emitter::stored_in_pass(const ReduceState& st, size_t j) const {
  return !k_.outputs[j].reduced && st.rp.level[k_.outputs[j].value] == st.pass;
}

// Opens the block's loop over its output rows, `step` of them per block and iteration (both
// layouts): the thread's row o (declared by `first_o`), whether it exists, and the offsets of
// the kept dims, which every pass over the row shares.
void Emitter::open_output_loop(int step, const std::string& first_o) {
  line(1, fmt::format("for (idx_t ob = (idx_t)blockIdx.x * {0}; ob < O; ob += (idx_t)gridDim.x * "
                      "{0}) {{",
                      step));
  line(2, first_o);
  line(2, "const bool valid = o < O;");
  declare_offsets(2, "ki", nullptr, "ko");
  if (pl_.shape_fields && pl_.nkept > 0) { // else unravel emits nothing: no dangling if
    line(2, "if (valid)");
    unravel(2, "o", 0, pl_.nkept, "ki", "ko");
  }
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

// Combines the block's partial accumulators of reduction r (row layout: warp shuffles, then
// the warps' results through shared memory) into every thread's row value v<t>.
void Emitter::combine(int ind, const Red& r) {
  const int t = r.t;
  const bool arg = r.arg;
  const std::string acc = fmt::format("acc{}", t), ia = fmt::format("arg{}", t);
  const std::string sacc = fmt::format("k_s{}", t), sarg = fmt::format("k_sa{}", t);
  auto warp_reduce = [&](int in) {
    line(in, "for (int s = 16; s > 0; s >>= 1) {");
    line(in + 1, r.dsum
                     ? fmt::format("const k_dsum b = k_shfl_down({}, s);", acc)
                     : fmt::format("const {} b = __shfl_down_sync(0xffffffffu, {}, s);", r.A, acc));
    if (arg)
      line(in + 1, fmt::format("const long long ib = __shfl_down_sync(0xffffffffu, {}, s);", ia));
    fold(in + 1, r, acc, ia, "b", "ib");
    line(in, "}");
  };
  warp_reduce(ind);
  line(ind, "if (lane == 0) {");
  line(ind + 1, fmt::format("{}[warp] = {};", sacc, acc));
  if (arg) line(ind + 1, fmt::format("{}[warp] = {};", sarg, ia));
  line(ind, "}");
  line(ind, "__syncthreads();");
  line(ind, "if (warp == 0) {");
  line(ind + 1, fmt::format("{} = lane < nwarps ? {}[lane] : {};", acc, sacc, r.init));
  if (arg) line(ind + 1, fmt::format("{} = lane < nwarps ? {}[lane] : -1;", ia, sarg));
  warp_reduce(ind + 1);
  line(ind + 1, "if (lane == 0) {");
  line(ind + 2, fmt::format("{}[0] = {};", sacc, acc));
  if (arg) line(ind + 2, fmt::format("{}[0] = {};", sarg, ia));
  line(ind + 1, "}");
  line(ind, "}");
  line(ind, "__syncthreads();");
  line(ind, fmt::format("{} = {}[0];", acc, sacc));
  if (arg) line(ind, fmt::format("{} = {}[0];", ia, sarg));
  line(ind,
       fmt::format("const {} v{} = {};", cg::ct_name(k_.tape[t].dtype), t, row_value(r, acc, ia)));
}

} // namespace kiln::detail::cg

// Source emission of reduce kernels in the column layout (Emitter, see cuda_emit.cpp): the
// innermost dim is kept, threads sit side by side along the output rows and stack down the
// reduced axis, and their partial results are combined in shared memory.
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail::cg {

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
  const ReducePasses rp = reduce_passes(k_);
  const std::vector<Red> reds = reductions();
  const int bx = v_.rows_per_block, V = column_vec(k_, v_), U = column_rows_per_step(k_, v_);
  const int C = bx * V, last_kept = pl_.nkept - 1;
  // Row constants are per column: hoisted with one column per thread (with V they would be
  // arrays like the reductions' k_v; left per element).
  const std::vector<bool> consts = row_constants();
  if (V == 1) hoist_ = &consts;
  // Input j is read as a vector of V columns when it moves along them (stride 1, checked by
  // choose_variant), as one element shared by the V columns when it is constant along them.
  auto vload = [&](size_t j) {
    const std::vector<int>& dims = pl_.in[j].dims;
    return V > 1 && pl_.in[j].mode == M::strided &&
           std::find(dims.begin(), dims.end(), last_kept) != dims.end();
  };
  auto E = [&](const std::string& name) { return V > 1 ? name + "[e]" : name; };
  bool flat_index = false;
  for (const TapeInst& in : k_.tape)
    flat_index |=
        in.op == OpCode::iota || in.op == OpCode::rand_uniform || in.op == OpCode::rand_normal;
  // Two buffers per reduction when V > 1: column e + 1 writes one while column e is read.
  const int nbuf = V > 1 ? 2 : 1;
  for (const Red& r : reds) {
    line(1, fmt::format("__shared__ {} k_s{}[{}];", r.A, r.t, nbuf * kBlock));
    if (r.arg) line(1, fmt::format("__shared__ long long k_sa{}[{}];", r.t, nbuf * kBlock));
  }
  line(1, "const idx_t O = (idx_t)p.O, R = (idx_t)p.R;");
  line(1, fmt::format("const int tx = threadIdx.x % {0}, ty = threadIdx.x / {0}, by = "
                      "blockDim.x / {0};",
                      bx));
  line(1, fmt::format("for (idx_t ob = (idx_t)blockIdx.x * {0}; ob < O; ob += (idx_t)gridDim.x * "
                      "{0}) {{",
                      C));
  line(2, V > 1 ? fmt::format("const idx_t o = ob + tx * {}; // the first of {} columns", V, V)
                : std::string("const idx_t o = ob + tx;"));
  line(2, "const bool valid = o < O;");
  declare_offsets(2, "ki", nullptr, "ko");
  if (pl_.shape_fields && pl_.nkept > 0) { // else unravel emits nothing: no dangling if
    line(2, "if (valid)");
    unravel(2, "o", 0, pl_.nkept, "ki", "ko");
  }
  // The row values of the reductions combined so far, per column.
  std::vector<const Red*> known;
  auto row_values = [&](int ind) {
    if (V == 1) return; // v<t> are declared where they are combined
    for (const Red* r : known)
      line(ind, fmt::format("const {0} v{1} = k_v{1}[e];", cg::ct_name(k_.tape[r->t].dtype), r->t));
  };
  for (int pass = 0; pass < rp.passes; ++pass) {
    if (V == 1) row_constants_of(2, consts, rp, pass);
    std::vector<const Red*> now; // folded in this pass
    for (const Red& r : reds)
      if (rp.level[k_.tape[r.t].a] == pass) now.push_back(&r);
    for (const Red* r : now) {
      line(2, V > 1 ? fmt::format("{} acc{}[{}];", r->A, r->t, V)
                    : fmt::format("{} acc{} = {};", r->A, r->t, r->init));
      if (r->arg)
        line(2, V > 1 ? fmt::format("long long arg{}[{}];", r->t, V)
                      : fmt::format("long long arg{} = -1;", r->t));
    }
    if (V > 1 && !now.empty()) {
      line(2, "#pragma unroll");
      line(2, fmt::format("for (int e = 0; e < {}; ++e) {{", V));
      for (const Red* r : now) {
        line(3, fmt::format("acc{}[e] = {};", r->t, r->init));
        if (r->arg) line(3, fmt::format("arg{}[e] = -1;", r->t));
      }
      line(2, "}");
    }
    bool stores = false;
    for (size_t j = 0; j < pl_.out.size(); ++j)
      stores |= !k_.outputs[j].reduced && rp.level[k_.outputs[j].value] == pass;
    // `u` rows from row rb + u * by: offsets and loads of all of them, then their elements.
    auto rows = [&](int ind, int u_count) {
      for (int u = 0; u < u_count; ++u) {
        const std::string in_var = fmt::format("u{}oi", u), out_var = fmt::format("u{}oo", u);
        declare_offsets(ind, in_var.c_str(), "ki", stores ? out_var.c_str() : nullptr, "ko");
        unravel(ind, u ? fmt::format("rb + {} * by", u) : "rb", pl_.nkept, pl_.rank, in_var,
                stores ? out_var : "");
      }
      for (int u = 0; u < u_count; ++u)
        for (size_t j = 0; j < pl_.in.size(); ++j) {
          if (pl_.in[j].mode == M::scalar) continue; // unused loads are dead code
          const char* st = cg::st_name(k_.inputs[j].dtype);
          if (vload(j))
            line(ind, fmt::format("const k_vec<{0}, {1}> u{2}x{3} = *reinterpret_cast<const "
                                  "k_vec<{0}, {1}>*>(p.in{3} + u{2}oi{3});",
                                  st, V, u, j));
          else
            line(ind, fmt::format("const {0} u{1}x{2} = p.in{2}[u{1}oi{2}];", st, u, j));
        }
      for (int u = 0; u < u_count; ++u) {
        line(ind, "{");
        const int in = ind + 1;
        if (flat_index || std::any_of(now.begin(), now.end(), [](const Red* r) { return r->arg; }))
          line(in, u ? fmt::format("const idx_t r = rb + {} * by;", u) : "const idx_t r = rb;");
        for (size_t j = 0; j < pl_.out.size(); ++j)
          if (V > 1 && !k_.outputs[j].reduced && rp.level[k_.outputs[j].value] == pass)
            line(in, fmt::format("k_vec<{}, {}> y{};", cg::st_name(k_.outputs[j].dtype), V, j));
        int ein = in;
        if (V > 1) {
          line(in, "#pragma unroll");
          line(in, fmt::format("for (int e = 0; e < {}; ++e) {{", V));
          ein = in + 1;
        }
        if (flat_index) // iota and random numbers: the flat index in (kept, reduced) order
          line(ein, V > 1 ? "const idx_t i = (o + e) * R + r;" : "const idx_t i = o * R + r;");
        row_values(ein);
        tape(
            ein,
            [&](int j) {
              if (pl_.in[j].mode == M::scalar) return fmt::format("p.in{}[0]", j);
              return vload(j) ? fmt::format("u{}x{}.v[e]", u, j) : fmt::format("u{}x{}", u, j);
            },
            rp.level.data(), pass);
        for (const Red* r : now)
          fold(ein, *r, E(fmt::format("acc{}", r->t)), E(fmt::format("arg{}", r->t)),
               fmt::format("({})v{}", r->X, k_.tape[r->t].a), "(long long)r");
        for (size_t j = 0; j < pl_.out.size(); ++j) {
          const KernelOutput& o = k_.outputs[j];
          if (o.reduced || rp.level[o.value] != pass) continue;
          line(ein, V > 1 ? fmt::format("y{}.v[e] = {};", j, stored(j))
                          : fmt::format("p.out{}[u{}oo{}] = {};", j, u, j, stored(j)));
        }
        if (V > 1) {
          line(in, "}");
          for (size_t j = 0; j < pl_.out.size(); ++j)
            if (!k_.outputs[j].reduced && rp.level[k_.outputs[j].value] == pass)
              line(in, fmt::format("*reinterpret_cast<k_vec<{0}, {1}>*>(p.out{2} + u{3}oo{2}) = "
                                   "y{2};",
                                   cg::st_name(k_.outputs[j].dtype), V, j, u));
        }
        line(ind, "}");
      }
    };
    line(2, pass == 0 ? "idx_t rb = ty;" : "rb = ty;");
    line(2, fmt::format("for (; valid && rb + {} * by < R; rb += {} * by) {{", U - 1, U));
    rows(3, U);
    line(2, "}");
    line(2, "for (; valid && rb < R; rb += by) {");
    rows(3, 1);
    line(2, "}");
    if (!now.empty()) column_combine(2, now, V, bx);
    for (const Red* r : now) known.push_back(r);
  }
  bool per_row = false;
  for (const KernelOutput& o : k_.outputs) per_row |= o.reduced;
  if (per_row) {
    line(2, "if (ty == 0 && valid) {");
    int in = 3;
    if (V > 1) {
      line(3, "#pragma unroll");
      line(3, fmt::format("for (int e = 0; e < {}; ++e) {{", V));
      in = 4;
      row_values(in);
    }
    for (size_t j = 0; j < pl_.out.size(); ++j)
      if (k_.outputs[j].reduced)
        line(in, fmt::format("p.out{}[o{}] = {};", j, V > 1 ? " + e" : "", stored(j)));
    if (V > 1) line(3, "}");
    line(2, "}");
  }
  line(2, "__syncthreads(); // the shared accumulators are reused by the next columns");
  line(1, "}");
  hoist_ = nullptr;
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

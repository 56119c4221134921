// Source emission: class Emitter (declared in cuda_codegen_internal.h) writes a kernel's body
// from the plan. This file holds what every layout shares (offsets, loads, the tape, row
// constants) and the elementwise kernels, plain, vectorized and tiled; reductions are in
// cuda_emit_reduce.cpp (row layout) and cuda_emit_column.cpp (column layout).
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail::cg {

std::string Emitter::run(const std::string& name) {
  line(0, fmt::format("typedef {} idx_t;", v_.index32 ? "int" : "long long"));
  const bool cluster = !k_.dots.empty() && v_.dot_cluster > 1;
  if (cluster) s_ += cluster_helpers();
  if (pl_.reduce && has_dsum()) s_ += dsum_helpers();
  line(0, fmt::format("extern \"C\" __global__ void __launch_bounds__({}){} {}(const "
                      "__grid_constant__ Params p) {{",
                      kBlock,
                      cluster ? fmt::format(" __cluster_dims__({}, 1, 1)", v_.dot_cluster) : "",
                      name));
  switch (layout_of(k_, v_)) {
  case CudaLayout::elementwise:
    elementwise_body();
    break;
  case CudaLayout::tiled:
    tiled_body();
    break;
  case CudaLayout::dot:
    dot_body();
    break;
  case CudaLayout::gemm_tile:
    gemm_body();
    break;
  case CudaLayout::row_reduce:
    reduce_body();
    break;
  case CudaLayout::column_reduce:
    column_body();
    break;
  }
  line(0, "}");
  return std::move(s_);
}

// Hoisted loads of scalar inputs: s<j>, one element each (elementwise only: a reduction over
// an empty dim runs with no element to read).
void Emitter::scalars(int ind) {
  hoisted_ = true;
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (pl_.in[j].mode == M::scalar)
      line(ind, fmt::format("const {} s{} = p.in{}[0];", cg::st_name(k_.inputs[j].dtype), j, j));
}

// Adds to the offset variables of the strided operands the contribution of flat index `idx`
// unravelled over dims [lo, hi) (row-major, dim hi-1 fastest). Inputs use `in_var`+j
// (or are skipped when in_var is empty), outputs `oo`+j.
void Emitter::unravel(int ind, const std::string& idx, int lo, int hi, const std::string& in_var,
                      const std::string& out_var) {
  if (hi <= lo || !pl_.shape_fields) return; // no operand is strided
  line(ind, "{");
  line(ind + 1, fmt::format("idx_t q, rem = {};", idx));
  for (int d = hi - 1; d >= lo; --d) {
    if (d > lo)
      line(ind + 1, fmt::format("q = rem % {0}; rem /= {0};", cast_idx(fmt::format("sh{}", d))));
    else
      line(ind + 1, "q = rem;");
    for (size_t j = 0; j < pl_.in.size() && !in_var.empty(); ++j) {
      const std::vector<int>& dims = pl_.in[j].dims;
      if (pl_.in[j].mode == M::strided && std::count(dims.begin(), dims.end(), d))
        line(ind + 1,
             fmt::format("{}{} += q * {};", in_var, j, cast_idx(fmt::format("in{}_s{}", j, d))));
    }
    for (size_t j = 0; j < pl_.out.size() && !out_var.empty(); ++j)
      if (pl_.out[j].mode == M::strided)
        line(ind + 1,
             fmt::format("{}{} += q * {};", out_var, j, cast_idx(fmt::format("out{}_s{}", j, d))));
  }
  line(ind, "}");
}

// Declares the offset variables of the strided inputs (`var`+j, from `init`+j or 0) and, when
// out_var is given, of the strided outputs (out_var+j, from out_init+j or 0).
void Emitter::declare_offsets(int ind, const char* var, const char* init, const char* out_var,
                              const char* out_init) {
  std::string decl;
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (pl_.in[j].mode == M::strided)
      decl += fmt::format("{}{}{} = {}", decl.empty() ? "" : ", ", var, j,
                          init ? fmt::format("{}{}", init, j) : "0");
  for (size_t j = 0; j < pl_.out.size() && out_var; ++j)
    if (pl_.out[j].mode == M::strided)
      decl += fmt::format("{}{}{} = {}", decl.empty() ? "" : ", ", out_var, j,
                          out_init ? fmt::format("{}{}", out_init, j) : "0");
  if (!decl.empty()) line(ind, "idx_t " + decl + ";");
}

// Loads of input j for the scalar (one element at index i) paths.
std::string Emitter::element_load(int j) const {
  switch (pl_.in[j].mode) {
  case M::scalar:
    return hoisted_ ? fmt::format("s{}", j) : fmt::format("p.in{}[0]", j);
  case M::contiguous:
    return fmt::format("p.in{}[i]", j);
  case M::strided:
    return fmt::format("p.in{}[oi{}]", j, j);
  }
  return "";
}

// Emits the tape's values; with `level` (reduce kernels) only the non-reduction values of
// level <= max_level (reductions are row variables defined after their pass).
void Emitter::tape(int ind, const Load& load, const int8_t* level, int max_level) {
  for (size_t t = 0; t < k_.tape.size(); ++t) {
    const TapeInst& in = k_.tape[t];
    if (level && (is_reduction(in.op) || level[t] > max_level)) continue;
    if (level && hoist_ && (*hoist_)[t]) continue; // a row constant, see row_constants()
    std::string e = in.op == OpCode::load ? cg::load_cvt(k_.inputs[in.a].dtype, load(in.a))
                                          : cg::inst_expr(k_, static_cast<int>(t));
    line(ind, fmt::format("const {} v{} = {};", cg::ct_name(in.dtype), t, e));
  }
}

// Row constants of a reduce kernel: values computed from constants and reductions only (not
// from loads, the element index or random numbers), such as layer_norm's 1 / sqrt(var + eps).
// They are emitted once per row, before the loop of the pass of their level, rather than per
// element: ptxas does not take a correctly rounded sqrt or division (branches to a slow path)
// out of the loop, and in bf16 layer_norm they were most of the per-element instructions.
std::vector<bool> Emitter::row_constants() const {
  std::vector<bool> c(k_.tape.size(), false);
  for (size_t t = 0; t < k_.tape.size(); ++t) {
    const TapeInst& in = k_.tape[t];
    if (in.op == OpCode::constant || is_reduction(in.op)) {
      c[t] = true;
    } else if (in.op != OpCode::load && in.op != OpCode::iota && in.op != OpCode::rand_uniform &&
               in.op != OpCode::rand_normal) {
      bool all = true;
      for (int a : {in.a, in.b, in.c})
        if (a >= 0) all = all && c[a];
      c[t] = all;
    }
  }
  return c;
}

// Declares the row constants (not the reductions: their values come from the combines) of
// level `pass`.
void Emitter::row_constants_of(int ind, const std::vector<bool>& c, const ReducePasses& rp,
                               int pass) {
  for (size_t t = 0; t < k_.tape.size(); ++t)
    if (c[t] && !is_reduction(k_.tape[t].op) && rp.level[t] == pass)
      line(ind, fmt::format("const {} v{} = {};", cg::ct_name(k_.tape[t].dtype), t,
                            cg::inst_expr(k_, static_cast<int>(t))));
}

std::string Emitter::stored(size_t j) const {
  const KernelOutput& o = k_.outputs[j];
  return cg::store_cvt(o.dtype, k_.tape[o.value].dtype, fmt::format("v{}", o.value));
}

// Tiled elementwise kernel (CudaVariant::tile_dim): each block takes 32x32 tiles of the
// (tile_dim, last dim) plane. The tiled inputs are read with threads along tile_dim (their
// stride-1 dim) into shared memory, then every element is computed and stored with threads
// along the last dim (the output's stride-1 dim). Padding the rows to 33 avoids bank
// conflicts on the transposed reads.
void Emitter::tiled_body() {
  const int df = v_.tile_dim, last = pl_.rank - 1;
  auto tiled = [&](size_t j) { return (v_.tile_inputs >> j) & 1u; };
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (tiled(j))
      line(1, fmt::format("__shared__ {} k_t{}[32][33];", cg::st_name(k_.inputs[j].dtype), j));
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, fmt::format("const idx_t D = (idx_t)p.sh{}, L = (idx_t)p.sh{};", df, last));
  line(1, "const idx_t td_n = (D + 31) / 32, tl_n = (L + 31) / 32;");
  line(1, "const idx_t tiles = n == 0 ? 0 : n / (D * L) * td_n * tl_n;");
  line(1, "const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;");
  line(1, "for (idx_t t = blockIdx.x; t < tiles; t += gridDim.x) {");
  line(2, "idx_t rest = t;");
  line(2, "const idx_t tl = rest % tl_n; rest /= tl_n;");
  line(2, "const idx_t td = rest % td_n; rest /= td_n;");
  // Flat output offset of the tile's other dims (row-major, the highest dim fastest).
  line(2, "idx_t base = 0, cs = 1, cs_df = 1;");
  for (int d = last; d >= 0; --d) {
    if (d == df)
      line(2, "cs_df = cs;");
    else if (d != last)
      line(2, fmt::format("base += (rest % (idx_t)p.sh{0}) * cs; rest /= (idx_t)p.sh{0};", d));
    line(2, fmt::format("cs *= (idx_t)p.sh{};", d));
  }
  // Each strided input's offset at (d, l) = 0 of this tile: one unravel per tile; elements
  // then add d and l times their strides (no division per element).
  declare_offsets(2, "bi", nullptr);
  unravel(2, "base", 0, pl_.rank, "bi", "");
  auto stride_term = [&](size_t j, int dim, const char* var) -> std::string {
    const std::vector<int>& dims = pl_.in[j].dims;
    if (std::find(dims.begin(), dims.end(), dim) == dims.end()) return "";
    return fmt::format(" + {} * {}", var, cast_idx(fmt::format("in{}_s{}", j, dim)));
  };
  auto phase = [&](const char* d_expr, const char* l_expr, bool load) {
    line(2, "#pragma unroll");
    line(2, "for (int k = 0; k < 32; k += 8) {");
    line(3, fmt::format("const idx_t d = td * 32 + {}, l = tl * 32 + {};", d_expr, l_expr));
    line(3, "if (d < D && l < L) {");
    line(4, "const idx_t i = base + d * cs_df + l;");
    for (size_t j = 0; j < pl_.in.size(); ++j)
      if (pl_.in[j].mode == M::strided)
        line(4, fmt::format("const idx_t oi{0} = bi{0}{1}{2};", j, stride_term(j, df, "d"),
                            stride_term(j, last, "l")));
    if (load) {
      for (size_t j = 0; j < pl_.in.size(); ++j)
        if (tiled(j)) line(4, fmt::format("k_t{0}[ty + k][tx] = p.in{0}[oi{0}];", j));
    } else {
      tape(4,
           [&](int j) { return tiled(j) ? fmt::format("k_t{}[tx][ty + k]", j) : element_load(j); });
      for (size_t j = 0; j < pl_.out.size(); ++j)
        line(4, fmt::format("p.out{}[i] = {};", j, stored(j)));
    }
    line(3, "}");
    line(2, "}");
    line(2, "__syncthreads();");
  };
  phase("tx", "ty + k", true);
  phase("ty + k", "tx", false);
  line(1, "}");
}

void Emitter::elementwise_body() {
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, "const idx_t tid = (idx_t)blockIdx.x * blockDim.x + threadIdx.x;");
  line(1, "const idx_t stride = (idx_t)gridDim.x * blockDim.x;");
  scalars(1);
  std::string start = "tid";
  if (v_.vec) {
    const int epv = elems_per_vec(k_);
    line(1, fmt::format("const idx_t nv = n / {};", epv));
    line(1, "for (idx_t c = tid; c < nv; c += stride) {");
    line(2, fmt::format("const idx_t i0 = c * {};", epv));
    if (v_.vec_inputs | v_.splat_inputs) { // strided inputs: their offsets at i0, once a vector
      declare_offsets(2, "oi", nullptr, nullptr);
      unravel(2, "i0", 0, pl_.rank, "oi", "");
    }
    for (size_t j = 0; j < pl_.in.size(); ++j) {
      const char* st = cg::st_name(k_.inputs[j].dtype);
      if (pl_.in[j].mode == M::contiguous || vec_input(j))
        line(2, fmt::format("const k_vec<{0}, {2}> x{1} = *reinterpret_cast<const k_vec<{0}, "
                            "{2}>*>(p.in{1} + {3});",
                            st, j, epv, vec_input(j) ? fmt::format("oi{}", j) : "i0"));
      else if (splat_input(j))
        line(2, fmt::format("const {0} x{1} = p.in{1}[oi{1}];", st, j));
    }
    for (size_t j = 0; j < pl_.out.size(); ++j)
      line(2, fmt::format("k_vec<{}, {}> y{};", cg::st_name(k_.outputs[j].dtype), epv, j));
    line(2, "#pragma unroll");
    line(2, fmt::format("for (int e = 0; e < {}; ++e) {{", epv));
    line(3, "const idx_t i = i0 + e;");
    tape(3, [&](int j) {
      return pl_.in[j].mode == M::scalar ? fmt::format("s{}", j)
             : splat_input(j)            ? fmt::format("x{}", j)
                                         : fmt::format("x{}.v[e]", j);
    });
    for (size_t j = 0; j < pl_.out.size(); ++j)
      line(3, fmt::format("y{}.v[e] = {};", j, stored(j)));
    line(2, "}");
    for (size_t j = 0; j < pl_.out.size(); ++j)
      line(2, fmt::format("*reinterpret_cast<k_vec<{}, {}>*>(p.out{} + i0) = y{};",
                          cg::st_name(k_.outputs[j].dtype), epv, j, j));
    line(1, "}");
    start = fmt::format("nv * {} + tid", epv);
  }
  line(1, fmt::format("for (idx_t i = {}; i < n; i += stride) {{", start));
  declare_offsets(2, "oi", nullptr, "oo");
  unravel(2, "i", 0, pl_.rank, "oi", "oo");
  tape(2, [&](int j) { return element_load(j); });
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(2, fmt::format("p.out{}[{}] = {};", j,
                        pl_.out[j].mode == M::strided ? fmt::format("oo{}", j) : "i", stored(j)));
  line(1, "}");
}

std::string render_kernel(const FusedKernel& k, const CudaVariant& v, const CgPlan& pl,
                          const std::string& name) {
  return Emitter(k, v, pl).run(name);
}

} // namespace kiln::detail::cg

// Source emission: class Emitter (declared in cuda_codegen_internal.h) writes a kernel's body
// from the plan. This file holds what every layout shares (offsets, loads, the tape, row
// constants, stores, the cluster helpers) and picks the layout's emitter; each layout's own
// emitter is in codegen/layouts/<layout>.cpp.
#include "codegen/cuda_codegen_internal.h"
#include "kiln_embedded_sources.h" // codegen/device/*.cuh

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail::cg {

std::string Emitter::run(const std::string& name) {
  line(0, fmt::format("typedef {} idx_t;", v_.index32 ? "int" : "long long"));
  const bool cluster = !k_.dots.empty() && v_.dot_cluster > 1;
  if (cluster) s_ += cluster_helpers();
  if (has_dsum()) s_ += dsum_helpers();
  if (layout_of(k_, v_) == CudaLayout::dot) s_ += kDotSumSource; // codegen/device/dot_sum.cuh
  if (as_step_)
    line(0, fmt::format("static __device__ __forceinline__ void {}(const Params& p) {{", name));
  else
    line(0, fmt::format("extern \"C\" __global__ void __launch_bounds__({}){} {}(const "
                        "__grid_constant__ Params p) {{",
                        kBlock,
                        cluster ? fmt::format(" __cluster_dims__({}, 1, 1)", v_.dot_cluster) : "",
                        name));
  line(1, "k_wait_for_predecessors();");
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

std::string Emitter::run_step(const std::string& fn) {
  as_step_ = true;
  return run(fn);
}

std::string Emitter::run_segment(const std::string& fn, const std::string& params_type) {
  line(0, fmt::format("static __device__ __forceinline__ void {}(const {}& p, unsigned blk, "
                      "unsigned nblk) {{",
                      fn, params_type));
  block_index_ = "blk";
  grid_blocks_ = "nblk";
  elementwise_body();
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

std::string render_kernel(const FusedKernel& k, const CudaVariant& v, const CgPlan& pl,
                          const std::string& name) {
  return Emitter(k, v, pl).run(name);
}

// Thread-block clusters (sm_90): a barrier over the cluster's blocks, and a load from block
// `rank`'s shared memory at the address p has in this block's (distributed shared memory), in
// PTX so that NVRTC needs no cooperative_groups header.
const char* Emitter::cluster_helpers() {
  return kClusterSource; // codegen/device/cluster.cuh
}

// Every output's store of the tape's result at element i (or at its strided offset oo<j>).
void Emitter::store_outputs(int ind) {
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(ind, fmt::format("p.out{}[{}] = {};", j,
                          pl_.out[j].mode == M::strided ? fmt::format("oo{}", j) : "i", stored(j)));
}

} // namespace kiln::detail::cg

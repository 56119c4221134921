// Source emission of reduce kernels (Emitter, see cuda_emit.cpp), what the row and column
// layouts (codegen/layouts/row_reduce.cpp, column_reduce.cpp) share: the reductions of the
// tape, their accumulators and folds, the block combine and the loop over output rows.
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
    r.X = r.A;
    if (dsum_of(in)) {
      r.dsum = true;
      r.A = "k_dsum";
      r.X = "double";
      r.init = "k_dsum{0, 0}";
    } else {
      r.half_sum = sum && cg::is_half(in.dtype) && cg::is_half(k_.tape[in.a].dtype);
    }
    if (r.op == OpCode::max || r.arg)
      r.init = r.fl ? "-k_inf()" : "-9223372036854775807LL - 1";
    else if (r.op == OpCode::min)
      r.init = r.fl ? "k_inf()" : "9223372036854775807LL";
    reds.push_back(r);
  }
  return reds;
}

// Whether a sum of floats accumulates in double-double: f64 always, any floating type in a
// reproducible kernel (the order-independent total on every layout and device).
bool Emitter::dsum_of(const TapeInst& in) const {
  return (in.op == OpCode::sum || in.op == OpCode::mean) &&
         (k_.tape[in.a].dtype == DType::f64 ||
          (k_.reproducible && is_floating(k_.tape[in.a].dtype)));
}

bool Emitter::has_dsum() const {
  if (k_.reproducible && !k_.dots.empty()) return true; // the dots' accumulators
  if (!pl_.reduce) return false;
  for (const TapeInst& in : k_.tape)
    if (dsum_of(in)) return true;
  return false;
}

// Double-double sums (ir/dsum.h) for f64, whose order differs between layouts (a row layout's
// tree, a column layout's runs down the rows), and the layout follows the strides of what a
// kernel reads: fused (reading a permuted input) and unfused (reading a contiguous
// intermediate) must still round alike.
std::string Emitter::dsum_helpers() {
  return std::string(kDsumCoreSource) + kDsumSource; // ir/dsum.h, codegen/device/dsum.cuh
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

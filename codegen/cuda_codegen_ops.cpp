// CUDA spelling of the tape: value types, loads/stores, and one expression per instruction.
// Every rule here mirrors the CPU interpreter (runtime/cpu/tape_eval.cpp), which is the
// reference: f16/bf16 compute in float and are rounded after every instruction; bool computes
// as int 0/1; integer add/sub/mul/neg/abs/pow wrap; float->int casts saturate with NaN -> 0;
// maximum/minimum propagate NaN. Declared in cuda_codegen_internal.h for the emitter.
#include "codegen/cuda_codegen_internal.h"
#include "ir/hash.h"
#include "kiln_embedded_sources.h" // codegen/device/*.cuh

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln::detail::cg {

// Device helpers shared by every kernel (after the includes). Names start with k_.
// Only kernels that touch f16/bf16 include NVRTC's half headers: parsing them is most of a
// small kernel's compile time.
const char* half_preamble() {
  return kHalfSource; // codegen/device/half.cuh
}

const char* preamble() {
  return kCommonSource; // codegen/device/common.cuh
}

} // namespace kiln::detail::cg

namespace kiln::detail {

const std::string& pasted_sources_tag() {
  static const std::string tag = [] {
    uint64_t h = 0;
    for (const char* s : {kCommonSource, kHalfSource, kPhiloxSource, kClusterSource, kDsumSource,
                          kFloatMathSource, kDsumCoreSource, kDotSumSource})
      h = hash_mix(h, fnv1a64(s));
    return fmt::format("dev{:08x}", h & 0xffffffffu);
  }();
  return tag;
}

} // namespace kiln::detail

namespace kiln::detail::cg {

/// Type a value of dtype t computes in.
const char* ct_name(DType t) {
  switch (t) {
  case DType::f64:
    return "double";
  case DType::i64:
    return "long long";
  case DType::i32:
  case DType::boolean:
    return "int";
  default:
    return "float";
  }
}

static bool ct_float(DType t) {
  return is_floating(t);
}

/// Type an element of dtype t is stored as.
const char* st_name(DType t) {
  switch (t) {
  case DType::f32:
    return "float";
  case DType::f64:
    return "double";
  case DType::f16:
    return "__half";
  case DType::bf16:
    return "__nv_bfloat16";
  case DType::i32:
    return "int";
  case DType::i64:
    return "long long";
  case DType::boolean:
    return "unsigned char";
  }
  return "?";
}

/// Stored element (expression e of st_name(t)) -> compute type.
std::string load_cvt(DType t, const std::string& e) {
  switch (t) {
  case DType::f16:
    return fmt::format("__half2float({})", e);
  case DType::bf16:
    return fmt::format("__bfloat162float({})", e);
  case DType::boolean:
    return fmt::format("(int)({} != 0)", e);
  default:
    return e;
  }
}

/// Compute-type value e (of dtype `from`) -> stored element of dtype `to`.
std::string store_cvt(DType to, DType from, const std::string& e) {
  switch (to) {
  case DType::f16:
    return fmt::format("k_to_f16((float)({}))", e);
  case DType::bf16:
    return fmt::format("k_to_bf16((float)({}))", e);
  case DType::boolean:
    return fmt::format("(unsigned char)({} != 0)", e);
  default:
    return to == from ? e : fmt::format("({})({})", st_name(to), e);
  }
}

/// A double (reduction result) -> stored element of dtype `to` (as host_convert's rules).
std::string from_double(DType to, const std::string& e) {
  switch (to) {
  case DType::f32:
    return fmt::format("(float)({})", e);
  case DType::f64:
    return e;
  case DType::f16:
    return fmt::format("k_to_f16((float)({}))", e);
  case DType::bf16:
    return fmt::format("k_to_bf16((float)({}))", e);
  case DType::i32:
    return fmt::format("k_sat_i32({})", e);
  case DType::i64:
    return fmt::format("k_sat_i64({})", e);
  case DType::boolean:
    return fmt::format("(unsigned char)(({}) != 0)", e);
  }
  return e;
}

/// An int64 (integer reduction result, argmax index) -> stored element of dtype `to`.
std::string from_i64(DType to, const std::string& e) {
  switch (to) {
  case DType::i64:
    return e;
  case DType::i32:
    return fmt::format("(int)({})", e);
  case DType::boolean:
    return fmt::format("(unsigned char)(({}) != 0)", e);
  default:
    return from_double(to, fmt::format("(double)({})", e));
  }
}

namespace {

std::string v(int id) {
  return fmt::format("v{}", id);
}

// float/double spelling of a math function.
std::string fn(DType t, const char* name, const std::string& x) {
  return fmt::format("{}{}({})", name, t == DType::f64 ? "" : "f", x);
}

std::string lit(DType t, const char* x) { // a floating literal in the compute type
  return t == DType::f64 ? std::string(x) : std::string(x) + "f";
}

// Reproducible kernels: every f32 (and f16/bf16, computed in float) math function from
// ir/float_math.h, the CPU's formulas (pow too: binary()).
std::string portable_unary(const TapeInst& in) {
  const std::string a = v(in.a);
  switch (in.op) {
  case OpCode::exp:
    return fmt::format("kiln::detail::exp_f32({})", a);
  case OpCode::tanh:
    return fmt::format("kiln::detail::tanh_f32({})", a);
  case OpCode::sigmoid:
    return fmt::format("kiln::detail::sigmoid_f32({})", a);
  case OpCode::log:
    return fmt::format("kiln::detail::log_f32({})", a);
  case OpCode::log1p:
    return fmt::format("kiln::detail::log1p_f32({})", a);
  case OpCode::gelu:
    return fmt::format("kiln::detail::gelu_f32({})", a);
  case OpCode::sin:
    return fmt::format("kiln::detail::sin_f32({})", a);
  case OpCode::cos:
    return fmt::format("kiln::detail::cos_f32({})", a);
  default:
    return "";
  }
}

std::string unary(const TapeInst& in, bool reproducible) {
  // f16/bf16 compute in float, rounded after the op: the f32 formulas serve them too.
  if (reproducible && (in.dtype == DType::f32 || is_half(in.dtype)))
    if (std::string e = portable_unary(in); !e.empty()) return e;
  DType t = in.dtype;
  const char* C = ct_name(t);
  std::string a = v(in.a);
  bool f = ct_float(t);
  switch (in.op) {
  case OpCode::copy:
    return a;
  case OpCode::neg:
    return f ? "-" + a : fmt::format("k_sub(({})0, {})", C, a);
  case OpCode::abs:
    return f ? fn(t, "fabs", a) : fmt::format("({0} < 0 ? k_sub(({1})0, {0}) : {0})", a, C);
  case OpCode::relu: // NaN passes through
    return fmt::format("({0} < 0 ? ({1})0 : {0})", a, C);
  case OpCode::exp:
    return is_half(t) ? fmt::format("k_exp_h({})", a) : fn(t, "exp", a);
  case OpCode::log:
    return fn(t, "log", a);
  case OpCode::log1p:
    return fn(t, "log1p", a);
  case OpCode::sqrt:
    return fn(t, "sqrt", a);
  case OpCode::rsqrt: // 1/sqrt as the CPU (rsqrt() is not correctly rounded)
    return fmt::format("{} / {}", lit(t, "1.0"), fn(t, "sqrt", a));
  case OpCode::sin:
    return fn(t, "sin", a);
  case OpCode::cos:
    return fn(t, "cos", a);
  case OpCode::tanh:
    return fn(t, "tanh", a);
  case OpCode::sigmoid:
    return is_half(t) ? fmt::format("k_div_h(1.0f, 1.0f + k_exp_h(-{}))", a)
                      : fmt::format("{0} / ({0} + {1})", lit(t, "1.0"), fn(t, "exp", "-" + a));
  case OpCode::gelu: // exact (erf) form
    return fmt::format("{} * {} * ({} + {})", lit(t, "0.5"), a, lit(t, "1.0"),
                       fn(t, "erf", a + " * " + lit(t, "0.70710678118654752440")));
  default:
    return "";
  }
}

std::string binary(const TapeInst& in, bool reproducible) {
  DType t = in.dtype;
  std::string a = v(in.a), b = v(in.b);
  bool f = ct_float(t);
  switch (in.op) {
  case OpCode::add:
    return f ? a + " + " + b : fmt::format("k_add({}, {})", a, b);
  case OpCode::sub:
    return f ? a + " - " + b : fmt::format("k_sub({}, {})", a, b);
  case OpCode::mul:
    return f ? a + " * " + b : fmt::format("k_mul({}, {})", a, b);
  case OpCode::div: // integer division never reaches a kernel (the front-end promotes)
    if (is_half(t) && !reproducible) return fmt::format("k_div_h({}, {})", a, b);
    return f ? a + " / " + b : fmt::format("({1} == 0 ? 0 : {0} / {1})", a, b);
  case OpCode::pow:
    if (f && t != DType::f64 && reproducible)
      return fmt::format("kiln::detail::pow_f32({}, {})", a, b);
    return f ? fmt::format("{}({}, {})", t == DType::f64 ? "pow" : "powf", a, b)
             : fmt::format("k_ipow({}, {})", a, b);
  case OpCode::maximum:
    return fmt::format("k_max({}, {})", a, b);
  case OpCode::minimum:
    return fmt::format("k_min({}, {})", a, b);
  case OpCode::sigmoid_grad: // recorded for f32 and f64 only
    return fmt::format("{0} * {1} * ({2} - {1})", a, b, lit(t, "1.0"));
  case OpCode::tanh_grad:
    return fmt::format("{0} * ({2} - {1} * {1})", a, b, lit(t, "1.0"));
  default:
    return "";
  }
}

const char* compare_op(OpCode op) {
  switch (op) {
  case OpCode::eq:
    return "==";
  case OpCode::ne:
    return "!=";
  case OpCode::lt:
    return "<";
  case OpCode::le:
    return "<=";
  case OpCode::gt:
    return ">";
  case OpCode::ge:
    return ">=";
  default:
    return "?";
  }
}

// A double expression d in the compute type of dtype t (iota), as the CPU's from_double.
std::string double_to(DType t, const std::string& d) {
  if (ct_float(t)) return fmt::format("({})({})", ct_name(t), d);
  if (t == DType::boolean) return fmt::format("(int)({} != 0)", d);
  return fmt::format("{}({})", t == DType::i64 ? "k_sat_i64" : "k_sat_i32", d);
}

int uniform_bits(DType t) {
  return t == DType::f64 ? 53 : t == DType::f16 ? 11 : t == DType::bf16 ? 8 : 24;
}

std::string source(const FusedKernel& k, const TapeInst& in, int id) {
  DType t = in.dtype;
  const char* C = ct_name(t);
  switch (in.op) {
  case OpCode::constant: // p.c<id>: double for floating dtypes, int64 otherwise
    return fmt::format("({})p.c{}", C, id);
  case OpCode::iota:
    return double_to(t, fmt::format("p.c{0}_a + (double)i * p.c{0}_b", id));
  case OpCode::rand_uniform:
    return fmt::format("({0})kiln::detail::philox_uniform(p.c{1}_seed, p.c{1}_ctr + (k_u64)i, {2})",
                       C, id, uniform_bits(t));
  case OpCode::rand_normal:
    return fmt::format("({0})kiln::detail::philox_normal(p.c{1}_seed, p.c{1}_ctr + (k_u64)i, {2})",
                       C, id, k.reproducible ? "true" : "false");
  default:
    return "";
  }
}

std::string cast(const FusedKernel& k, const TapeInst& in) {
  DType from = k.tape[in.a].dtype, to = in.dtype;
  std::string a = v(in.a);
  if (to == DType::boolean) return fmt::format("(int)({} != 0)", a);
  if (ct_float(from) && !ct_float(to))
    return fmt::format("{}((double){})", to == DType::i64 ? "k_sat_i64" : "k_sat_i32", a);
  return fmt::format("({}){}", ct_name(to), a);
}

} // namespace

/// The expression computing tape value `id` (not a load) from earlier values v<j>, the
/// element index `i` and the Params fields p.c<id>*; f16/bf16 results are rounded.
std::string inst_expr(const FusedKernel& k, int id) {
  const TapeInst& in = k.tape[id];
  std::string e;
  switch (op_kind(in.op)) {
  case OpKind::Source:
    e = source(k, in, id);
    break;
  case OpKind::Cast:
    e = cast(k, in);
    break;
  case OpKind::Unary:
  case OpKind::UnaryFloat:
    e = unary(in, k.reproducible);
    break;
  case OpKind::Binary:
    e = binary(in, k.reproducible);
    break;
  case OpKind::Compare:
    e = fmt::format("(int)({} {} {})", v(in.a), compare_op(in.op), v(in.b));
    break;
  case OpKind::Logical:
    if (in.op == OpCode::logical_not)
      e = fmt::format("(int)!{}", v(in.a));
    else
      e = fmt::format("{} {} {}", v(in.a), in.op == OpCode::logical_and ? "&" : "|", v(in.b));
    break;
  case OpKind::Ternary:
    e = fmt::format("{} ? {} : {}", v(in.a), v(in.b), v(in.c));
    break;
  case OpKind::Gemm: // dot product a, summed by Emitter::dot_body (double-double: its value)
    e = k.reproducible ? fmt::format("({})k_value(k_dot{})", ct_name(in.dtype), in.a)
                       : fmt::format("k_dot{}", in.a);
    break;
  default:
    break;
  }
  if (e.empty())
    throw std::logic_error(
        fmt::format("CUDA codegen: cannot render {} on {}", op_name(in.op), dtype_name(in.dtype)));
  if (in.dtype == DType::f16) return fmt::format("k_rh({})", e);
  if (in.dtype == DType::bf16) return fmt::format("k_rb({})", e);
  return e;
}

} // namespace kiln::detail::cg

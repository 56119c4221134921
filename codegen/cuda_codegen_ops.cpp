// CUDA spelling of the tape: value types, loads/stores, and one expression per instruction.
// Every rule here mirrors the CPU interpreter (runtime/cpu/tape_eval.cpp), which is the
// reference: f16/bf16 compute in float and are rounded after every instruction; bool computes
// as int 0/1; integer add/sub/mul/neg/abs/pow wrap; float->int casts saturate with NaN -> 0;
// maximum/minimum propagate NaN. Declared in cuda_codegen_internal.h for the emitter.
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln::detail::cg {

// Device helpers shared by every kernel (after the includes). Names start with k_.
// Only kernels that touch f16/bf16 include NVRTC's half headers: parsing them is most of a
// small kernel's compile time.
const char* half_preamble() {
  return R"(#include <cuda_fp16.h>
#include <cuda_bf16.h>
// f16/bf16 values compute in float and are rounded to their precision after every op. From
// sm_80 the rounding is the paired conversion (cvt.rn.*x2.f32, an F2FP on the ALU) given the
// value twice: the single one (F2F) issues at 16 per clock per SM and bounded bf16 softmax at
// 63% of copy bandwidth (80% with F2FP; same bits).
__device__ __forceinline__ __half k_to_f16(float x) {
#if __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));
  return __ushort_as_half((unsigned short)r);
#else
  return __float2half_rn(x);
#endif
}
__device__ __forceinline__ __nv_bfloat16 k_to_bf16(float x) {
#if __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));
  return __ushort_as_bfloat16((unsigned short)r);
#else
  return __float2bfloat16_rn(x);
#endif
}
__device__ __forceinline__ float k_rh(float x) { return __half2float(k_to_f16(x)); }
__device__ __forceinline__ float k_rb(float x) {
  return __uint_as_float((unsigned)__bfloat16_as_ushort(k_to_bf16(x)) << 16);
}
// exp and division of f16/bf16 values, which keep 8 or 11 bits: the hardware approximations
// (ex2.approx of x * log2(e); div.full, at most 2 float ulps over the whole range) are over
// 100x closer than half an ulp of either type, at a third of the instructions of the correctly
// rounded float sequences. The rounded value can differ from the CPU's only when the exact one
// lies that close to a rounding boundary (none did in 67M softmax values). exp flushes results
// below 2^-126 to zero (.ftz: 5% faster bf16 softmax): f16 rounds those to zero anyway; bf16
// loses its subnormals there (exp(x) for x < -87.3).
__device__ __forceinline__ float k_exp_h(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
__device__ __forceinline__ float k_div_h(float a, float b) {
  float y;
  asm("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}
)";
}

const char* preamble() {
  return R"(#define KD __device__ __forceinline__
typedef unsigned long long k_u64;
// Wrapping integer arithmetic (signed overflow is undefined in C++).
KD int k_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
KD int k_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
KD int k_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
KD long long k_add(long long a, long long b) { return (long long)((k_u64)a + (k_u64)b); }
KD long long k_sub(long long a, long long b) { return (long long)((k_u64)a - (k_u64)b); }
KD long long k_mul(long long a, long long b) { return (long long)((k_u64)a * (k_u64)b); }
// Integer power by squaring; negative exponents: 1 for base 1, +-1 for base -1, else 0.
template <class T> KD T k_ipow(T base, T e) {
  if (e < 0) return base == 1 ? T(1) : base == -1 ? ((e & 1) ? T(-1) : T(1)) : T(0);
  T r = 1;
  while (e) {
    if (e & 1) r = k_mul(r, base);
    base = k_mul(base, base);
    e >>= 1;
  }
  return r;
}
// float -> int: truncate toward zero, saturate at the range, NaN -> 0.
KD int k_sat_i32(double v) {
  if (v != v) return 0;
  if (v <= -2147483648.0) return -2147483647 - 1;
  if (v >= 2147483647.0) return 2147483647;
  return (int)v;
}
KD long long k_sat_i64(double v) {
  if (v != v) return 0;
  if (v <= -9223372036854775808.0) return -9223372036854775807LL - 1;
  if (v >= 9223372036854775807.0) return 9223372036854775807LL;
  return (long long)v;
}
// maximum/minimum: NaN in either operand gives NaN (b's first, as the CPU).
template <class T> KD T k_max(T a, T b) {
  T r = a > b ? a : b;
  return b != b ? b : (a != a ? a : r);
}
template <class T> KD T k_min(T a, T b) {
  T r = a < b ? a : b;
  return b != b ? b : (a != a ? a : r);
}
KD double k_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
// Reduction folds (also used to combine partial results): NaN wins and stays.
template <class A> KD void k_fold_max(A& a, A x) {
  if ((x > a || x != x) && a == a) a = x;
}
template <class A> KD void k_fold_min(A& a, A x) {
  if ((x < a || x != x) && a == a) a = x;
}
#if __CUDA_ARCH__ >= 800
// The same folds for float in one instruction each: max.NaN/min.NaN return NaN when either
// operand is NaN.
KD void k_fold_max(float& a, float x) { asm("max.NaN.f32 %0, %0, %1;" : "+f"(a) : "f"(x)); }
KD void k_fold_min(float& a, float x) { asm("min.NaN.f32 %0, %0, %1;" : "+f"(a) : "f"(x)); }
#endif
// argmax: the first maximum; the first NaN wins. ia < 0: no element yet.
template <class A> KD void k_fold_argmax(A& a, long long& ia, A b, long long ib) {
  if (ib < 0) return;
  bool take;
  if (ia < 0) take = true;
  else if (a != a || b != b) take = b != b && (a == a || ib < ia);
  else take = b > a || (b == a && ib < ia);
  if (take) {
    a = b;
    ia = ib;
  }
}
// N consecutive elements, loaded/stored with 16-byte accesses (fewer bytes when N is small).
template <class T, int N> struct alignas(sizeof(T) * N > 16 ? 16 : sizeof(T) * N) k_vec { T v[N]; };
)";
}

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

std::string unary(const TapeInst& in) {
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

std::string binary(const TapeInst& in) {
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
    if (is_half(t)) return fmt::format("k_div_h({}, {})", a, b);
    return f ? a + " / " + b : fmt::format("({1} == 0 ? 0 : {0} / {1})", a, b);
  case OpCode::pow:
    return f ? fmt::format("{}({}, {})", t == DType::f64 ? "pow" : "powf", a, b)
             : fmt::format("k_ipow({}, {})", a, b);
  case OpCode::maximum:
    return fmt::format("k_max({}, {})", a, b);
  case OpCode::minimum:
    return fmt::format("k_min({}, {})", a, b);
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

std::string source(const TapeInst& in, int id) {
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
    return fmt::format("({0})kiln::detail::philox_normal(p.c{1}_seed, p.c{1}_ctr + (k_u64)i)", C,
                       id);
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
    e = source(in, id);
    break;
  case OpKind::Cast:
    e = cast(k, in);
    break;
  case OpKind::Unary:
  case OpKind::UnaryFloat:
    e = unary(in);
    break;
  case OpKind::Binary:
    e = binary(in);
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
  case OpKind::Gemm: // dot product a, summed by Emitter::dot_body
    e = fmt::format("k_dot{}", in.a);
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

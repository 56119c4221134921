#include "runtime/cpu/tape_eval.h"

#include "ir/dsum.h"
#include "ir/float_math.h"
#include "ir/host_convert.h"
#include "ir/philox.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace kiln::detail::cpu {

CT compute_type(DType t) {
  switch (t) {
  case DType::f64:
    return CT::f64;
  case DType::i64:
    return CT::i64;
  case DType::i32:
  case DType::boolean:
    return CT::i32;
  default:
    return CT::f32;
  }
}

namespace {

// ---- memory <-> compute types -------------------------------------------------------------
template <class M> struct Mem {
  using C = M;
  static C get(M v) { return v; }
};
template <> struct Mem<half> {
  using C = float;
  static float get(half v) { return static_cast<float>(v); }
};
template <> struct Mem<bfloat16> {
  using C = float;
  static float get(bfloat16 v) { return static_cast<float>(v); }
};
template <> struct Mem<uint8_t> { // boolean
  using C = int32_t;
  static int32_t get(uint8_t v) { return v != 0; }
};

template <class M>
void gather(const BoundInput& in, const Shape& shape, int64_t start, int len,
            typename Mem<M>::C* out) {
  const M* p = reinterpret_cast<const M*>(in.data);
  if (in.cls == IndexClass::contiguous) {
    for (int e = 0; e < len; ++e) out[e] = Mem<M>::get(p[start + e]);
    return;
  }
  if (in.cls == IndexClass::scalar) {
    auto v = Mem<M>::get(p[0]);
    for (int e = 0; e < len; ++e) out[e] = v;
    return;
  }
  int rank = shape.size();
  int64_t idx[kMaxRank];
  int64_t off = 0, rest = start;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
    off += idx[d] * in.strides[d];
  }
  const int last = rank - 1;
  const int64_t s = in.strides[last];
  for (int e = 0; e < len;) {
    int run = static_cast<int>(std::min<int64_t>(len - e, shape[last] - idx[last]));
    for (int r = 0; r < run; ++r) out[e + r] = Mem<M>::get(p[off + r * s]);
    e += run;
    idx[last] += run;
    off += run * s;
    for (int d = last; d > 0 && idx[d] == shape[d]; --d) {
      off -= idx[d] * in.strides[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += in.strides[d - 1];
    }
  }
}

void gather_any(const BoundInput& in, const Shape& shape, int64_t start, int len, Slab& out) {
  switch (in.dtype) {
  case DType::f32:
    return gather<float>(in, shape, start, len, out.as<float>());
  case DType::f64:
    return gather<double>(in, shape, start, len, out.as<double>());
  case DType::f16:
    return gather<half>(in, shape, start, len, out.as<float>());
  case DType::bf16:
    return gather<bfloat16>(in, shape, start, len, out.as<float>());
  case DType::i32:
    return gather<int32_t>(in, shape, start, len, out.as<int32_t>());
  case DType::i64:
    return gather<int64_t>(in, shape, start, len, out.as<int64_t>());
  case DType::boolean:
    return gather<uint8_t>(in, shape, start, len, out.as<int32_t>());
  }
}

// Element offsets of input `in` at flat indices [start, start+len) of `shape`.
void offsets(const BoundInput& in, const Shape& shape, int64_t start, int len, int64_t* out) {
  if (in.cls == IndexClass::contiguous) {
    for (int e = 0; e < len; ++e) out[e] = start + e;
    return;
  }
  const int rank = shape.size();
  for (int e = 0; e < len; ++e) {
    int64_t off = 0, rest = start + e;
    for (int d = rank - 1; d >= 0 && in.cls == IndexClass::strided; --d) {
      off += rest % shape[d] * in.strides[d];
      rest /= shape[d];
    }
    out[e] = off;
  }
}

// An AVX2 clone beside the baseline code where the compiler targets x86-64; each lane rounds as
// the scalar code does, so the clones give the same bits.
#if defined(__x86_64__) && !defined(__clang__)
#define KILN_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KILN_AVX2_CLONES
#endif

// The double-double sum of a[k] * b[k] over K contiguous f32 pairs, in two vectors of four
// interleaved partial sums (the AVX2 clone runs where the CPU has it), combined at the end.
// Its rounded total is the one any order gives: that is what double-double is for.
typedef float F4 __attribute__((vector_size(16)));
typedef double D4 __attribute__((vector_size(32)));
KILN_AVX2_CLONES DSum dot_contiguous(const float* a, const float* b, int64_t K) {
  D4 hi0 = {}, lo0 = {}, hi1 = {}, lo1 = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    F4 a0, a1, b0, b1;
    std::memcpy(&a0, a + k, 16), std::memcpy(&a1, a + k + 4, 16);
    std::memcpy(&b0, b + k, 16), std::memcpy(&b1, b + k + 4, 16);
    DSum::add(hi0, lo0, __builtin_convertvector(a0, D4) * __builtin_convertvector(b0, D4));
    DSum::add(hi1, lo1, __builtin_convertvector(a1, D4) * __builtin_convertvector(b1, D4));
  }
  DSum r{0, 0};
  for (; k < K; ++k) r += double(a[k]) * double(b[k]);
  for (int l = 0; l < 4; ++l) r += DSum{hi0[l], lo0[l]}, r += DSum{hi1[l], lo1[l]};
  return r;
}

// hi[e] + lo[e] += a * b[e] for n elements (a run of dot_values' elements along a row of B).
KILN_AVX2_CLONES void add_scaled_row(double* hi, double* lo, double a, const float* b, int n) {
  for (int e = 0; e < n; ++e) DSum::add(hi[e], lo[e], a * double(b[e]));
}

// A small matmul's value per element (KernelDot): each element's row of A and column of B
// start where the operands' index maps put them. Accumulated in double, in k order (the CPU
// backend is the accuracy reference), then rounded to the compute type. A reproducible kernel
// (Exact) accumulates in double-double, whose rounded total the GPU's split of K matches.
template <class M, bool Exact>
void dot_values(const KernelDot& d, const BoundInput& a, const BoundInput& b, const Shape& shape,
                int64_t start, int len, typename Mem<M>::C* out) {
  int64_t oa[kBlock], ob[kBlock];
  double hi[kBlock], lo[kBlock]; // lo: Exact only
  for (int e = 0; e < len; ++e) hi[e] = lo[e] = 0;
  offsets(a, shape, start, len, oa);
  offsets(b, shape, start, len, ob);
  const M* pa = reinterpret_cast<const M*>(a.data);
  const M* pb = reinterpret_cast<const M*>(b.data);
  auto add = [&](int e, double x) {
    if constexpr (Exact)
      DSum::add(hi[e], lo[e], x);
    else
      hi[e] += x;
  };
  // Runs of elements on one row of A that read consecutive elements of B (along a row of the
  // product): their inner loop is contiguous and vectorizes. Exact rows of A times rows of B
  // (both contiguous along K) go through dot_contiguous's interleaved lanes. Other elements add
  // one term at a time. A plain double sum adds each element's terms in k order; double-double
  // sums may take any order (the rounded total is the same).
  bool runs = true;
  for (int e0 = 0, e1; e0 < len && runs; e0 = e1) {
    for (e1 = e0 + 1; e1 < len && oa[e1] == oa[e0] && ob[e1] == ob[e0] + (e1 - e0);) ++e1;
    runs = e1 - e0 >= 8;
  }
  if (runs) {
    for (int e0 = 0, e1; e0 < len; e0 = e1) {
      for (e1 = e0 + 1; e1 < len && oa[e1] == oa[e0] && ob[e1] == ob[e0] + (e1 - e0);) ++e1;
      for (int64_t k = 0; k < d.K; ++k) {
        const double av = double(Mem<M>::get(pa[oa[e0] + k * d.a_k]));
        const M* row = pb + ob[e0] + k * d.b_k; // element e0's; the run's others follow it
        if constexpr (Exact && std::is_same_v<M, float>)
          add_scaled_row(hi + e0, lo + e0, av, row, e1 - e0);
        else
          for (int e = e0; e < e1; ++e) add(e, av * double(Mem<M>::get(row[e - e0])));
      }
    }
  } else if (Exact && std::is_same_v<M, float> && d.a_k == 1 && d.b_k == 1) {
    // Rows of A times rows of B (x @ w.T, a linear layer): each element's K is contiguous.
    for (int e = 0; e < len; ++e) {
      const DSum r = dot_contiguous(reinterpret_cast<const float*>(pa + oa[e]),
                                    reinterpret_cast<const float*>(pb + ob[e]), d.K);
      hi[e] = r.hi;
      lo[e] = r.lo;
    }
  } else {
    for (int64_t k = 0; k < d.K; ++k)
      for (int e = 0; e < len; ++e)
        add(e, double(Mem<M>::get(pa[oa[e] + k * d.a_k])) *
                   double(Mem<M>::get(pb[ob[e] + k * d.b_k])));
  }
  for (int e = 0; e < len; ++e)
    out[e] = static_cast<typename Mem<M>::C>(Exact ? DSum{hi[e], lo[e]}.value() : hi[e]);
}

template <bool Exact>
void dot_typed(const KernelDot& d, DType t, const BoundInput& a, const BoundInput& b,
               const Shape& shape, int64_t start, int len, Slab& out) {
  switch (t) {
  case DType::f64:
    return dot_values<double, Exact>(d, a, b, shape, start, len, out.as<double>());
  case DType::f16:
    return dot_values<half, Exact>(d, a, b, shape, start, len, out.as<float>());
  case DType::bf16:
    return dot_values<bfloat16, Exact>(d, a, b, shape, start, len, out.as<float>());
  default:
    return dot_values<float, Exact>(d, a, b, shape, start, len, out.as<float>());
  }
}

void dot_any(const KernelDot& d, DType t, bool exact, llvm::ArrayRef<BoundInput> inputs,
             const Shape& shape, int64_t start, int len, Slab& out) {
  const BoundInput &a = inputs[d.a], &b = inputs[d.b];
  if (exact) return dot_typed<true>(d, t, a, b, shape, start, len, out);
  dot_typed<false>(d, t, a, b, shape, start, len, out);
}

// Round float values to the precision of f16/bf16 (what storing and reloading would do).
void round_to(DType t, float* v, int len) {
  if (t == DType::f16)
    for (int e = 0; e < len; ++e) v[e] = static_cast<float>(half(v[e]));
  else if (t == DType::bf16)
    for (int e = 0; e < len; ++e) v[e] = static_cast<float>(bfloat16(v[e]));
}

// A double (constants, random numbers, iota) in the compute type of dtype t.
template <class C> C from_double(double v, DType t) {
  if constexpr (std::is_floating_point_v<C>)
    return static_cast<C>(v);
  else if (t == DType::boolean)
    return v != 0;
  else
    return saturate_cast<C>(v);
}

template <class C>
void source(const TapeInst& in, bool reproducible, int64_t start, int len, C* out) {
  switch (in.op) {
  case OpCode::constant: {
    C v;
    if constexpr (std::is_integral_v<C>)
      v = in.dtype == DType::boolean ? C(in.imm != 0) : static_cast<C>(in.iimm);
    else
      v = static_cast<C>(in.imm);
    for (int e = 0; e < len; ++e) out[e] = v;
    return;
  }
  case OpCode::iota:
    for (int e = 0; e < len; ++e)
      out[e] = from_double<C>(in.imm + static_cast<double>(start + e) * in.imm2, in.dtype);
    return;
  case OpCode::rand_uniform: {
    int bits = in.dtype == DType::f64    ? 53
               : in.dtype == DType::f16  ? 11
               : in.dtype == DType::bf16 ? 8
                                         : 24;
    for (int e = 0; e < len; ++e)
      out[e] = static_cast<C>(philox_uniform(in.seed, in.counter + start + e, bits));
    return;
  }
  case OpCode::rand_normal:
    for (int e = 0; e < len; ++e)
      out[e] = static_cast<C>(philox_normal(in.seed, in.counter + start + e, reproducible));
    return;
  default:
    return;
  }
}

// Wrapping integer arithmetic (signed overflow is undefined in C++).
template <class T> T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T> T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T> T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

// Integer power by squaring, wrapping like the other integer ops. Negative exponents give
// 0 (|base| > 1), 1 or +-1 (base 1 or -1), as integer division would; 0 ** negative is 0.
template <class T> T int_pow(T base, T e) {
  if (e < 0) return base == 1 ? T(1) : base == -1 ? ((e & 1) ? T(-1) : T(1)) : T(0);
  T r = 1;
  while (e) {
    if (e & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    e >>= 1;
  }
  return r;
}

// f32 (and f16/bf16, computed in float) math: ir/float_math.h's exp, tanh, sigmoid, log and
// log1p always (branch-free, so these loops vectorize, unlike glibc's calls); its sin, cos and
// gelu, computed in double and slower than glibc's, only in a reproducible kernel (`portable`),
// where the GPU computes the same.
template <class T> void unary(OpCode op, const T* a, T* o, int n, bool portable) {
  constexpr bool F = std::is_floating_point_v<T>;
  constexpr bool F32 = std::is_same_v<T, float>;
  switch (op) {
  case OpCode::copy:
    std::memcpy(o, a, sizeof(T) * n);
    return;
  case OpCode::neg:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = -a[i];
    else
      for (int i = 0; i < n; ++i) o[i] = wrap_sub<T>(0, a[i]);
    return;
  case OpCode::abs:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = std::fabs(a[i]);
    else
      for (int i = 0; i < n; ++i) o[i] = a[i] < 0 ? wrap_sub<T>(0, a[i]) : a[i];
    return;
  case OpCode::relu:
    for (int i = 0; i < n; ++i) o[i] = a[i] < 0 ? T(0) : a[i];
    return;
  default:
    break;
  }
  if constexpr (F) {
    switch (op) {
    case OpCode::exp:
      if constexpr (F32)
        for (int i = 0; i < n; ++i) o[i] = exp_f32(a[i]);
      else
        for (int i = 0; i < n; ++i) o[i] = std::exp(a[i]);
      return;
    case OpCode::log:
      if constexpr (F32)
        for (int i = 0; i < n; ++i) o[i] = log_f32(a[i]);
      else
        for (int i = 0; i < n; ++i) o[i] = std::log(a[i]);
      return;
    case OpCode::log1p:
      if constexpr (F32)
        for (int i = 0; i < n; ++i) o[i] = log1p_f32(a[i]);
      else
        for (int i = 0; i < n; ++i) o[i] = std::log1p(a[i]);
      return;
    case OpCode::sqrt:
      for (int i = 0; i < n; ++i) o[i] = std::sqrt(a[i]);
      return;
    case OpCode::rsqrt:
      for (int i = 0; i < n; ++i) o[i] = T(1) / std::sqrt(a[i]);
      return;
    case OpCode::sin:
      if constexpr (F32)
        if (portable) {
          for (int i = 0; i < n; ++i) o[i] = sin_f32(a[i]);
          return;
        }
      for (int i = 0; i < n; ++i) o[i] = std::sin(a[i]);
      return;
    case OpCode::cos:
      if constexpr (F32)
        if (portable) {
          for (int i = 0; i < n; ++i) o[i] = cos_f32(a[i]);
          return;
        }
      for (int i = 0; i < n; ++i) o[i] = std::cos(a[i]);
      return;
    case OpCode::tanh:
      if constexpr (F32)
        for (int i = 0; i < n; ++i) o[i] = tanh_f32(a[i]);
      else
        for (int i = 0; i < n; ++i) o[i] = std::tanh(a[i]);
      return;
    case OpCode::sigmoid:
      if constexpr (F32)
        for (int i = 0; i < n; ++i) o[i] = sigmoid_f32(a[i]);
      else
        for (int i = 0; i < n; ++i) o[i] = T(1) / (T(1) + std::exp(-a[i]));
      return;
    case OpCode::gelu:
      if constexpr (F32)
        if (portable) {
          for (int i = 0; i < n; ++i) o[i] = gelu_f32(a[i]);
          return;
        }
      for (int i = 0; i < n; ++i)
        o[i] = T(0.5) * a[i] * (T(1) + std::erf(a[i] * T(0.70710678118654752440)));
      return;
    default:
      break;
    }
  }
}

// pow of f32: ir/float_math.h's (in double) in a reproducible kernel (`portable`), else glibc's.
template <class T> void binary(OpCode op, const T* a, const T* b, T* o, int n, bool portable) {
  constexpr bool F = std::is_floating_point_v<T>;
  switch (op) {
  case OpCode::add:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = a[i] + b[i];
    else
      for (int i = 0; i < n; ++i) o[i] = wrap_add(a[i], b[i]);
    return;
  case OpCode::sub:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = a[i] - b[i];
    else
      for (int i = 0; i < n; ++i) o[i] = wrap_sub(a[i], b[i]);
    return;
  case OpCode::mul:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = a[i] * b[i];
    else
      for (int i = 0; i < n; ++i) o[i] = wrap_mul(a[i], b[i]);
    return;
  case OpCode::div:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = a[i] / b[i];
    return;
  case OpCode::pow:
    if constexpr (std::is_same_v<T, float>)
      if (portable) {
        for (int i = 0; i < n; ++i) o[i] = pow_f32(a[i], b[i]);
        return;
      }
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = std::pow(a[i], b[i]);
    else
      for (int i = 0; i < n; ++i) o[i] = int_pow(a[i], b[i]);
    return;
  case OpCode::maximum: // NaN propagates
    for (int i = 0; i < n; ++i) {
      T r = a[i] > b[i] ? a[i] : b[i];
      if constexpr (F) r = b[i] != b[i] ? b[i] : (a[i] != a[i] ? a[i] : r);
      o[i] = r;
    }
    return;
  case OpCode::minimum:
    for (int i = 0; i < n; ++i) {
      T r = a[i] < b[i] ? a[i] : b[i];
      if constexpr (F) r = b[i] != b[i] ? b[i] : (a[i] != a[i] ? a[i] : r);
      o[i] = r;
    }
    return;
  case OpCode::sigmoid_grad: // the order of autograd's g * y * (1 - y)
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = a[i] * b[i] * (T(1) - b[i]);
    return;
  case OpCode::tanh_grad:
    if constexpr (F)
      for (int i = 0; i < n; ++i) o[i] = a[i] * (T(1) - b[i] * b[i]);
    return;
  default:
    return;
  }
}

template <class T> void compare(OpCode op, const T* a, const T* b, int32_t* o, int n) {
  switch (op) {
  case OpCode::eq:
    for (int i = 0; i < n; ++i) o[i] = a[i] == b[i];
    return;
  case OpCode::ne:
    for (int i = 0; i < n; ++i) o[i] = a[i] != b[i];
    return;
  case OpCode::lt:
    for (int i = 0; i < n; ++i) o[i] = a[i] < b[i];
    return;
  case OpCode::le:
    for (int i = 0; i < n; ++i) o[i] = a[i] <= b[i];
    return;
  case OpCode::gt:
    for (int i = 0; i < n; ++i) o[i] = a[i] > b[i];
    return;
  case OpCode::ge:
    for (int i = 0; i < n; ++i) o[i] = a[i] >= b[i];
    return;
  default:
    return;
  }
}

template <class T> void where(const int32_t* c, const T* a, const T* b, T* o, int n) {
  for (int i = 0; i < n; ++i) o[i] = c[i] ? a[i] : b[i];
}

template <class From, class To> void cast_values(const From* a, To* o, DType to, int n) {
  if (to == DType::boolean) {
    for (int i = 0; i < n; ++i) o[i] = a[i] != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    for (int i = 0; i < n; ++i) o[i] = saturate_cast<To>(static_cast<double>(a[i]));
  } else {
    for (int i = 0; i < n; ++i) o[i] = static_cast<To>(a[i]);
  }
}

template <class From> void cast_from(const From* a, Slab& out, DType to, int n) {
  switch (compute_type(to)) {
  case CT::f32:
    return cast_values(a, out.as<float>(), to, n);
  case CT::f64:
    return cast_values(a, out.as<double>(), to, n);
  case CT::i32:
    return cast_values(a, out.as<int32_t>(), to, n);
  case CT::i64:
    return cast_values(a, out.as<int64_t>(), to, n);
  }
}

// Run `f` with the C++ type of a compute type.
template <class F> void with_ct(CT ct, F&& f) {
  switch (ct) {
  case CT::f32:
    return f(float{});
  case CT::f64:
    return f(double{});
  case CT::i32:
    return f(int32_t{});
  case CT::i64:
    return f(int64_t{});
  }
}

} // namespace

void eval_block(const FusedKernel& k, const Shape& shape, llvm::ArrayRef<BoundInput> inputs,
                int64_t start, int len, std::vector<Slab>& slabs, const int8_t* level,
                int max_level) {
  for (size_t i = 0; i < k.tape.size(); ++i) {
    const TapeInst& in = k.tape[i];
    Slab& out = slabs[i];
    OpKind kind = op_kind(in.op);
    if (kind == OpKind::Reduce || (level && level[i] > max_level)) continue;
    if (kind == OpKind::Load) {
      gather_any(inputs[in.a], shape, start, len, out);
      continue;
    }
    switch (kind) {
    case OpKind::Gemm: // a small matmul (FusedKernel::dots)
      dot_any(k.dots[in.a], in.dtype, k.reproducible, inputs, shape, start, len, out);
      break;
    case OpKind::Source:
      with_ct(compute_type(in.dtype),
              [&](auto t) { source(in, k.reproducible, start, len, out.as<decltype(t)>()); });
      break;
    case OpKind::Cast:
      with_ct(compute_type(k.tape[in.a].dtype),
              [&](auto t) { cast_from(slabs[in.a].as<decltype(t)>(), out, in.dtype, len); });
      break;
    case OpKind::Unary:
    case OpKind::UnaryFloat:
      with_ct(compute_type(in.dtype), [&](auto t) {
        using T = decltype(t);
        unary<T>(in.op, slabs[in.a].as<T>(), out.as<T>(), len, k.reproducible);
      });
      break;
    case OpKind::Binary:
      with_ct(compute_type(in.dtype), [&](auto t) {
        using T = decltype(t);
        binary<T>(in.op, slabs[in.a].as<T>(), slabs[in.b].as<T>(), out.as<T>(), len,
                  k.reproducible);
      });
      break;
    case OpKind::Compare:
      with_ct(compute_type(k.tape[in.a].dtype), [&](auto t) {
        using T = decltype(t);
        compare<T>(in.op, slabs[in.a].as<T>(), slabs[in.b].as<T>(), out.as<int32_t>(), len);
      });
      break;
    case OpKind::Logical: {
      const int32_t* a = slabs[in.a].as<int32_t>();
      int32_t* o = out.as<int32_t>();
      if (in.op == OpCode::logical_not) {
        for (int e = 0; e < len; ++e) o[e] = !a[e];
      } else {
        const int32_t* b = slabs[in.b].as<int32_t>();
        if (in.op == OpCode::logical_and)
          for (int e = 0; e < len; ++e) o[e] = a[e] & b[e];
        else
          for (int e = 0; e < len; ++e) o[e] = a[e] | b[e];
      }
      break;
    }
    case OpKind::Ternary:
      with_ct(compute_type(in.dtype), [&](auto t) {
        using T = decltype(t);
        where<T>(slabs[in.a].as<int32_t>(), slabs[in.b].as<T>(), slabs[in.c].as<T>(), out.as<T>(),
                 len);
      });
      break;
    default:
      break;
    }
    if (in.dtype == DType::f16 || in.dtype == DType::bf16) round_to(in.dtype, out.as<float>(), len);
  }
}

namespace {

template <class M, class C>
void store(const C* v, M* p, const Shape& shape, const int64_t* strides, bool contiguous,
           int64_t start, int len) {
  auto put = [](C x) {
    if constexpr (std::is_same_v<M, uint8_t>)
      return static_cast<uint8_t>(x != 0);
    else
      return static_cast<M>(x);
  };
  if (contiguous) {
    for (int e = 0; e < len; ++e) p[start + e] = put(v[e]);
    return;
  }
  int rank = shape.size();
  for (int e = 0; e < len; ++e) { // general strided store (concat pieces, rare)
    int64_t rest = start + e, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    p[off] = put(v[e]);
  }
}

} // namespace

void store_block(const Slab& slab, DType dt, char* data, const Shape& shape, const int64_t* strides,
                 bool contiguous, int64_t start, int len) {
  switch (dt) {
  case DType::f32:
    return store(slab.as<float>(), reinterpret_cast<float*>(data), shape, strides, contiguous,
                 start, len);
  case DType::f64:
    return store(slab.as<double>(), reinterpret_cast<double*>(data), shape, strides, contiguous,
                 start, len);
  case DType::f16:
    return store(slab.as<float>(), reinterpret_cast<half*>(data), shape, strides, contiguous, start,
                 len);
  case DType::bf16:
    return store(slab.as<float>(), reinterpret_cast<bfloat16*>(data), shape, strides, contiguous,
                 start, len);
  case DType::i32:
    return store(slab.as<int32_t>(), reinterpret_cast<int32_t*>(data), shape, strides, contiguous,
                 start, len);
  case DType::i64:
    return store(slab.as<int64_t>(), reinterpret_cast<int64_t*>(data), shape, strides, contiguous,
                 start, len);
  case DType::boolean:
    return store(slab.as<int32_t>(), reinterpret_cast<uint8_t*>(data), shape, strides, contiguous,
                 start, len);
  }
}

} // namespace kiln::detail::cpu

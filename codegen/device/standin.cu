// The stand-in interpreter: one kernel, compiled ahead of time by nvcc (CMakeLists.txt embeds
// its fatbin in libkiln), that runs any FusedKernel of the elementwise, tiled, dot and GEMM-tile
// layouts from its Program (standin_program.h) while NVRTC compiles the kernel's own binary.
//
// Its results are the compiled kernel's bit for bit: every instruction is the expression
// codegen/cuda_codegen_ops.cpp renders for it, with the same device helpers (common.cuh,
// half.cuh, ir/philox.h), built with the same toolkit and --fmad=false, so each operation is
// rounded alike. Elements are independent in the elementwise layout, so any order of them gives
// the same bits; the dot layout's sums are split, added and combined as Emitter::dot_body does
// (the same block, cluster and thread shares of K, the same tree in shared memory); a GEMM
// tile's element is summed by one thread in the order of its tile's K chunks, groups and
// cluster ranks (Kernel::gemm_sum).
#include "codegen/device/standin_program.h"

#include "codegen/device/half.cuh"

#include "codegen/device/common.cuh"

#include "codegen/device/cluster.cuh"

#include "ir/philox.h"

namespace kiln::detail::standin {

// Thread-block clusters exist from sm_90; older GPUs always run the dot layout with C = 1.
#if __CUDA_ARCH__ >= 900
KD unsigned cluster_rank() {
  return k_cluster_rank();
}
KD void cluster_sync() {
  k_cluster_sync();
}
KD void cluster_sync_relaxed() {
  k_cluster_sync_relaxed();
}
template <class T> KD T cluster_ld(const T* p, unsigned rank) {
  return k_cluster_ld(p, rank);
}
#else
KD unsigned cluster_rank() {
  return 0;
}
KD void cluster_sync() {}
KD void cluster_sync_relaxed() {}
template <class T> KD T cluster_ld(const T* p, unsigned) {
  return *p;
}
#endif

union Value {
  float f;
  double d;
  int i;
  long long l;
};

enum Class { c_float, c_double, c_int, c_long };

KD Class class_of(uint8_t t) {
  switch (t) {
  case t_f64:
    return c_double;
  case t_i64:
    return c_long;
  case t_i32:
  case t_bool:
    return c_int;
  default:
    return c_float;
  }
}

KD bool is_half(uint8_t t) {
  return t == t_f16 || t == t_bf16;
}

// A stored element -> its compute type (load_cvt).
KD Value load(const void* p, long long at, uint8_t t) {
  Value v;
  switch (t) {
  case t_f32:
    v.f = static_cast<const float*>(p)[at];
    break;
  case t_f64:
    v.d = static_cast<const double*>(p)[at];
    break;
  case t_f16:
    v.f = __half2float(static_cast<const __half*>(p)[at]);
    break;
  case t_bf16:
    v.f = __bfloat162float(static_cast<const __nv_bfloat16*>(p)[at]);
    break;
  case t_i32:
    v.i = static_cast<const int*>(p)[at];
    break;
  case t_i64:
    v.l = static_cast<const long long*>(p)[at];
    break;
  default:
    v.i = (int)(static_cast<const unsigned char*>(p)[at] != 0);
    break;
  }
  return v;
}

// A compute-type value of type `from` -> a stored element of type `to` (store_cvt).
KD void store(void* p, long long at, uint8_t to, uint8_t from, Value v) {
  switch (class_of(from)) {
  case c_float:
    switch (to) {
    case t_f16:
      static_cast<__half*>(p)[at] = k_to_f16(v.f);
      return;
    case t_bf16:
      static_cast<__nv_bfloat16*>(p)[at] = k_to_bf16(v.f);
      return;
    case t_bool:
      static_cast<unsigned char*>(p)[at] = (unsigned char)(v.f != 0);
      return;
    case t_f32:
      static_cast<float*>(p)[at] = v.f;
      return;
    case t_f64:
      static_cast<double*>(p)[at] = (double)v.f;
      return;
    case t_i32:
      static_cast<int*>(p)[at] = (int)v.f;
      return;
    default:
      static_cast<long long*>(p)[at] = (long long)v.f;
      return;
    }
  case c_double:
    switch (to) {
    case t_f16:
      static_cast<__half*>(p)[at] = k_to_f16((float)v.d);
      return;
    case t_bf16:
      static_cast<__nv_bfloat16*>(p)[at] = k_to_bf16((float)v.d);
      return;
    case t_bool:
      static_cast<unsigned char*>(p)[at] = (unsigned char)(v.d != 0);
      return;
    case t_f32:
      static_cast<float*>(p)[at] = (float)v.d;
      return;
    case t_f64:
      static_cast<double*>(p)[at] = v.d;
      return;
    case t_i32:
      static_cast<int*>(p)[at] = (int)v.d;
      return;
    default:
      static_cast<long long*>(p)[at] = (long long)v.d;
      return;
    }
  case c_int:
    switch (to) {
    case t_f16:
      static_cast<__half*>(p)[at] = k_to_f16((float)v.i);
      return;
    case t_bf16:
      static_cast<__nv_bfloat16*>(p)[at] = k_to_bf16((float)v.i);
      return;
    case t_bool:
      static_cast<unsigned char*>(p)[at] = (unsigned char)(v.i != 0);
      return;
    case t_f32:
      static_cast<float*>(p)[at] = (float)v.i;
      return;
    case t_f64:
      static_cast<double*>(p)[at] = (double)v.i;
      return;
    case t_i32:
      static_cast<int*>(p)[at] = v.i;
      return;
    default:
      static_cast<long long*>(p)[at] = (long long)v.i;
      return;
    }
  default:
    switch (to) {
    case t_f16:
      static_cast<__half*>(p)[at] = k_to_f16((float)v.l);
      return;
    case t_bf16:
      static_cast<__nv_bfloat16*>(p)[at] = k_to_bf16((float)v.l);
      return;
    case t_bool:
      static_cast<unsigned char*>(p)[at] = (unsigned char)(v.l != 0);
      return;
    case t_f32:
      static_cast<float*>(p)[at] = (float)v.l;
      return;
    case t_f64:
      static_cast<double*>(p)[at] = (double)v.l;
      return;
    case t_i32:
      static_cast<int*>(p)[at] = (int)v.l;
      return;
    default:
      static_cast<long long*>(p)[at] = v.l;
      return;
    }
  }
}

// ---- the instructions, as codegen/cuda_codegen_ops.cpp renders them --------------------------

KD float unary_f(uint8_t op, bool half, float a) {
  switch (op) {
  case op_copy:
    return a;
  case op_neg:
    return -a;
  case op_abs:
    return fabsf(a);
  case op_relu:
    return a < 0 ? (float)0 : a;
  case op_exp:
    return half ? k_exp_h(a) : expf(a);
  case op_log:
    return logf(a);
  case op_log1p:
    return log1pf(a);
  case op_sqrt:
    return sqrtf(a);
  case op_rsqrt:
    return 1.0f / sqrtf(a);
  case op_sin:
    return sinf(a);
  case op_cos:
    return cosf(a);
  case op_tanh:
    return tanhf(a);
  case op_sigmoid:
    return half ? k_div_h(1.0f, 1.0f + k_exp_h(-a)) : 1.0f / (1.0f + expf(-a));
  default: // gelu
    return 0.5f * a * (1.0f + erff(a * 0.70710678118654752440f));
  }
}

KD double unary_d(uint8_t op, double a) {
  switch (op) {
  case op_copy:
    return a;
  case op_neg:
    return -a;
  case op_abs:
    return fabs(a);
  case op_relu:
    return a < 0 ? (double)0 : a;
  case op_exp:
    return exp(a);
  case op_log:
    return log(a);
  case op_log1p:
    return log1p(a);
  case op_sqrt:
    return sqrt(a);
  case op_rsqrt:
    return 1.0 / sqrt(a);
  case op_sin:
    return sin(a);
  case op_cos:
    return cos(a);
  case op_tanh:
    return tanh(a);
  case op_sigmoid:
    return 1.0 / (1.0 + exp(-a));
  default: // gelu
    return 0.5 * a * (1.0 + erf(a * 0.70710678118654752440));
  }
}

template <class I> KD I unary_i(uint8_t op, I a) {
  switch (op) {
  case op_neg:
    return k_sub((I)0, a);
  case op_abs:
    return a < 0 ? k_sub((I)0, a) : a;
  case op_relu:
    return a < 0 ? (I)0 : a;
  default: // copy
    return a;
  }
}

KD float binary_f(uint8_t op, bool half, float a, float b) {
  switch (op) {
  case op_add:
    return a + b;
  case op_sub:
    return a - b;
  case op_mul:
    return a * b;
  case op_div:
    return half ? k_div_h(a, b) : a / b;
  case op_pow:
    return powf(a, b);
  case op_maximum:
    return k_max(a, b);
  case op_minimum:
    return k_min(a, b);
  case op_sigmoid_grad:
    return a * b * (1.0f - b);
  default: // tanh_grad
    return a * (1.0f - b * b);
  }
}

KD double binary_d(uint8_t op, double a, double b) {
  switch (op) {
  case op_add:
    return a + b;
  case op_sub:
    return a - b;
  case op_mul:
    return a * b;
  case op_div:
    return a / b;
  case op_pow:
    return pow(a, b);
  case op_maximum:
    return k_max(a, b);
  case op_minimum:
    return k_min(a, b);
  case op_sigmoid_grad:
    return a * b * (1.0 - b);
  default: // tanh_grad
    return a * (1.0 - b * b);
  }
}

template <class I> KD I binary_i(uint8_t op, I a, I b) {
  switch (op) {
  case op_add:
    return k_add(a, b);
  case op_sub:
    return k_sub(a, b);
  case op_mul:
    return k_mul(a, b);
  case op_div:
    return b == 0 ? 0 : a / b;
  case op_pow:
    return k_ipow(a, b);
  case op_maximum:
    return k_max(a, b);
  default: // minimum
    return k_min(a, b);
  }
}

template <class T> KD int compare(uint8_t op, T a, T b) {
  switch (op) {
  case op_eq:
    return (int)(a == b);
  case op_ne:
    return (int)(a != b);
  case op_lt:
    return (int)(a < b);
  case op_le:
    return (int)(a <= b);
  case op_gt:
    return (int)(a > b);
  default:
    return (int)(a >= b);
  }
}

KD int compare_values(uint8_t op, uint8_t from, Value a, Value b) {
  switch (class_of(from)) {
  case c_float:
    return compare(op, a.f, b.f);
  case c_double:
    return compare(op, a.d, b.d);
  case c_int:
    return compare(op, a.i, b.i);
  default:
    return compare(op, a.l, b.l);
  }
}

// A value of class `from` as a double, and whether it is nonzero (casts, logical ops).
KD double as_double(uint8_t from, Value a) {
  switch (class_of(from)) {
  case c_float:
    return (double)a.f;
  case c_double:
    return a.d;
  case c_int:
    return (double)a.i;
  default:
    return (double)a.l;
  }
}
KD bool nonzero(uint8_t from, Value a) {
  switch (class_of(from)) {
  case c_float:
    return a.f != 0;
  case c_double:
    return a.d != 0;
  case c_int:
    return a.i != 0;
  default:
    return a.l != 0;
  }
}

// cast: to bool (int)(a != 0); floating -> integer saturating through double; otherwise the
// C conversion to the compute type.
KD Value cast(uint8_t to, uint8_t from, Value a) {
  Value r;
  const Class ct = class_of(to), cf = class_of(from);
  if (to == t_bool) {
    r.i = (int)nonzero(from, a);
  } else if ((cf == c_float || cf == c_double) && (ct == c_int || ct == c_long)) {
    const double d = cf == c_float ? (double)a.f : a.d;
    if (ct == c_long)
      r.l = k_sat_i64(d);
    else
      r.i = k_sat_i32(d);
  } else if (ct == c_float) {
    r.f = cf == c_double ? (float)a.d : cf == c_int ? (float)a.i : cf == c_long ? (float)a.l : a.f;
  } else if (ct == c_double) {
    r.d = as_double(from, a);
  } else if (ct == c_int) {
    r.i = cf == c_long ? (int)a.l : a.i;
  } else {
    r.l = cf == c_long ? a.l : (long long)a.i;
  }
  return r;
}

// A double (iota's a + i * b) in the compute type of t (double_to).
KD Value from_double(uint8_t t, double d) {
  Value r;
  switch (class_of(t)) {
  case c_float:
    r.f = (float)d;
    break;
  case c_double:
    r.d = d;
    break;
  case c_int:
    r.i = t == t_bool ? (int)(d != 0) : k_sat_i32(d);
    break;
  default:
    r.l = k_sat_i64(d);
    break;
  }
  return r;
}

KD int uniform_bits(uint8_t t) {
  return t == t_f64 ? 53 : t == t_f16 ? 11 : t == t_bf16 ? 8 : 24;
}

struct Kernel {
  const unsigned long long* w; // the argument words: w[1 + f] is Params field f
  const Program* pr;
  const Operand* in;
  const Operand* out;
  const Inst* tape;
  const Dot* dots;
  // The dot layout: every dot's sum for the element of thread column tx, in shared memory.
  const double* sums = nullptr;
  int tx = 0;

  // Dot j's sum at element i, as the kernel's accumulator type holds it.
  KD double dot_sum(int j, long long i) const {
    if (pr->layout == l_gemm_tile)
      return dots[j].acc_double ? gemm_sum<double>(dots[j], i)
                                : (double)gemm_sum<float>(dots[j], i);
    return dots[j].acc_double ? sums[j * kBlock + tx]
                              : (double)reinterpret_cast<const float*>(sums + j * kBlock)[tx];
  }

  // The fma chain over k = lo, lo + 1, ... < hi from `acc` (the accumulator's type A).
  template <class A>
  KD A chain(const Dot& d, long long i, long long lo, long long hi, A acc) const {
    const Operand& oa = in[d.a];
    const Operand& ob = in[d.b];
    const long long ak = ifield(d.ak), bk = ifield(d.bk);
    const long long a0 = offset(oa, i), b0 = offset(ob, i);
    const void* pa = ptr(oa);
    const void* pb = ptr(ob);
    for (long long k = lo; k < hi; ++k) {
      const Value x = load(pa, a0 + k * ak, oa.type), y = load(pb, b0 + k * bk, ob.type);
      if constexpr (sizeof(A) == 8)
        acc = fma(oa.type == t_f64 ? x.d : (double)x.f, ob.type == t_f64 ? y.d : (double)y.f, acc);
      else
        acc = fmaf(oa.type == t_f64 ? (float)x.d : x.f, ob.type == t_f64 ? (float)y.d : y.f, acc);
    }
    return acc;
  }

  // The GEMM tile's sum of one element (Emitter::gemm_body): cluster rank r takes the K range
  // [r * span, (r + 1) * span) in whole chunks of BK; K group g of a block takes ks
  // [g * KG, g * KG + KG) of each of its chunks, one fma after another from +0; a block adds its
  // groups' sums in group order, and the cluster's blocks are added in rank order. A short dot
  // is its element's fma chain from +0, plus +0 where the tile would add other partial sums.
  template <class A> KD A gemm_sum(const Dot& d, long long i) const {
    const long long K = ifield(d.K);
    const int C = pr->cluster, G = pr->gemm_groups;
    if (d.is_short) {
      A s = chain<A>(d, i, 0, K, A(0));
      return G > 1 || C > 1 ? s + A(0) : s;
    }
    const long long BK = pr->gemm_bk, KG = BK / G;
    const long long span = (K + C * BK - 1) / (C * BK) * BK;
    A total = 0;
    for (int r = 0; r < C; ++r) {
      const long long kb = r * span, ke = min(K, kb + span);
      A s = 0;
      for (int g = 0; g < G; ++g) {
        A part = 0;
        for (long long k0 = kb; k0 < ke; k0 += BK)
          part = chain<A>(d, i, k0 + g * KG, min(k0 + g * KG + KG, ke), part);
        s = g == 0 ? part : s + part;
      }
      total = r == 0 ? s : total + s;
    }
    return total;
  }

  KD unsigned long long field(uint16_t f) const { return w[1 + f]; }
  KD long long ifield(uint16_t f) const { return (long long)w[1 + f]; }
  KD double dfield(uint16_t f) const { return __longlong_as_double((long long)w[1 + f]); }
  KD const void* ptr(const Operand& o) const { return (const void*)field(o.ptr); }

  // Where operand o's element i is: its offset over the kernel's shape (unravelled as
  // Emitter::unravel does).
  KD long long offset(const Operand& o, long long i) const {
    if (o.mode == m_contiguous) return i;
    if (o.mode == m_scalar) return 0;
    long long rem = i, off = 0;
    for (int d = pr->rank - 1; d >= 0; --d) {
      long long q;
      if (d > 0) {
        const long long sh = ifield(pr->shape[d]);
        q = rem % sh;
        rem /= sh;
      } else {
        q = rem;
      }
      if (o.stride[d] != kNoField) off += q * ifield(o.stride[d]);
    }
    return off;
  }

  KD Value source(const Inst& in, long long i) const {
    Value r;
    switch (in.op) {
    case op_constant: {
      const Class c = class_of(in.type);
      if (c == c_float)
        r.f = (float)dfield(in.field);
      else if (c == c_double)
        r.d = dfield(in.field);
      else if (c == c_int)
        r.i = (int)ifield(in.field);
      else
        r.l = ifield(in.field);
      return r;
    }
    case op_iota:
      return from_double(in.type, dfield(in.field) + (double)i * dfield(in.field + 1));
    case op_rand_uniform: {
      const double u = kiln::detail::philox_uniform(field(in.field), field(in.field + 1) + (k_u64)i,
                                                    uniform_bits(in.type));
      if (class_of(in.type) == c_double)
        r.d = (double)u;
      else
        r.f = (float)u;
      return r;
    }
    default: { // rand_normal
      const double u =
          kiln::detail::philox_normal(field(in.field), field(in.field + 1) + (k_u64)i, false);
      if (class_of(in.type) == c_double)
        r.d = (double)u;
      else
        r.f = (float)u;
      return r;
    }
    }
  }

  KD Value compute(const Inst& in, const Value* v, long long i) const {
    Value r;
    const Value a = v[in.a];
    const Class c = class_of(in.type);
    const bool half = is_half(in.type);
    switch (in.op) {
    case op_constant:
    case op_iota:
    case op_rand_uniform:
    case op_rand_normal:
      r = source(in, i);
      break;
    case op_cast:
      r = cast(in.type, in.from, a);
      break;
    case op_eq:
    case op_ne:
    case op_lt:
    case op_le:
    case op_gt:
    case op_ge:
      r.i = compare_values(in.op, in.from, a, v[in.b]);
      break;
    case op_logical_not:
      r.i = (int)!nonzero(in.from, a);
      break;
    case op_logical_and:
      r.i = a.i & v[in.b].i;
      break;
    case op_logical_or:
      r.i = a.i | v[in.b].i;
      break;
    case op_where:
      r = nonzero(in.from, a) ? v[in.b] : v[in.c];
      break;
    case op_matmul: // the dot's sum, in its accumulator's type, converted
      if (c == c_double)
        r.d = dot_sum(in.field, i);
      else
        r.f = (float)dot_sum(in.field, i);
      break;
    default:
      if (in.op >= op_add) { // binary
        const Value b = v[in.b];
        if (c == c_float)
          r.f = binary_f(in.op, half, a.f, b.f);
        else if (c == c_double)
          r.d = binary_d(in.op, a.d, b.d);
        else if (c == c_int)
          r.i = binary_i(in.op, a.i, b.i);
        else
          r.l = binary_i(in.op, a.l, b.l);
      } else { // unary
        if (c == c_float)
          r.f = unary_f(in.op, half, a.f);
        else if (c == c_double)
          r.d = unary_d(in.op, a.d);
        else if (c == c_int)
          r.i = unary_i(in.op, a.i);
        else
          r.l = unary_i(in.op, a.l);
      }
      break;
    }
    if (in.type == t_f16) r.f = k_rh(r.f); // f16/bf16 are rounded after every instruction
    if (in.type == t_bf16) r.f = k_rb(r.f);
    return r;
  }

  // The tape at element i, then the stores.
  template <int S> KD void run_tape(long long i) const {
    Value v[S];
    for (int t = 0; t < pr->n_inst; ++t) {
      const Inst in = tape[t];
      if (in.op == op_load) {
        const Operand& o = this->in[in.field];
        v[in.dst] = load(ptr(o), offset(o, i), o.type);
      } else {
        v[in.dst] = compute(in, v, i);
      }
    }
    for (int j = 0; j < pr->n_out; ++j) {
      const Operand& o = out[j];
      store((void*)ptr(o), offset(o, i), o.type, o.from, v[o.value]);
    }
  }
};

KD Kernel kernel_of(const StandinArgs& args) {
  Kernel k;
  k.w = args.w;
  const char* base = reinterpret_cast<const char*>(args.w);
  k.pr = reinterpret_cast<const Program*>(base + args.w[0]);
  k.in = reinterpret_cast<const Operand*>(k.pr + 1);
  k.out = k.in + k.pr->n_in;
  k.tape = reinterpret_cast<const Inst*>(k.out + k.pr->n_out);
  k.dots = reinterpret_cast<const Dot*>(k.tape + k.pr->n_inst);
  return k;
}

// ---- the layouts ----------------------------------------------------------------------------

// Elementwise (and tiled): a grid-stride loop over the elements.
template <int S> KD void elementwise(const Kernel& k) {
  const long long n = k.ifield(k.pr->n_field);
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    k.template run_tape<S>(i);
}

// This thread's share of dot j's K at element i (Emitter::dot_group_sums and dot_k_loops: k
// from `first`, step `step`, one fma after another into an accumulator of the dot's type).
template <class A>
KD A dot_share(const Kernel& k, const Dot& d, long long i, long long first, long long step) {
  const Operand& oa = k.in[d.a];
  const Operand& ob = k.in[d.b];
  const long long K = k.ifield(d.K), ak = k.ifield(d.ak), bk = k.ifield(d.bk);
  const long long a0 = k.offset(oa, i), b0 = k.offset(ob, i);
  const void* pa = k.ptr(oa);
  const void* pb = k.ptr(ob);
  A acc = 0;
  for (long long kk = first; kk < K; kk += step) {
    const Value x = load(pa, a0 + kk * ak, oa.type), y = load(pb, b0 + kk * bk, ob.type);
    if constexpr (sizeof(A) == 8)
      acc = fma(oa.type == t_f64 ? x.d : (double)x.f, ob.type == t_f64 ? y.d : (double)y.f, acc);
    else
      acc = fmaf(oa.type == t_f64 ? (float)x.d : x.f, ob.type == t_f64 ? (float)y.d : y.f, acc);
  }
  return acc;
}

// The dot layout (Emitter::dot_body): bx elements per block side by side, the by = 256 / bx
// threads of each splitting its dots' K (and the C blocks of a cluster once more), partial
// sums added in a tree in shared memory, the cluster's blocks' in rank order by block 0.
template <int S> KD void dots(Kernel& k, double* sd) {
  const Program& pr = *k.pr;
  const int bx = pr.dot_bx, by = pr.dot_by, C = pr.cluster;
  const int tx = threadIdx.x % bx, ty = threadIdx.x / bx;
  const unsigned rank = C > 1 ? cluster_rank() : 0;
  const long long n = k.ifield(pr.n_field);
  const long long cluster = C > 1 ? blockIdx.x / C : blockIdx.x;
  const long long clusters = C > 1 ? gridDim.x / C : gridDim.x;
  for (long long ib = cluster * bx; ib < n; ib += clusters * bx) {
    const long long i = ib + tx;
    const bool valid = i < n;
    for (int j = 0; j < pr.n_dots; ++j) {
      const Dot& d = k.dots[j];
      const long long first = (long long)rank * by + ty, step = (long long)C * by;
      if (d.acc_double)
        sd[j * kBlock + threadIdx.x] = valid ? dot_share<double>(k, d, i, first, step) : 0.0;
      else
        reinterpret_cast<float*>(sd + j * kBlock)[threadIdx.x] =
            valid ? dot_share<float>(k, d, i, first, step) : 0.0f;
    }
    __syncthreads();
    for (int s = by / 2; s > 0; s >>= 1) {
      if (ty < s) {
        for (int j = 0; j < pr.n_dots; ++j) {
          if (k.dots[j].acc_double) {
            sd[j * kBlock + threadIdx.x] += sd[j * kBlock + threadIdx.x + s * bx];
          } else {
            float* f = reinterpret_cast<float*>(sd + j * kBlock);
            f[threadIdx.x] += f[threadIdx.x + s * bx];
          }
        }
      }
      __syncthreads();
    }
    if (C > 1) cluster_sync();           // every block's sums are in its shared memory
    if (rank == 0 && ty == 0 && valid) { // the other blocks' sums into this thread's slot
      for (int j = 0; j < pr.n_dots && C > 1; ++j) {
        if (k.dots[j].acc_double) {
          double t = sd[j * kBlock + tx];
          for (unsigned r = 1; r < (unsigned)C; ++r) t += cluster_ld(&sd[j * kBlock + tx], r);
          sd[j * kBlock + tx] = t;
        } else {
          float* f = reinterpret_cast<float*>(sd + j * kBlock);
          float t = f[tx];
          for (unsigned r = 1; r < (unsigned)C; ++r) t += cluster_ld(&f[tx], r);
          f[tx] = t;
        }
      }
      k.sums = sd;
      k.tx = tx;
      k.template run_tape<S>(i);
    }
    if (C > 1)
      cluster_sync_relaxed(); // block 0 has read the others' sums: free to reuse
    else
      __syncthreads();
  }
}

template <int S> KD void interpret(const StandinArgs& args) {
  k_wait_for_predecessors();
  extern __shared__ double k_partial_sums[];
  Kernel k = kernel_of(args);
  if (k.pr->layout == l_dot)
    dots<S>(k, k_partial_sums);
  else
    elementwise<S>(k); // the GEMM tile too: each element sums its own dots
}

} // namespace kiln::detail::standin

using kiln::detail::standin::StandinArgs;

extern "C" __global__ void __launch_bounds__(256)
    kiln_standin_small(const __grid_constant__ StandinArgs args) {
  kiln::detail::standin::interpret<kiln::detail::standin::kSmallSlots>(args);
}

extern "C" __global__ void __launch_bounds__(256)
    kiln_standin_large(const __grid_constant__ StandinArgs args) {
  kiln::detail::standin::interpret<kiln::detail::standin::kLargeSlots>(args);
}

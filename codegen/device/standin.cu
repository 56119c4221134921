// The stand-in interpreter: one kernel, compiled ahead of time by nvcc (CMakeLists.txt embeds
// its fatbin in libkiln), that runs any FusedKernel of the elementwise, tiled, dot, GEMM-tile,
// row- and column-reduce layouts, and segmented kernels, from its Program (standin_program.h)
// while NVRTC compiles the kernel's own binary.
//
// Its results are the compiled kernel's bit for bit: every instruction is the expression
// codegen/cuda_codegen_ops.cpp renders for it, with the same device helpers (common.cuh,
// half.cuh, ir/philox.h), built with the same toolkit and --fmad=false, so each operation is
// rounded alike. Elements are independent in the elementwise layout, so any order of them gives
// the same bits; the dot layout's sums are split, added and combined as Emitter::dot_body does
// (the same block, cluster and thread shares of K, the same shuffles and tree); a GEMM
// tile's element is summed by one thread in the order of its tile's K chunks, groups and
// cluster ranks (Kernel::gemm_sum); reductions are walked and combined as the compiled
// kernel's threads do (standin_reduce.cuh).
#include "codegen/device/standin_program.h"

#include "codegen/device/half.cuh"

#include "codegen/device/common.cuh"

#include "ir/dsum.h"

#include "codegen/device/dsum.cuh"

#include "codegen/device/cluster.cuh"

#include "codegen/device/dot_sum.cuh"

#include "ir/philox.h"

#include "codegen/device/standin_ops.cuh"

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

struct Kernel {
  const unsigned long long* w; // the argument words: w[1 + base + f] is Params field f
  int base = 0;                // a segment's first field
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

  // Where dot d's operands are read for element i: found once per element, not once per chunk.
  struct DotWalk {
    const void* a;
    const void* b;
    long long a0, b0, ak, bk;
    uint8_t ta, tb;
  };
  KD DotWalk walk(const Dot& d, long long i) const {
    const Operand& oa = in[d.a];
    const Operand& ob = in[d.b];
    return {ptr(oa),      ptr(ob),      offset(oa, i), offset(ob, i),
            ifield(d.ak), ifield(d.bk), oa.type,       ob.type};
  }

  // The fma chain over k = lo, lo + step, ... < hi from `acc` (the accumulator's type A).
  template <class A>
  KD A chain(const DotWalk& w, long long lo, long long hi, A acc, long long step = 1) const {
    if (w.ta == t_f32 && w.tb == t_f32) { // the same fmas, without a dispatch on type per k
      const float* pa = static_cast<const float*>(w.a) + w.a0;
      const float* pb = static_cast<const float*>(w.b) + w.b0;
      for (long long k = lo; k < hi; k += step) {
        if constexpr (sizeof(A) == 8)
          acc = fma((double)pa[k * w.ak], (double)pb[k * w.bk], acc);
        else
          acc = fmaf(pa[k * w.ak], pb[k * w.bk], acc);
      }
      return acc;
    }
    for (long long k = lo; k < hi; k += step) {
      const Value x = load(w.a, w.a0 + k * w.ak, w.ta), y = load(w.b, w.b0 + k * w.bk, w.tb);
      if constexpr (sizeof(A) == 8)
        acc = fma(w.ta == t_f64 ? x.d : (double)x.f, w.tb == t_f64 ? y.d : (double)y.f, acc);
      else
        acc = fmaf(w.ta == t_f64 ? (float)x.d : x.f, w.tb == t_f64 ? (float)y.d : y.f, acc);
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
    const DotWalk w = walk(d, i);
    if (d.is_short) {
      A s = chain<A>(w, 0, K, A(0));
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
          part = chain<A>(w, k0 + g * KG, min(k0 + g * KG + KG, ke), part);
        s = g == 0 ? part : s + part;
      }
      total = r == 0 ? s : total + s;
    }
    return total;
  }

  KD unsigned long long field(uint16_t f) const { return w[1 + base + f]; }
  KD long long ifield(uint16_t f) const { return (long long)field(f); }
  KD double dfield(uint16_t f) const { return __longlong_as_double((long long)field(f)); }
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

  // A call rather than inlined at each of its sites: inlined, nvcc took over a minute per arch.
  __device__ __noinline__ Value compute(const Inst& in, const Value* v, long long i) const {
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

  // Instruction `in` at element i, from the values before it.
  KD Value value(const Inst& in, const Value* v, long long i) const {
    if (in.op != op_load) return compute(in, v, i);
    const Operand& o = this->in[in.field];
    return load(ptr(o), offset(o, i), o.type);
  }

  // The tape at element i, then the stores.
  template <int S> KD void run_tape(long long i) const {
    Value v[S];
    for (int t = 0; t < pr->n_inst; ++t) v[tape[t].dst] = value(tape[t], v, i);
    for (int j = 0; j < pr->n_out; ++j) {
      const Operand& o = out[j];
      store((void*)ptr(o), offset(o, i), o.type, o.from, v[o.value]);
    }
  }
};

// The Program at byte `at` of the argument block, its fields from field `base` on.
KD Kernel kernel_of(const StandinArgs& args, unsigned long long at, int base = 0) {
  Kernel k;
  k.w = args.w;
  k.base = base;
  k.pr = reinterpret_cast<const Program*>(reinterpret_cast<const char*>(args.w) + at);
  k.in = reinterpret_cast<const Operand*>(k.pr + 1);
  k.out = k.in + k.pr->n_in;
  k.tape = reinterpret_cast<const Inst*>(k.out + k.pr->n_out);
  k.dots = reinterpret_cast<const Dot*>(k.tape + k.pr->n_inst);
  return k;
}

} // namespace kiln::detail::standin

#include "codegen/device/standin_reduce.cuh"

namespace kiln::detail::standin {

// ---- the layouts ----------------------------------------------------------------------------

// Elementwise (and tiled): a grid-stride loop over the elements, as block `block` of `blocks`.
template <int S> KD void elementwise(const Kernel& k, long long block, long long blocks) {
  const long long n = k.ifield(k.pr->n_field);
  const long long stride = blocks * blockDim.x;
  for (long long i = block * blockDim.x + threadIdx.x; i < n; i += stride)
    k.template run_tape<S>(i);
}

// Segmented (render_segmented): the Params start with each segment's end block; a block runs
// the elementwise Program of the segment its index falls in.
template <int S> KD void segmented(const StandinArgs& args, const Kernel& top) {
  const Segment* seg = reinterpret_cast<const Segment*>(top.pr + 1);
  long long begin = 0;
  for (int s = 0; s < top.pr->n_in; ++s) {
    const long long end = top.ifield(seg[s].end);
    if (blockIdx.x < end) {
      elementwise<S>(kernel_of(args, seg[s].program, seg[s].base), blockIdx.x - begin, end - begin);
      return;
    }
    begin = end;
  }
}

// The dot layout (Emitter::dot_body): bx elements per block side by side, the by = 256 / bx
// threads of each splitting its dots' K (and the C blocks of a cluster once more), partial
// sums added by warp shuffles, then the warps' in shared memory, the cluster's blocks' in rank
// order by block 0.
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
      // This thread's share of the dot's K (Emitter::dot_group_sums and dot_k_loops), then the
      // warp's rows added by shuffles (Emitter::dot_tree_sum).
      const long long K = k.ifield(d.K);
      if (d.acc_double)
        k_warp_sum(sd + j * kBlock, bx, tx,
                   valid ? k.template chain<double>(k.walk(d, i), first, K, 0.0, step) : 0.0);
      else
        k_warp_sum(reinterpret_cast<float*>(sd + j * kBlock), bx, tx,
                   valid ? k.template chain<float>(k.walk(d, i), first, K, 0.0f, step) : 0.0f);
    }
    __syncthreads();
    if (ty == 0) {
      for (int j = 0; j < pr.n_dots; ++j) {
        if (k.dots[j].acc_double)
          k_warps_sum<kBlock / 32>(sd + j * kBlock, bx, tx);
        else
          k_warps_sum<kBlock / 32>(reinterpret_cast<float*>(sd + j * kBlock), bx, tx);
      }
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
  Kernel k = kernel_of(args, args.w[0]);
  switch (k.pr->layout) {
  case l_dot:
    return dots<S>(k, k_partial_sums);
  case l_row_reduce:
  case l_column_reduce:
    return reduce<S>(k, reinterpret_cast<Accum*>(k_partial_sums));
  case l_segmented:
    return segmented<S>(args, k);
  default: // the GEMM tile too: each element sums its own dots
    return elementwise<S>(k, blockIdx.x, gridDim.x);
  }
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

#pragma once
// The stand-in interpreter's reduce layouts (codegen/device/standin.cu includes this after its
// Kernel): the row layout (Emitter::reduce_body) and the column layout (Emitter::column_body),
// launched with the compiled kernel's grid and blocks so that every thread folds the elements
// the compiled kernel's thread folds, in the same order, and the block combines its partial
// accumulators in the same tree: the same bits.
//
// The interpreter walks a thread's columns one after the other (the compiled column layout
// interleaves its V columns, which are independent), and folds each element as the tape
// reaches the reduction rather than after the tape (the same value either way).
namespace kiln::detail::standin {

// A reduction's running value in its Acc, and for argmax the index of the value held.
struct Accum {
  union {
    double d;
    float f;
    long long l;
    k_dsum s;
  };
  long long arg;
};

// The accumulator's start (Emitter::reductions' init): 0, or the identity of max/min/argmax.
KD Accum initial(const Inst& r) {
  Accum a;
  a.arg = -1;
  const bool up = r.op == op_max || r.op == op_argmax, down = r.op == op_min;
  switch (r.b) {
  case a_double:
    a.d = up ? -k_inf() : down ? k_inf() : 0.0;
    break;
  case a_float:
    a.f = up ? -k_inf() : down ? k_inf() : 0.0f;
    break;
  case a_long:
    a.l = up ? -9223372036854775807LL - 1 : down ? 9223372036854775807LL : 0;
    break;
  default:
    a.s = k_dsum{0, 0};
    break;
  }
  return a;
}

// Emitter::fold: x (at index ix, for argmax) into acc, as the generated code folds it.
template <class T> KD void fold_op(uint8_t op, T& acc, long long& arg, T x, long long ix) {
  switch (op) {
  case op_sum:
  case op_mean:
    if constexpr (T(0.5) == T(0))
      acc = k_add(acc, x); // integers wrap
    else
      acc += x;
    return;
  case op_max:
    k_fold_max(acc, x);
    return;
  case op_min:
    k_fold_min(acc, x);
    return;
  default:
    k_fold_argmax(acc, arg, x, ix);
    return;
  }
}

// Element value v of reduction r (at index ix along its row), converted to the accumulator's
// type ("(X)v").
KD void fold_element(Accum& a, const Inst& r, Value v, long long ix) {
  switch (r.b) {
  case a_double:
    return fold_op(r.op, a.d, a.arg, as_double(r.from, v), ix);
  case a_float:
    return fold_op(r.op, a.f, a.arg, v.f, ix);
  case a_long:
    return fold_op(r.op, a.l, a.arg, class_of(r.from) == c_long ? v.l : (long long)v.i, ix);
  default:
    a.s += as_double(r.from, v);
    return;
  }
}

// Another thread's partial accumulator b into a (the combines).
KD void fold_partial(Accum& a, const Inst& r, const Accum& b) {
  switch (r.b) {
  case a_double:
    return fold_op(r.op, a.d, a.arg, b.d, b.arg);
  case a_float:
    return fold_op(r.op, a.f, a.arg, b.f, b.arg);
  case a_long:
    return fold_op(r.op, a.l, a.arg, b.l, b.arg);
  default:
    a.s += b.s;
    return;
  }
}

KD Accum shuffle_down(const Accum& a, const Inst& r, int s) {
  Accum b;
  switch (r.b) {
  case a_double:
    b.d = __shfl_down_sync(0xffffffffu, a.d, s);
    break;
  case a_float:
    b.f = __shfl_down_sync(0xffffffffu, a.f, s);
    break;
  case a_long:
    b.l = __shfl_down_sync(0xffffffffu, a.l, s);
    break;
  default:
    b.s = k_shfl_down(a.s, s);
    break;
  }
  b.arg = __shfl_down_sync(0xffffffffu, a.arg, s);
  return b;
}

KD void warp_tree(Accum& a, const Inst& r) {
  for (int s = 16; s > 0; s >>= 1) fold_partial(a, r, shuffle_down(a, r, s));
}

// The row layout's combine (Emitter::combine): each warp's tree of shuffles, the warps' results
// through shared memory, and warp 0's tree of them; every thread gets the block's total.
KD void combine_row(Accum& a, const Inst& r, Accum* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  warp_tree(a, r);
  if (lane == 0) sh[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < nwarps ? sh[lane] : initial(r);
    warp_tree(a, r);
    if (lane == 0) sh[0] = a;
  }
  __syncthreads();
  a = sh[0];
  __syncthreads(); // sh serves the next reduction
}

// The column layout's combine (Emitter::column_combine): thread ty = 0 of each column folds
// the by partial accumulators in order of ty; every thread of the column gets the total.
KD void combine_column(Accum& a, const Inst& r, Accum* sh, int tx, int ty, int bx, int by) {
  sh[threadIdx.x] = a;
  __syncthreads();
  if (ty == 0) {
    for (int y = 1; y < by; ++y) fold_partial(a, r, sh[y * bx + tx]);
    sh[tx] = a;
  }
  __syncthreads();
  a = sh[tx];
  __syncthreads();
}

// Emitter::row_value: the total stored in the reduction's dtype and read back (from_double or
// from_i64, then load_cvt), as an unfused kernel would load it.
KD Value row_value(const Inst& r, const Accum& a, long long R) {
  Value v;
  const uint8_t t = r.type;
  if (r.op == op_argmax || r.b == a_long) {
    const long long x = r.op == op_argmax ? a.arg : a.l;
    if (t == t_i64)
      v.l = x;
    else if (t == t_i32)
      v.i = (int)x;
    else if (t == t_bool)
      v.i = (int)(x != 0);
    else
      return row_value_of_double(t, (double)x);
    return v;
  }
  double x = r.b == a_dsum ? k_value(a.s) : r.b == a_float ? (double)a.f : a.d;
  if (r.op == op_mean) x = x / (double)R;
  return row_value_of_double(t, x);
}

// The tape at element i (index r along its row) in pass `pass`: the values of its level, the
// folds of the reductions it folds (a half sum into its vector's float partial when `pacc`),
// the elementwise outputs it stores.
KD void reduce_element(const Kernel& k, Value* v, Accum* acc, float* pacc, long long i, long long r,
                       int pass) {
  for (int t = 0; t < k.pr->n_inst; ++t) {
    const Inst in = k.tape[t];
    if (in.op >= op_sum) {
      if (in.level - 1 != pass) continue;
      if (pacc && in.c)
        pacc[in.field] += v[in.a].f;
      else
        fold_element(acc[in.field], in, v[in.a], r);
    } else if (in.level <= pass) {
      v[in.dst] = k.value(in, v, i);
    }
  }
  for (int j = 0; j < k.pr->n_out; ++j) {
    const Operand& o = k.out[j];
    if (!o.reduced && o.level == pass)
      store((void*)k.ptr(o), k.offset(o, i), o.type, o.from, v[o.value]);
  }
}

// A thread's walk along row o in one pass: elements r = ty, ty + by, ...; or, in the row
// layout's vector walk, vectors c = ty, ty + by, ... of epv elements each.
KD void reduce_walk(const Kernel& k, Value* v, Accum* acc, long long o, long long R, int ty, int by,
                    int pass) {
  const int epv = k.pr->row_epv;
  if (epv == 0) {
    for (long long r = ty; r < R; r += by) reduce_element(k, v, acc, nullptr, o * R + r, r, pass);
    return;
  }
  for (long long c = ty; c < R / epv; c += by) {
    float pacc[kMaxReductions];
    for (int j = 0; j < k.pr->n_reds; ++j) pacc[j] = 0;
    for (int e = 0; e < epv; ++e) {
      const long long r = c * epv + e;
      reduce_element(k, v, acc, pacc, o * R + r, r, pass);
    }
    for (int t = 0; t < k.pr->n_inst; ++t) {
      const Inst in = k.tape[t];
      if (in.op >= op_sum && in.c && in.level - 1 == pass)
        acc[in.field].d += (double)pacc[in.field];
    }
  }
}

// Both reduce layouts: bx threads side by side along the output rows (1: the row layout), V
// rows ("columns") each, the rest of the block down the rows; a grid-stride loop over the
// blocks' output rows; per row the passes, each a walk and the combines that make its
// reductions row values; then the per-row outputs.
template <int S> KD void reduce(const Kernel& k, Accum* sh) {
  const Program& pr = *k.pr;
  const long long O = k.ifield(pr.n_field), R = k.ifield(pr.r_field);
  const bool column = pr.layout == l_column_reduce;
  const int bx = column ? pr.red_bx : 1, V = column ? pr.red_v : 1;
  const int tx = threadIdx.x % bx, ty = threadIdx.x / bx, by = blockDim.x / bx;
  Value v[S];
  Accum acc[kMaxReductions];
  for (long long ob = (long long)blockIdx.x * bx * V; ob < O; ob += (long long)gridDim.x * bx * V) {
    const long long o0 = ob + (long long)tx * V;
    const bool valid = o0 < O;
    for (int e = 0; e < V; ++e) {
      const long long o = o0 + e;
      for (int pass = 0; pass < pr.passes; ++pass) {
        for (int t = 0; t < pr.n_inst; ++t)
          if (k.tape[t].op >= op_sum && k.tape[t].level - 1 == pass)
            acc[k.tape[t].field] = initial(k.tape[t]);
        if (valid) reduce_walk(k, v, acc, o, R, ty, by, pass);
        for (int t = 0; t < pr.n_inst; ++t) {
          const Inst in = k.tape[t];
          if (in.op < op_sum || in.level - 1 != pass) continue;
          if (column)
            combine_column(acc[in.field], in, sh, tx, ty, bx, by);
          else
            combine_row(acc[in.field], in, sh);
          v[in.dst] = row_value(in, acc[in.field], R);
        }
      }
      if (ty == 0 && valid)
        for (int j = 0; j < pr.n_out; ++j) {
          const Operand& out = k.out[j];
          if (out.reduced) store((void*)k.ptr(out), o, out.type, out.from, v[out.value]);
        }
    }
  }
}

} // namespace kiln::detail::standin

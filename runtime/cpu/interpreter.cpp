#include "runtime/cpu/interpreter.h"

#include "ir/dsum.h"
#include "ir/host_convert.h"
#include "runtime/cpu/tape_eval.h"
#include "runtime/cpu/thread_pool.h"

#include <llvm/ADT/SmallVector.h>

#include <cmath>
#include <limits>

namespace kiln::detail::cpu {

namespace {

// Kernels under 128 blocks (32K elements: parallel_for splits from two grains of 64 blocks) run
// on the calling thread: small tensors (an RNN step) would pay more for waking threads than
// they save.
constexpr int64_t kParallelGrainBlocks = 64;

char* data(llvm::ArrayRef<Buffer*> buffers, int slot) {
  return static_cast<char*>(buffers[slot]->data);
}

// Kernel-sized lists live on the stack: a step of small kernels runs hundreds of them, and their
// heap lists were a tenth of a small LSTM's training step on the host.
using InputStrides = llvm::SmallVector<Shape, 8>;
using BoundInputs = llvm::SmallVector<BoundInput, 8>;
using OutputFlags = llvm::SmallVector<bool, 8>;

BoundInputs bind_inputs(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers,
                        llvm::ArrayRef<Shape> strides, const Shape& shape) {
  BoundInputs out;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const KernelInput& in = k.inputs[i];
    IndexClass cls = in.cls;
    if (cls == IndexClass::contiguous && !is_contiguous(Layout{shape, strides[i], 0}))
      cls = IndexClass::strided; // a reduction permuted the iteration space
    out.push_back({data(buffers, in.slot) + in.offset * itemsize(in.dtype), in.dtype, cls,
                   strides[i].data()});
  }
  return out;
}

// This thread's slabs (one per tape value), kept from kernel to kernel and grown on demand. A
// fresh std::vector<Slab> per run zero-filled 2 KB per tape value and, past malloc's mmap
// threshold, mapped and faulted in fresh pages: most of a small kernel's time in a loop of
// small steps.
std::vector<Slab>& thread_slabs(size_t n) {
  thread_local std::vector<Slab> slabs;
  if (slabs.size() < n) slabs.resize(n);
  return slabs;
}

} // namespace

void run_elementwise(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers) {
  InputStrides strides;
  for (const KernelInput& in : k.inputs) strides.push_back(in.strides);
  const BoundInputs inputs = bind_inputs(k, buffers, strides, k.shape);
  OutputFlags out_contig;
  for (const KernelOutput& o : k.outputs)
    out_contig.push_back(is_contiguous(Layout{k.shape, o.strides, 0}));
  const int64_t n = k.shape.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Blocks are independent: threads take ranges of them, each with its own slabs.
  parallel_for(blocks, kParallelGrainBlocks, [&](int64_t first, int64_t last) {
    std::vector<Slab>& slabs = thread_slabs(k.tape.size());
    for (int64_t b = first; b < last; ++b) {
      int64_t start = b * kBlock;
      int len = static_cast<int>(std::min<int64_t>(kBlock, n - start));
      eval_block(k, k.shape, inputs, start, len, slabs);
      for (size_t i = 0; i < k.outputs.size(); ++i) {
        const KernelOutput& o = k.outputs[i];
        store_block(slabs[o.value], o.dtype, data(buffers, o.slot) + o.offset * itemsize(o.dtype),
                    k.shape, o.strides.data(), out_contig[i], start, len);
      }
    }
  });
}

namespace {

// One reduction of a reduce kernel and its per-row accumulators for the current row group.
// Accumulators are double for floating operands (the CPU backend is the accuracy reference)
// and int64 for integers and booleans.
struct RowReduction {
  int value = 0;   // the reduction's tape value
  int operand = 0; // the folded tape value
  int pass = 0;    // the pass that folds it (its operand's level)
  OpCode op = OpCode::sum;
  DType dtype = DType::f32; // of the result
  CT ct = CT::f32;          // compute type of the operand
  std::vector<double> accd;
  std::vector<int64_t> acci;
  // A floating sum of a reproducible kernel: double-double (ir/dsum.h), as on the GPU.
  bool exact = false;
  std::vector<DSum> accx;
  std::vector<int64_t> arg;   // argmax: index of the best so far (-1: none yet)
  std::vector<double> result; // per row, rounded to dtype (integers exactly up to 2^53)
  std::vector<int64_t> iresult;

  bool floating() const { return ct == CT::f32 || ct == CT::f64; }
};

template <class A> A initial(OpCode op) {
  if (op == OpCode::max)
    return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                : std::numeric_limits<A>::lowest();
  if (op == OpCode::min)
    return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity()
                                                : std::numeric_limits<A>::max();
  return A(0);
}

// Folds n values of row `row` (its elements first..first+n-1) into its accumulator.
template <class T, class A>
void fold_segment(OpCode op, const T* v, int64_t n, A& a, int64_t& best, int64_t first) {
  switch (op) {
  case OpCode::sum:
  case OpCode::mean:
    if constexpr (std::is_floating_point_v<A>)
      for (int64_t i = 0; i < n; ++i) a += A(v[i]);
    else
      for (int64_t i = 0; i < n; ++i) a = static_cast<A>(uint64_t(a) + uint64_t(int64_t(v[i])));
    break;
  case OpCode::max:
    for (int64_t i = 0; i < n; ++i) a = (A(v[i]) > a || A(v[i]) != A(v[i])) && a == a ? A(v[i]) : a;
    break;
  case OpCode::min:
    for (int64_t i = 0; i < n; ++i) a = (A(v[i]) < a || A(v[i]) != A(v[i])) && a == a ? A(v[i]) : a;
    break;
  case OpCode::argmax:
    for (int64_t i = 0; i < n; ++i) {
      A x = A(v[i]);
      bool take = best < 0 || (a == a && (x > a || x != x)); // first max; NaN wins
      if (take) a = x, best = first + i;
    }
    break;
  default:
    break;
  }
}

// A sum into a double-double accumulator (reproducible kernels).
template <class T> void fold_segment(OpCode, const T* v, int64_t n, DSum& a, int64_t&, int64_t) {
  for (int64_t i = 0; i < n; ++i) a += double(v[i]);
}

// Folds the values of flat indices [pos, pos+len) (relative to the row group) into the rows
// they belong to.
template <class T, class A>
void fold_block(RowReduction& r, std::vector<A>& acc, const T* v, int64_t pos, int len, int64_t R) {
  int64_t end = pos + len;
  while (pos < end) {
    int64_t row = pos / R;
    int64_t seg = std::min(end, (row + 1) * R) - pos;
    int64_t dummy = -1;
    fold_segment(r.op, v, seg, acc[row], r.op == OpCode::argmax ? r.arg[row] : dummy,
                 pos - row * R);
    v += seg;
    pos += seg;
  }
}

void fold_any(RowReduction& r, const Slab& slab, int64_t pos, int len, int64_t R) {
  if (r.exact)
    return r.ct == CT::f64 ? fold_block(r, r.accx, slab.as<double>(), pos, len, R)
                           : fold_block(r, r.accx, slab.as<float>(), pos, len, R);
  switch (r.ct) {
  case CT::f32:
    return fold_block(r, r.accd, slab.as<float>(), pos, len, R);
  case CT::f64:
    return fold_block(r, r.accd, slab.as<double>(), pos, len, R);
  case CT::i32:
    return fold_block(r, r.acci, slab.as<int32_t>(), pos, len, R);
  case CT::i64:
    return fold_block(r, r.acci, slab.as<int64_t>(), pos, len, R);
  }
}

void start_rows(RowReduction& r, int64_t rows) {
  if (r.exact)
    r.accx.assign(rows, DSum{0, 0});
  else if (r.floating())
    r.accd.assign(rows, initial<double>(r.op));
  else
    r.acci.assign(rows, initial<int64_t>(r.op));
  if (r.op == OpCode::argmax) r.arg.assign(rows, -1);
}

// Each row's result as stored in r.dtype and read back (so later passes see exactly what an
// unfused kernel would have loaded).
void finish_rows(RowReduction& r, int64_t rows, int64_t R) {
  r.result.resize(rows);
  r.iresult.resize(rows);
  for (int64_t i = 0; i < rows; ++i) {
    if (r.op == OpCode::argmax) {
      r.iresult[i] = r.arg[i];
      r.result[i] = static_cast<double>(r.arg[i]);
      continue;
    }
    if (is_floating(r.dtype)) {
      double v = r.exact        ? r.accx[i].value()
                 : r.floating() ? r.accd[i]
                                : static_cast<double>(r.acci[i]);
      if (r.op == OpCode::mean) v /= static_cast<double>(R);
      if (r.dtype != DType::f64) {
        char tmp[8];
        convert_elements(&v, DType::f64, tmp, r.dtype, 1);
        v = load_as_double(tmp, r.dtype, 0);
      }
      r.result[i] = v;
      continue;
    }
    int64_t v = r.floating() ? saturate_cast<int64_t>(r.accd[i]) : r.acci[i];
    char tmp[8];
    convert_elements(&v, DType::i64, tmp, r.dtype, 1);
    int64_t back = 0;
    convert_elements(tmp, r.dtype, &back, DType::i64, 1);
    r.iresult[i] = back;
    r.result[i] = static_cast<double>(back);
  }
}

// Broadcast each row's result over the block's elements, in the compute type of r.dtype.
void fill_block(const RowReduction& r, Slab& slab, int64_t pos, int len, int64_t R) {
  auto fill = [&](auto* out, const auto& vals) {
    for (int e = 0; e < len;) {
      int64_t row = (pos + e) / R;
      int n = static_cast<int>(std::min<int64_t>(len - e, (row + 1) * R - (pos + e)));
      auto v = vals[row];
      for (int j = 0; j < n; ++j) out[e + j] = static_cast<std::remove_pointer_t<decltype(out)>>(v);
      e += n;
    }
  };
  switch (compute_type(r.dtype)) {
  case CT::f32:
    return fill(slab.as<float>(), r.result);
  case CT::f64:
    return fill(slab.as<double>(), r.result);
  case CT::i32:
    return fill(slab.as<int32_t>(), r.iresult);
  case CT::i64:
    return fill(slab.as<int64_t>(), r.iresult);
  }
}

void store_rows(const RowReduction& r, const KernelOutput& o, char* base, int64_t first_row,
                int64_t rows) {
  char* dst = base + (o.offset + first_row) * itemsize(o.dtype);
  if (is_floating(r.dtype))
    convert_elements(r.result.data(), DType::f64, dst, o.dtype, rows);
  else
    convert_elements(r.iresult.data(), DType::i64, dst, o.dtype, rows);
}

// Rows are processed in groups of about this many elements (at least one row): a group's
// rows are walked once per pass while they are still in cache.
constexpr int64_t kRowGroupElems = 16 * kBlock;

// Folds value e of `v` into column e's accumulator, for n columns: fold_segment's rules, one
// element per column.
template <class T, class A> void fold_columns(OpCode op, const T* v, A* acc, int n) {
  switch (op) {
  case OpCode::sum:
  case OpCode::mean:
    if constexpr (std::is_floating_point_v<A>)
      for (int e = 0; e < n; ++e) acc[e] += A(v[e]);
    else
      for (int e = 0; e < n; ++e)
        acc[e] = static_cast<A>(uint64_t(acc[e]) + uint64_t(int64_t(v[e])));
    break;
  case OpCode::max:
    for (int e = 0; e < n; ++e)
      acc[e] = (A(v[e]) > acc[e] || A(v[e]) != A(v[e])) && acc[e] == acc[e] ? A(v[e]) : acc[e];
    break;
  case OpCode::min:
    for (int e = 0; e < n; ++e)
      acc[e] = (A(v[e]) < acc[e] || A(v[e]) != A(v[e])) && acc[e] == acc[e] ? A(v[e]) : acc[e];
    break;
  default:
    break;
  }
}

template <class T> void fold_columns(OpCode, const T* v, DSum* acc, int n) {
  for (int e = 0; e < n; ++e) acc[e] += double(v[e]);
}

void fold_columns_any(RowReduction& r, const Slab& slab, int n) {
  if (r.exact)
    return r.ct == CT::f64 ? fold_columns(r.op, slab.as<double>(), r.accx.data(), n)
                           : fold_columns(r.op, slab.as<float>(), r.accx.data(), n);
  switch (r.ct) {
  case CT::f32:
    return fold_columns(r.op, slab.as<float>(), r.accd.data(), n);
  case CT::f64:
    return fold_columns(r.op, slab.as<double>(), r.accd.data(), n);
  case CT::i32:
    return fold_columns(r.op, slab.as<int32_t>(), r.acci.data(), n);
  case CT::i64:
    return fold_columns(r.op, slab.as<int64_t>(), r.acci.data(), n);
  }
}

// Whether run_reduce may walk k column-wise: one pass, every output a reduction's result (no
// argmax), the reduced dims leading and the kept ones trailing (a sum over a matrix's rows,
// such as a bias's gradient over stacked steps), at least a block of kept columns.
bool column_walk(const FusedKernel& k, const ReducePasses& rp) {
  if (rp.passes != 1) return false;
  for (const KernelOutput& o : k.outputs)
    if (!o.reduced) return false;
  for (const TapeInst& t : k.tape)
    if (t.op == OpCode::argmax) return false;
  int lead = 0;
  while (lead < k.shape.size() && (k.reduce_axes & (1u << lead))) ++lead;
  if (lead == 0 || (k.reduce_axes >> lead) != 0) return false; // not a leading prefix
  int64_t kept = 1;
  for (int d = lead; d < k.shape.size(); ++d) kept *= k.shape[d];
  return kept >= kBlock;
}

// The column walk: blocks of kBlock kept columns, each folded over every reduced index in
// memory order (the row-by-row walk reads such inputs with a stride of the row length). Each
// column still folds its values in index order, so the results are the same bits.
void run_column_reduce(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers,
                       const ReducePasses& rp, const std::vector<RowReduction>& proto) {
  int64_t R = 1, O = 1;
  for (int d = 0; d < k.shape.size(); ++d) (k.reduce_axes & (1u << d) ? R : O) *= k.shape[d];
  InputStrides strides;
  for (const KernelInput& in : k.inputs) strides.push_back(in.strides);
  const BoundInputs inputs = bind_inputs(k, buffers, strides, k.shape);
  const int64_t blocks = (O + kBlock - 1) / kBlock;
  parallel_for(blocks, std::max<int64_t>(1, kParallelGrainBlocks / std::max<int64_t>(R, 1)),
               [&](int64_t first, int64_t last) {
                 std::vector<Slab>& slabs = thread_slabs(k.tape.size());
                 std::vector<RowReduction> reds = proto;
                 for (int64_t b = first; b < last; ++b) {
                   const int64_t c0 = b * kBlock;
                   const int len = static_cast<int>(std::min<int64_t>(kBlock, O - c0));
                   for (RowReduction& r : reds) start_rows(r, len);
                   for (int64_t i = 0; i < R; ++i) {
                     eval_block(k, k.shape, inputs, i * O + c0, len, slabs, rp.level.data(), 0);
                     for (RowReduction& r : reds) fold_columns_any(r, slabs[r.operand], len);
                   }
                   for (RowReduction& r : reds) finish_rows(r, len, R);
                   for (const KernelOutput& o : k.outputs)
                     for (const RowReduction& r : reds)
                       if (o.value == r.value) store_rows(r, o, data(buffers, o.slot), c0, len);
                 }
               });
}

} // namespace

void run_reduce(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers) {
  // Permute the iteration space so that kept dims come first and reduced dims last; then each
  // output row owns a run of R consecutive flat indices.
  int rank = k.shape.size();
  llvm::SmallVector<int, kMaxRank> perm;
  for (int d = 0; d < rank; ++d)
    if (!(k.reduce_axes & (1u << d))) perm.push_back(d);
  for (int d = 0; d < rank; ++d)
    if (k.reduce_axes & (1u << d)) perm.push_back(d);
  bool identity = true;
  Shape pshape;
  int64_t R = 1, O = 1;
  for (int i = 0; i < rank; ++i) {
    int d = perm[i];
    identity &= d == i;
    pshape.push_back(k.shape[d]);
    (k.reduce_axes & (1u << d) ? R : O) *= k.shape[d];
  }
  auto permuted = [&](const Shape& st) {
    Shape s;
    for (int d : perm) s.push_back(st[d]);
    return s;
  };
  InputStrides strides;
  for (const KernelInput& in : k.inputs) strides.push_back(permuted(in.strides));
  const BoundInputs inputs = bind_inputs(k, buffers, strides, pshape);
  InputStrides out_strides;
  OutputFlags out_contig;
  for (const KernelOutput& o : k.outputs) {
    out_strides.push_back(o.reduced ? o.strides : permuted(o.strides));
    out_contig.push_back(!o.reduced && identity && is_contiguous(Layout{k.shape, o.strides, 0}));
  }

  const ReducePasses rp = reduce_passes(k);
  std::vector<RowReduction> proto;
  for (size_t i = 0; i < k.tape.size(); ++i) {
    const TapeInst& t = k.tape[i];
    if (!is_reduction(t.op)) continue;
    RowReduction r;
    r.value = static_cast<int>(i);
    r.operand = t.a;
    r.pass = rp.level[t.a];
    r.op = t.op;
    r.dtype = t.dtype;
    r.ct = compute_type(k.tape[t.a].dtype);
    r.exact = k.reproducible && r.floating() && (t.op == OpCode::sum || t.op == OpCode::mean);
    proto.push_back(std::move(r));
  }
  if (column_walk(k, rp)) return run_column_reduce(k, buffers, rp, proto);

  // Threads take ranges of rows; each row is still folded in order by one thread, so results
  // don't depend on the thread count.
  const int64_t grain =
      std::max<int64_t>(1, kParallelGrainBlocks * kBlock / std::max<int64_t>(R, 1));
  const int64_t group_rows = std::max<int64_t>(1, kRowGroupElems / std::max<int64_t>(R, 1));
  parallel_for(O, grain, [&](int64_t first, int64_t last) {
    std::vector<Slab>& slabs = thread_slabs(k.tape.size());
    std::vector<RowReduction> reds = proto;
    for (int64_t g0 = first; g0 < last; g0 += group_rows) {
      const int64_t rows = std::min(group_rows, last - g0);
      const int64_t lo = g0 * R, hi = (g0 + rows) * R;
      for (int p = 0; p < rp.passes; ++p) {
        for (RowReduction& r : reds)
          if (r.pass == p) start_rows(r, rows);
        for (int64_t start = lo; start < hi; start += kBlock) {
          int len = static_cast<int>(std::min<int64_t>(kBlock, hi - start));
          for (RowReduction& r : reds)
            if (r.pass < p) fill_block(r, slabs[r.value], start - lo, len, R);
          eval_block(k, pshape, inputs, start, len, slabs, rp.level.data(), p);
          for (RowReduction& r : reds)
            if (r.pass == p) fold_any(r, slabs[r.operand], start - lo, len, R);
          for (size_t i = 0; i < k.outputs.size(); ++i) {
            const KernelOutput& o = k.outputs[i];
            if (o.reduced || rp.level[o.value] != p) continue;
            store_block(slabs[o.value], o.dtype,
                        data(buffers, o.slot) + o.offset * itemsize(o.dtype), pshape,
                        out_strides[i].data(), out_contig[i], start, len);
          }
        }
        for (RowReduction& r : reds)
          if (r.pass == p) finish_rows(r, rows, R);
      }
      for (const KernelOutput& o : k.outputs)
        for (const RowReduction& r : reds)
          if (o.reduced && o.value == r.value) store_rows(r, o, data(buffers, o.slot), g0, rows);
    }
  });
}

} // namespace kiln::detail::cpu

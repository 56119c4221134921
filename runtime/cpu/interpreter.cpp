#include "runtime/cpu/interpreter.h"

#include "engine/host_convert.h"
#include "runtime/cpu/tape_eval.h"
#include "runtime/cpu/thread_pool.h"

#include <cmath>
#include <limits>

namespace kiln::detail::cpu {

namespace {

// Kernels under 64 blocks (16K elements) run on the calling thread: small tensors (an RNN
// step) would pay more for waking threads than they save.
constexpr int64_t kParallelGrainBlocks = 64;

std::vector<BoundInput> bind_inputs(const FusedKernel& k, llvm::ArrayRef<char*> base,
                                    llvm::ArrayRef<Shape> strides, const Shape& shape) {
  std::vector<BoundInput> out;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const KernelInput& in = k.inputs[i];
    IndexClass cls = in.cls;
    if (cls == IndexClass::contiguous && !is_contiguous(Layout{shape, strides[i], 0}))
      cls = IndexClass::strided; // a reduction permuted the iteration space
    out.push_back(
        {base[in.slot] + in.offset * itemsize(in.dtype), in.dtype, cls, strides[i].data()});
  }
  return out;
}

} // namespace

void run_elementwise(const FusedKernel& k, llvm::ArrayRef<char*> base) {
  std::vector<Shape> strides;
  for (const KernelInput& in : k.inputs) strides.push_back(in.strides);
  std::vector<BoundInput> inputs = bind_inputs(k, base, strides, k.shape);
  std::vector<bool> out_contig;
  for (const KernelOutput& o : k.outputs)
    out_contig.push_back(is_contiguous(Layout{k.shape, o.strides, 0}));
  const int64_t n = k.shape.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Blocks are independent: threads take ranges of them, each with its own slabs.
  parallel_for(blocks, kParallelGrainBlocks, [&](int64_t first, int64_t last) {
    std::vector<Slab> slabs(k.tape.size());
    for (int64_t b = first; b < last; ++b) {
      int64_t start = b * kBlock;
      int len = static_cast<int>(std::min<int64_t>(kBlock, n - start));
      eval_block(k, k.shape, inputs, start, len, slabs);
      for (size_t i = 0; i < k.outputs.size(); ++i) {
        const KernelOutput& o = k.outputs[i];
        store_block(slabs[o.value], o.dtype, base[o.slot] + o.offset * itemsize(o.dtype), k.shape,
                    o.strides.data(), out_contig[i], start, len);
      }
    }
  });
}

namespace {

// Folds values of one block into per-output accumulators. A is double for floating inputs
// (the CPU backend is the accuracy reference) and int64 for integers and booleans.
template <class T, class A> struct Reducer {
  OpCode op;
  std::vector<A>& acc;
  std::vector<int64_t>& arg; // argmax: index of the best so far (-1: none yet)
  void fold(const T* v, int64_t pos, int len, int64_t R) {
    int64_t end = pos + len;
    const T* p = v;
    while (pos < end) {
      int64_t o = pos / R;
      int64_t seg = std::min(end, (o + 1) * R) - pos;
      fold_segment(p, seg, o, pos - o * R);
      p += seg;
      pos += seg;
    }
  }
  void fold_segment(const T* v, int64_t n, int64_t o, int64_t first) {
    A a = acc[o];
    switch (op) {
    case OpCode::sum:
    case OpCode::mean:
      if constexpr (std::is_floating_point_v<A>)
        for (int64_t i = 0; i < n; ++i) a += A(v[i]);
      else
        for (int64_t i = 0; i < n; ++i) a = static_cast<A>(uint64_t(a) + uint64_t(int64_t(v[i])));
      break;
    case OpCode::max:
      for (int64_t i = 0; i < n; ++i)
        a = (A(v[i]) > a || A(v[i]) != A(v[i])) && a == a ? A(v[i]) : a;
      break;
    case OpCode::min:
      for (int64_t i = 0; i < n; ++i)
        a = (A(v[i]) < a || A(v[i]) != A(v[i])) && a == a ? A(v[i]) : a;
      break;
    case OpCode::argmax: {
      int64_t best = arg[o];
      for (int64_t i = 0; i < n; ++i) {
        A x = A(v[i]);
        bool take = best < 0 || (a == a && (x > a || x != x)); // first max; NaN wins
        if (take) a = x, best = first + i;
      }
      arg[o] = best;
      break;
    }
    default:
      break;
    }
    acc[o] = a;
  }
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

template <class T, class A>
void reduce_typed(const FusedKernel& k, llvm::ArrayRef<char*> base, const Shape& pshape,
                  llvm::ArrayRef<BoundInput> inputs, int64_t O, int64_t R) {
  std::vector<A> acc(O, initial<A>(k.reduce_op));
  std::vector<int64_t> arg(k.reduce_op == OpCode::argmax ? O : 0, -1);
  Reducer<T, A> red{k.reduce_op, acc, arg};
  // Threads take ranges of outputs; each output is still folded in order by one thread, so
  // results don't depend on the thread count.
  int64_t grain = std::max<int64_t>(1, kParallelGrainBlocks * kBlock / std::max<int64_t>(R, 1));
  parallel_for(O, grain, [&](int64_t first, int64_t last) {
    std::vector<Slab> slabs(k.tape.size());
    const int64_t end = last * R;
    for (int64_t start = first * R; start < end; start += kBlock) {
      int len = static_cast<int>(std::min<int64_t>(kBlock, end - start));
      eval_block(k, pshape, inputs, start, len, slabs);
      red.fold(slabs[k.reduce_value].as<T>(), start, len, R);
    }
  });
  const KernelOutput& out = k.outputs[0];
  char* dst = base[out.slot] + out.offset * itemsize(out.dtype);
  if (k.reduce_op == OpCode::argmax) {
    convert_elements(arg.data(), DType::i64, dst, out.dtype, O);
    return;
  }
  if constexpr (std::is_floating_point_v<A>) {
    if (k.reduce_op == OpCode::mean)
      for (A& a : acc) a /= static_cast<A>(R);
    convert_elements(acc.data(), DType::f64, dst, out.dtype, O);
  } else {
    convert_elements(acc.data(), DType::i64, dst, out.dtype, O);
  }
}

} // namespace

void run_reduce(const FusedKernel& k, llvm::ArrayRef<char*> base) {
  // Permute the iteration space so that kept dims come first and reduced dims last; then each
  // output owns a run of R consecutive flat indices.
  int rank = k.shape.size();
  llvm::SmallVector<int, kMaxRank> perm;
  for (int d = 0; d < rank; ++d)
    if (!(k.reduce_axes & (1u << d))) perm.push_back(d);
  for (int d = 0; d < rank; ++d)
    if (k.reduce_axes & (1u << d)) perm.push_back(d);
  Shape pshape;
  int64_t R = 1, O = 1;
  for (int d : perm) {
    pshape.push_back(k.shape[d]);
    (k.reduce_axes & (1u << d) ? R : O) *= k.shape[d];
  }
  std::vector<Shape> strides;
  for (const KernelInput& in : k.inputs) {
    Shape s;
    for (int d : perm) s.push_back(in.strides[d]);
    strides.push_back(s);
  }
  std::vector<BoundInput> inputs = bind_inputs(k, base, strides, pshape);
  DType vt = k.tape[k.reduce_value].dtype;
  switch (compute_type(vt)) {
  case CT::f32:
    return reduce_typed<float, double>(k, base, pshape, inputs, O, R);
  case CT::f64:
    return reduce_typed<double, double>(k, base, pshape, inputs, O, R);
  case CT::i32:
    return reduce_typed<int32_t, int64_t>(k, base, pshape, inputs, O, R);
  case CT::i64:
    return reduce_typed<int64_t, int64_t>(k, base, pshape, inputs, O, R);
  }
}

} // namespace kiln::detail::cpu

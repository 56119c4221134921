// The plan shared by renderer and packer, and the Params struct declared from it.
//
// One description drives both the source and the launch: `CgPlan` (built by cuda_make_plan)
// lists the Params fields in order with their names, types and, for a launch, their values. The
// renderer declares `struct Params` from that list and refers to fields by the names it gave
// them; the packer writes the same list's values. A static_assert in the source checks the
// struct size.
//
// Params fields (all 8 bytes), in order:
//   elementwise: n                       number of elements
//   reduce:      O, R                    outputs, reduced elements per output
//   sh<d>        extent of dim d (reduce: of the permuted shape, kept dims first); present when
//                some operand is indexed through strides
//   in<j>        input j's pointer, already advanced by its offset
//   in<j>_s<d>   its stride (elements) for dim d; only dims whose stride is nonzero (the
//                broadcast pattern is structural, part of the key)
//   out<j>       output j's pointer (advanced by its offset), then out<j>_s<d> when strided
//   c<t>         tape constant t: double (floating dtypes) or int64 (integers, bool 0/1)
//   c<t>_a/_b    iota t: start, step (double)
//   c<t>_seed/_ctr  rand t: Philox key and counter (uint64)
//   d<j>_K, d<j>_ak, d<j>_bk  dot j: length, and its operands' strides along K
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <bit>

namespace kiln::detail::cg {

namespace {

uint64_t i64_bits(int64_t v) {
  return static_cast<uint64_t>(v);
}
uint64_t f64_bits(double v) {
  return std::bit_cast<uint64_t>(v);
}

} // namespace

bool trailing_reduce(const FusedKernel& k) {
  const int rank = k.shape.size();
  uint32_t trailing = 0;
  for (int d = rank - std::popcount(k.reduce_axes); d < rank; ++d) trailing |= 1u << d;
  return k.reduce_axes == trailing;
}

bool out_contiguous(const FusedKernel& k, const KernelOutput& o) {
  if (o.reduced) return true;
  if (k.kind == FusedKernel::Kind::reduce && !trailing_reduce(k)) return false;
  return is_contiguous(Layout{k.shape, o.strides, 0});
}

namespace {

using M = CgOperand::Mode;
using T = CgField::Type;

// The iteration order (reduce: kept dims, then reduced dims) and how each operand is indexed.
void plan_operands(const FusedKernel& k, CgPlan& pl) {
  pl.reduce = k.kind == FusedKernel::Kind::reduce;
  pl.rank = k.shape.size();
  for (int d = 0; d < pl.rank; ++d)
    if (!pl.reduce || !(k.reduce_axes & (1u << d))) pl.perm.push_back(d);
  pl.nkept = static_cast<int>(pl.perm.size());
  if (pl.reduce)
    for (int d = 0; d < pl.rank; ++d)
      if (k.reduce_axes & (1u << d)) pl.perm.push_back(d);
  bool identity = true;
  for (int d = 0; d < pl.rank; ++d) identity &= pl.perm[d] == d;
  for (const KernelInput& in : k.inputs) {
    CgOperand op;
    if (in.cls == IndexClass::scalar) {
      op.mode = M::scalar;
    } else if (in.cls == IndexClass::contiguous && identity) {
      op.mode = M::contiguous; // offset + flat index (a reduce over trailing dims keeps it)
    } else {
      op.mode = M::strided; // contiguous in a permuted reduction: every stride is a field
      for (int d = 0; d < pl.rank; ++d)
        if (in.cls == IndexClass::contiguous || in.strides[pl.perm[d]] != 0) op.dims.push_back(d);
    }
    pl.shape_fields |= op.mode == M::strided;
    pl.in.push_back(op);
  }
  for (const KernelOutput& o : k.outputs) {
    CgOperand op;
    if (!out_contiguous(k, o)) {
      op.mode = M::strided;
      for (int d = 0; d < pl.rank; ++d) op.dims.push_back(d);
    }
    pl.shape_fields |= op.mode == M::strided;
    pl.out.push_back(op);
  }
}

void add(CgPlan& pl, T t, std::string name, uint64_t bits, std::string ptr_type = {}) {
  pl.fields.push_back({t, std::move(name), std::move(ptr_type), bits});
}

// Sizes, the operands' pointers (their values from slot_base, 0 without) and strides.
void plan_memory_fields(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, CgPlan& pl) {
  auto ptr = [&](int slot, int64_t offset, DType dt) -> uint64_t {
    if (slot < 0 || static_cast<size_t>(slot) >= slot_base.size() || !slot_base[slot]) return 0;
    const char* base = static_cast<const char*>(slot_base[slot]);
    return reinterpret_cast<uintptr_t>(base + offset * itemsize(dt));
  };
  if (pl.reduce) {
    int64_t O = 1, R = 1;
    for (int d = 0; d < pl.rank; ++d) (d < pl.nkept ? O : R) *= k.shape[pl.perm[d]];
    add(pl, T::i64, "O", i64_bits(O));
    add(pl, T::i64, "R", i64_bits(R));
  } else {
    add(pl, T::i64, "n", i64_bits(k.shape.numel()));
  }
  if (pl.shape_fields)
    for (int d = 0; d < pl.rank; ++d) add(pl, T::i64, fmt::format("sh{}", d), k.shape[pl.perm[d]]);
  auto ptr_field = [&](std::string name, int slot, int64_t offset, DType dt, std::string type) {
    add(pl, T::ptr, std::move(name), ptr(slot, offset, dt), std::move(type));
    pl.fields.back().slot = slot;
    pl.fields.back().byte_offset = offset * itemsize(dt);
  };
  for (size_t j = 0; j < k.inputs.size(); ++j) {
    const KernelInput& in = k.inputs[j];
    ptr_field(fmt::format("in{}", j), in.slot, in.offset, in.dtype,
              fmt::format("const {}*", cg::st_name(in.dtype)));
    for (int d : pl.in[j].dims)
      add(pl, T::i64, fmt::format("in{}_s{}", j, d), i64_bits(in.strides[pl.perm[d]]));
  }
  for (size_t j = 0; j < k.outputs.size(); ++j) {
    const KernelOutput& o = k.outputs[j];
    ptr_field(fmt::format("out{}", j), o.slot, o.offset, o.dtype,
              fmt::format("{}*", cg::st_name(o.dtype)));
    for (int d : pl.out[j].dims)
      add(pl, T::i64, fmt::format("out{}_s{}", j, d), i64_bits(o.strides[pl.perm[d]]));
  }
}

// The tape's constants, iota parameters and random keys, and the dot products' K and strides:
// values, never part of the source, so one compiled kernel serves them all.
void plan_value_fields(const FusedKernel& k, CgPlan& pl) {
  for (size_t t = 0; t < k.tape.size(); ++t) {
    const TapeInst& in = k.tape[t];
    switch (in.op) {
    case OpCode::constant:
      add(pl, is_floating(in.dtype) ? T::f64 : T::i64, fmt::format("c{}", t), constant_bits(in));
      pl.fields.back().inst = static_cast<int>(t);
      break;
    case OpCode::iota:
      add(pl, T::f64, fmt::format("c{}_a", t), f64_bits(in.imm));
      add(pl, T::f64, fmt::format("c{}_b", t), f64_bits(in.imm2));
      break;
    case OpCode::rand_uniform:
    case OpCode::rand_normal:
      add(pl, T::u64, fmt::format("c{}_seed", t), in.seed);
      add(pl, T::u64, fmt::format("c{}_ctr", t), in.counter);
      break;
    default:
      break;
    }
  }
  for (size_t j = 0; j < k.dots.size(); ++j) {
    const KernelDot& d = k.dots[j];
    add(pl, T::i64, fmt::format("d{}_K", j), i64_bits(d.K));
    add(pl, T::i64, fmt::format("d{}_ak", j), i64_bits(d.a_k));
    add(pl, T::i64, fmt::format("d{}_bk", j), i64_bits(d.b_k));
  }
}

} // namespace

uint64_t constant_bits(const TapeInst& in) {
  if (is_floating(in.dtype)) return f64_bits(in.imm);
  return i64_bits(in.dtype == DType::boolean ? (in.imm != 0) : in.iimm);
}

CgPlan cuda_make_plan(const FusedKernel& k, llvm::ArrayRef<void*> slot_base) {
  CgPlan pl;
  plan_operands(k, pl);
  plan_memory_fields(k, slot_base, pl);
  plan_value_fields(k, pl);
  return pl;
}

std::string params_decl(const CgPlan& pl, const std::string& type) {
  std::string s = "struct " + type + " {\n";
  for (const CgField& f : pl.fields) {
    const char* t = f.type == CgField::Type::i64   ? "long long"
                    : f.type == CgField::Type::u64 ? "unsigned long long"
                    : f.type == CgField::Type::f64 ? "double"
                                                   : f.ptr_type.c_str();
    s += fmt::format("  {} {};\n", t, f.name);
  }
  s += "};\n";
  s += fmt::format("static_assert(sizeof({}) == {}, \"Params layout\");\n", type,
                   8 * pl.fields.size());
  return s;
}

} // namespace kiln::detail::cg

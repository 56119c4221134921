// The stand-in interpreter's argument blocks (codegen/standin.h): the kernel's own Params, then
// a Program describing its operands, tape and dot products in terms of those Params' fields.
#include "codegen/standin.h"

#include "codegen/cuda_codegen_internal.h"
#include "codegen/device/standin_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace kiln::detail {

namespace si = standin;

static_assert(uint8_t(DType::f32) == si::t_f32 && uint8_t(DType::f64) == si::t_f64 &&
                  uint8_t(DType::f16) == si::t_f16 && uint8_t(DType::bf16) == si::t_bf16 &&
                  uint8_t(DType::i32) == si::t_i32 && uint8_t(DType::i64) == si::t_i64 &&
                  uint8_t(DType::boolean) == si::t_bool,
              "standin::Type follows kiln::DType");
static_assert(si::kBlock == cg::kBlock, "the interpreter's dot layout uses the emitters' blocks");

namespace {

// Why the interpreter cannot run a kernel (thrown inside this file only, caught by plan_standin).
struct NotCovered {
  std::string why;
};

std::optional<si::Op> op_of(OpCode op) {
  switch (op) {
#define KILN_STANDIN_OP(name)                                                                      \
  case OpCode::name:                                                                               \
    return si::op_##name;
    KILN_STANDIN_OP(load)
    KILN_STANDIN_OP(constant)
    KILN_STANDIN_OP(iota)
    KILN_STANDIN_OP(rand_uniform)
    KILN_STANDIN_OP(rand_normal)
    KILN_STANDIN_OP(copy)
    KILN_STANDIN_OP(neg)
    KILN_STANDIN_OP(abs)
    KILN_STANDIN_OP(relu)
    KILN_STANDIN_OP(exp)
    KILN_STANDIN_OP(log)
    KILN_STANDIN_OP(log1p)
    KILN_STANDIN_OP(sqrt)
    KILN_STANDIN_OP(rsqrt)
    KILN_STANDIN_OP(sin)
    KILN_STANDIN_OP(cos)
    KILN_STANDIN_OP(tanh)
    KILN_STANDIN_OP(sigmoid)
    KILN_STANDIN_OP(gelu)
    KILN_STANDIN_OP(logical_not)
    KILN_STANDIN_OP(cast)
    KILN_STANDIN_OP(add)
    KILN_STANDIN_OP(sub)
    KILN_STANDIN_OP(mul)
    KILN_STANDIN_OP(div)
    KILN_STANDIN_OP(pow)
    KILN_STANDIN_OP(maximum)
    KILN_STANDIN_OP(minimum)
    KILN_STANDIN_OP(sigmoid_grad)
    KILN_STANDIN_OP(tanh_grad)
    KILN_STANDIN_OP(eq)
    KILN_STANDIN_OP(ne)
    KILN_STANDIN_OP(lt)
    KILN_STANDIN_OP(le)
    KILN_STANDIN_OP(gt)
    KILN_STANDIN_OP(ge)
    KILN_STANDIN_OP(logical_and)
    KILN_STANDIN_OP(logical_or)
    KILN_STANDIN_OP(where)
    KILN_STANDIN_OP(matmul)
    KILN_STANDIN_OP(sum)
    KILN_STANDIN_OP(mean)
    KILN_STANDIN_OP(max)
    KILN_STANDIN_OP(min)
    KILN_STANDIN_OP(argmax)
#undef KILN_STANDIN_OP
  default:
    return std::nullopt;
  }
}

// The value operands of an instruction (load's `a` is an input, matmul's a dot).
int value_operands(const TapeInst& in) {
  if (in.op == OpCode::load || op_kind(in.op) == OpKind::Source || in.op == OpCode::matmul)
    return 0;
  return in.c >= 0 ? 3 : in.b >= 0 ? 2 : 1;
}

// The operand types the generated expression takes for granted (cuda_codegen_ops.cpp): the
// interpreter computes each op in its result's type, so anything else is left to NVRTC.
void check_types(const FusedKernel& k, const TapeInst& in) {
  auto type = [&](int v) { return k.tape[v].dtype; };
  auto fail = [&](const char* what) {
    throw NotCovered{fmt::format("{} on {}: {}", op_name(in.op), dtype_name(in.dtype), what)};
  };
  const bool floating = is_floating(in.dtype);
  switch (op_kind(in.op)) {
  case OpKind::UnaryFloat:
    if (!floating || type(in.a) != in.dtype) fail("not a floating op of its own type");
    break;
  case OpKind::Unary:
    if (type(in.a) != in.dtype) fail("operand of another type");
    break;
  case OpKind::Binary:
    if (type(in.a) != in.dtype || type(in.b) != in.dtype) fail("operands of another type");
    if (!floating && (in.op == OpCode::sigmoid_grad || in.op == OpCode::tanh_grad))
      fail("integer derivative");
    break;
  case OpKind::Compare:
    if (type(in.a) != type(in.b)) fail("operands of two types");
    break;
  case OpKind::Logical:
    for (int v : {in.a, in.b})
      if (v >= 0 && type(v) != DType::boolean && type(v) != DType::i32) fail("wide operand");
    break;
  case OpKind::Ternary:
    if (type(in.b) != in.dtype || type(in.c) != in.dtype) fail("branches of another type");
    break;
  case OpKind::Source:
    if ((in.op == OpCode::rand_uniform || in.op == OpCode::rand_normal) && !floating)
      fail("integer random numbers");
    break;
  case OpKind::Gemm:
    if (!floating) fail("integer dot product");
    break;
  case OpKind::Load:
    if (k.inputs[in.a].dtype != in.dtype) fail("a load that converts");
    break;
  default:
    break;
  }
}

// Value slots: each value takes a free slot when it is defined; an operand's slot is free again
// after its last use (outputs are used at the end). A reduction's row value outlives the passes
// that compute the values before it again, so reductions take slots of their own, the first
// ones. Returns the slot per value.
std::vector<int> assign_slots(const FusedKernel& k, int& slots_used) {
  const int n = static_cast<int>(k.tape.size());
  std::vector<int> last(n, -1);
  for (int t = 0; t < n; ++t) {
    const TapeInst& in = k.tape[t];
    int ops = value_operands(in);
    for (int v : {in.a, in.b, in.c})
      if (ops-- > 0) last[v] = t;
  }
  for (const KernelOutput& o : k.outputs) last[o.value] = n;
  std::vector<int> slot(n, -1), free_slots;
  slots_used = 0;
  for (int t = 0; t < n; ++t)
    if (is_reduction(k.tape[t].op)) slot[t] = slots_used++;
  for (int t = 0; t < n; ++t) {
    const TapeInst& in = k.tape[t];
    int seen = value_operands(in);
    for (int v : {in.a, in.b, in.c}) // freed before the result takes one: read first
      if (seen-- > 0 && last[v] == t && !is_reduction(k.tape[v].op) &&
          std::find(free_slots.begin(), free_slots.end(), slot[v]) == free_slots.end())
        free_slots.push_back(slot[v]);
    if (is_reduction(in.op)) continue;
    if (free_slots.empty()) {
      slot[t] = slots_used++;
    } else {
      slot[t] = free_slots.back();
      free_slots.pop_back();
    }
    if (last[t] < 0) free_slots.push_back(slot[t]); // never read
  }
  return slot;
}

template <class T> void append(std::vector<std::byte>& out, const T& x) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &x, sizeof(T));
}

// One kernel's Program: its operands, tape and dot products in terms of its Params' fields.
class ProgramBuilder {
public:
  ProgramBuilder(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t)
      : k_(k), v_(v), t_(t), pl_(cg::cuda_make_plan(k, {})) {
    for (size_t i = 0; i < pl_.fields.size(); ++i)
      field_[pl_.fields[i].name] = static_cast<uint16_t>(i);
    if (reduce()) rp_ = reduce_passes(k);
  }

  size_t fields() const { return pl_.fields.size(); }

  // The Program's bytes; `large`: it needs the interpreter with more value slots.
  std::vector<std::byte> bytes(bool& large) const {
    check_covered();
    int slots = 0;
    const std::vector<int> slot = assign_slots(k_, slots);
    if (slots > si::kLargeSlots)
      throw NotCovered{fmt::format("{} live values, more than {}", slots, si::kLargeSlots)};
    large = slots > si::kSmallSlots;
    std::vector<std::byte> out;
    append(out, program());
    for (size_t j = 0; j < k_.inputs.size(); ++j) append(out, input(j));
    for (size_t j = 0; j < k_.outputs.size(); ++j) append(out, output(j, slot));
    int reds = 0;
    for (size_t t = 0; t < k_.tape.size(); ++t) append(out, inst(t, slot, reds));
    for (const KernelDot& d : k_.dots) append(out, dot(d));
    return out;
  }

private:
  bool reduce() const { return k_.kind == FusedKernel::Kind::reduce; }
  bool dot_layout() const { return !k_.dots.empty() && v_.gemm_tile == 0; }
  bool gemm_layout() const { return v_.gemm_tile > 0; }
  int cluster() const { return t_.arch >= 90 ? std::max(1, v_.dot_cluster) : 1; }

  void check_covered() const {
    if (k_.reproducible) throw NotCovered{"a reproducible kernel"};
    if (k_.shape.size() > si::kMaxRank) throw NotCovered{"rank above the interpreter's"};
    if (k_.dots.size() > size_t(si::kMaxDots))
      throw NotCovered{fmt::format("{} dot products, more than {}", k_.dots.size(), si::kMaxDots)};
    for (const KernelDot& d : k_.dots)
      if (!is_floating(k_.inputs[d.a].dtype) || !is_floating(k_.inputs[d.b].dtype))
        throw NotCovered{"an integer dot product"};
    for (const TapeInst& in : k_.tape) {
      if (!op_of(in.op)) throw NotCovered{fmt::format("op {}", op_name(in.op))};
      check_types(k_, in);
    }
    if (reduce()) check_reduce_covered();
  }

  int reductions() const {
    return static_cast<int>(std::count_if(k_.tape.begin(), k_.tape.end(),
                                          [](const TapeInst& in) { return is_reduction(in.op); }));
  }

  void check_reduce_covered() const {
    if (!k_.dots.empty()) throw NotCovered{"a reduction with dot products"};
    const int reds = reductions();
    if (reds > si::kMaxReductions)
      throw NotCovered{fmt::format("{} reductions, more than {}", reds, si::kMaxReductions)};
    if (rp_.passes > 255) throw NotCovered{"more passes than the interpreter counts"};
    for (const KernelOutput& o : k_.outputs)
      if (o.reduced && !is_reduction(k_.tape[o.value].op))
        throw NotCovered{"a per-row output that is not a reduction"}; // none are planned
  }

  uint16_t field(const std::string& name) const {
    auto it = field_.find(name);
    if (it == field_.end()) throw NotCovered{"no Params field " + name}; // a codegen change
    return it->second;
  }

  si::Program program() const {
    si::Program p{};
    p.layout = reduce()        ? (v_.rows_per_block > 1 ? si::l_column_reduce : si::l_row_reduce)
               : dot_layout()  ? si::l_dot
               : gemm_layout() ? si::l_gemm_tile
                               : si::l_elementwise;
    p.rank = static_cast<uint8_t>(pl_.rank);
    p.n_in = static_cast<uint16_t>(k_.inputs.size());
    p.n_out = static_cast<uint16_t>(k_.outputs.size());
    p.n_inst = static_cast<uint16_t>(k_.tape.size());
    p.n_dots = static_cast<uint16_t>(k_.dots.size());
    p.n_field = field(reduce() ? "O" : "n");
    for (int d = 0; d < si::kMaxRank; ++d)
      p.shape[d] = pl_.shape_fields && d < pl_.rank ? field(fmt::format("sh{}", d)) : si::kNoField;
    const int bx = v_.dot_bx > 0 ? v_.dot_bx : 8;
    p.dot_bx = static_cast<uint16_t>(bx);
    p.dot_by = static_cast<uint16_t>(cg::kBlock / bx);
    p.cluster = static_cast<uint16_t>(cluster());
    if (gemm_layout()) {
      p.gemm_bk = static_cast<uint16_t>(cg::gemm_bk(k_, v_));
      p.gemm_groups = static_cast<uint16_t>(cg::gemm_groups(v_));
    }
    if (reduce()) {
      p.r_field = field("R");
      p.passes = static_cast<uint8_t>(rp_.passes);
      p.n_reds = static_cast<uint8_t>(reductions());
      p.red_bx = static_cast<uint8_t>(v_.rows_per_block);
      p.red_v = static_cast<uint8_t>(cg::column_vec(k_, v_));
      p.row_epv =
          static_cast<uint8_t>(v_.rows_per_block == 1 && v_.vec ? cg::elems_per_vec(k_) : 0);
    }
    return p;
  }

  si::Operand operand(const cg::CgOperand& op, DType t, const std::string& name) const {
    si::Operand o{};
    o.type = static_cast<uint8_t>(t);
    o.mode = op.mode == cg::CgOperand::Mode::contiguous ? si::m_contiguous
             : op.mode == cg::CgOperand::Mode::scalar   ? si::m_scalar
                                                        : si::m_strided;
    o.ptr = field(name);
    std::fill(std::begin(o.stride), std::end(o.stride), si::kNoField);
    for (int d : op.dims) o.stride[d] = field(fmt::format("{}_s{}", name, d));
    return o;
  }
  si::Operand input(size_t j) const {
    return operand(pl_.in[j], k_.inputs[j].dtype, fmt::format("in{}", j));
  }
  si::Operand output(size_t j, const std::vector<int>& slot) const {
    const KernelOutput& ko = k_.outputs[j];
    si::Operand o = operand(pl_.out[j], ko.dtype, fmt::format("out{}", j));
    o.from = static_cast<uint8_t>(k_.tape[ko.value].dtype);
    o.value = static_cast<uint8_t>(slot[ko.value]);
    if (reduce()) {
      o.level = static_cast<uint8_t>(rp_.level[ko.value]);
      o.reduced = ko.reduced;
    }
    return o;
  }

  si::Inst inst(size_t t, const std::vector<int>& slot, int& reds) const {
    const TapeInst& in = k_.tape[t];
    si::Inst x{};
    x.op = *op_of(in.op);
    x.type = static_cast<uint8_t>(in.dtype);
    x.dst = static_cast<uint8_t>(slot[t]);
    if (reduce()) x.level = static_cast<uint8_t>(rp_.level[t]);
    int ops = value_operands(in);
    if (ops > 0) x.from = static_cast<uint8_t>(k_.tape[in.a].dtype);
    if (ops-- > 0) x.a = static_cast<uint8_t>(slot[in.a]);
    if (ops-- > 0) x.b = static_cast<uint8_t>(slot[in.b]);
    if (ops-- > 0) x.c = static_cast<uint8_t>(slot[in.c]);
    switch (in.op) {
    case OpCode::load:
    case OpCode::matmul:
      x.field = static_cast<uint16_t>(in.a);
      break;
    case OpCode::constant:
      x.field = field(fmt::format("c{}", t));
      break;
    case OpCode::iota: // c<t>_a, c<t>_b follow each other
      x.field = field(fmt::format("c{}_a", t));
      break;
    case OpCode::rand_uniform: // c<t>_seed, c<t>_ctr
    case OpCode::rand_normal:
      x.field = field(fmt::format("c{}_seed", t));
      break;
    default:
      if (is_reduction(in.op)) reduction(in, x, reds++);
      break;
    }
    return x;
  }

  // A reduction's accumulator as Emitter::reductions chooses it.
  void reduction(const TapeInst& in, si::Inst& x, int index) const {
    const DType operand = k_.tape[in.a].dtype;
    const bool fl = is_floating(operand), sum = in.op == OpCode::sum || in.op == OpCode::mean;
    const bool exact = in.op == OpCode::max || in.op == OpCode::min || in.op == OpCode::argmax;
    x.b = !fl                              ? si::a_long
          : exact && operand != DType::f64 ? si::a_float
          : sum && operand == DType::f64   ? si::a_dsum
                                           : si::a_double;
    x.c = x.b != si::a_dsum && sum && cg::is_half(in.dtype) && cg::is_half(operand);
    x.field = static_cast<uint16_t>(index);
  }

  si::Dot dot(const KernelDot& d) const {
    const size_t j = &d - k_.dots.data();
    si::Dot x{};
    x.a = static_cast<uint16_t>(d.a);
    x.b = static_cast<uint16_t>(d.b);
    x.K = field(fmt::format("d{}_K", j));
    x.ak = field(fmt::format("d{}_ak", j));
    x.bk = field(fmt::format("d{}_bk", j));
    // The accumulators' type: Emitter::dot_acc, the GEMM tile's one type for all its dots.
    x.acc_double = gemm_layout() ? cg::gemm_f64(k_) : k_.inputs[d.a].dtype == DType::f64;
    x.is_short = gemm_layout() && j < 32 && (v_.gemm_short_dots >> j & 1);
    return x;
  }

  const FusedKernel& k_;
  const CudaVariant& v_;
  const CudaTarget& t_;
  cg::CgPlan pl_;
  ReducePasses rp_;
  std::unordered_map<std::string, uint16_t> field_;
};

// The kernel's own Params, one word in: the pointers and constants patch the same fields.
ParamTemplate shifted_params(const FusedKernel& k, const CudaVariant& v) {
  ParamTemplate own = param_template(k, v);
  ParamTemplate t;
  t.bytes.resize(8);
  t.bytes.insert(t.bytes.end(), own.bytes.begin(), own.bytes.end());
  for (ParamTemplate::Pointer p : own.pointers) {
    p.at += 8;
    t.pointers.push_back(p);
  }
  for (ParamTemplate::Value val : own.values) {
    val.at += 8;
    t.values.push_back(val);
  }
  return t;
}

// A segmented kernel's Programs: a header of Segments, then each segment's elementwise Program,
// once for segments whose Programs are the same bytes (their fields count from their own base).
void append_segments(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t,
                     std::vector<std::byte>& bytes, bool& large) {
  const int n = static_cast<int>(k.segments.size());
  si::Program head{};
  head.layout = si::l_segmented;
  head.n_in = static_cast<uint16_t>(n);
  append(bytes, head);
  const size_t table = bytes.size();
  bytes.resize(table + n * sizeof(si::Segment));
  std::vector<std::pair<std::vector<std::byte>, size_t>> written;
  size_t base = n; // the Params start with the n ends
  for (int s = 0; s < n; ++s) {
    const FusedKernel seg = k.segment(s);
    if (!seg.dots.empty()) throw NotCovered{"a segment with dot products"};
    if (seg.kind != FusedKernel::Kind::elementwise) throw NotCovered{"a segment that reduces"};
    ProgramBuilder b(seg, v.segments[s], t);
    bool seg_large = false;
    std::vector<std::byte> program = b.bytes(seg_large);
    large |= seg_large;
    auto same = std::find_if(written.begin(), written.end(),
                             [&](const auto& w) { return w.first == program; });
    size_t at = same != written.end() ? same->second : bytes.size();
    if (same == written.end()) {
      bytes.insert(bytes.end(), program.begin(), program.end());
      written.emplace_back(std::move(program), at);
    }
    if (bytes.size() > size_t(si::kArgsBytes)) break; // reported by build_standin
    const si::Segment entry{static_cast<uint16_t>(s), static_cast<uint16_t>(base),
                            static_cast<uint16_t>(at)};
    std::memcpy(bytes.data() + table + s * sizeof(si::Segment), &entry, sizeof entry);
    base += b.fields();
  }
}

// The interpreter's grid: the compiled kernel's for the dot, reduce and segmented layouts (their
// threads mirror its threads), else a grid-stride loop's.
CudaLaunch standin_shape(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  if (k.segmented()) return launch_for(k, v, t);
  if (k.kind == FusedKernel::Kind::reduce) {
    CudaLaunch l = launch_for(k, v, t);
    l.shared_bytes = si::kCombineBytes;
    return l;
  }
  if (!k.dots.empty() && v.gemm_tile == 0) { // launch_dot's grid; the cluster is given at launch
    CudaLaunch l = launch_for(k, v, t);
    l.cluster = static_cast<uint32_t>(t.arch >= 90 ? std::max(1, v.dot_cluster) : 1);
    l.shared_bytes = static_cast<uint32_t>(k.dots.size() * cg::kBlock * sizeof(double));
    return l;
  }
  CudaLaunch l;
  const int64_t n = k.shape.numel();
  l.block = cg::kBlock;
  l.grid = static_cast<uint32_t>(
      std::min<int64_t>((n + cg::kBlock - 1) / cg::kBlock, int64_t(std::max(1, t.sm_count)) * 8));
  return l;
}

StandinLaunch build_standin(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  StandinLaunch out;
  out.params = shifted_params(k, v);
  std::vector<std::byte>& bytes = out.params.bytes;
  const uint64_t program_at = bytes.size();
  std::memcpy(bytes.data(), &program_at, 8);
  if (k.segmented()) {
    append_segments(k, v, t, bytes, out.large);
  } else {
    const std::vector<std::byte> program = ProgramBuilder(k, v, t).bytes(out.large);
    bytes.insert(bytes.end(), program.begin(), program.end());
  }
  if (bytes.size() > size_t(si::kArgsBytes))
    throw NotCovered{
        fmt::format("more than {} bytes of arguments ({})", si::kArgsBytes, bytes.size())};
  bytes.resize(si::kArgsBytes);
  out.shape = standin_shape(k, v, t);
  return out;
}

} // namespace

std::optional<StandinLaunch> plan_standin(const FusedKernel& k, const CudaVariant& v,
                                          const CudaTarget& t, std::string* why) {
  try {
    return build_standin(k, v, t);
  } catch (const NotCovered& e) {
    if (why) *why = e.why;
    return std::nullopt;
  }
}

const char* standin_entry(bool large) {
  return large ? "kiln_standin_large" : "kiln_standin_small";
}

} // namespace kiln::detail

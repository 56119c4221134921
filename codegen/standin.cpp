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
// after its last use (outputs are used at the end). Returns the slot per value.
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
  for (int t = 0; t < n; ++t) {
    const TapeInst& in = k.tape[t];
    int seen = value_operands(in);
    for (int v : {in.a, in.b, in.c}) // freed before the result takes one: read first
      if (seen-- > 0 && last[v] == t &&
          std::find(free_slots.begin(), free_slots.end(), slot[v]) == free_slots.end())
        free_slots.push_back(slot[v]);
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

class Builder {
public:
  Builder(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t)
      : k_(k), v_(v), t_(t), pl_(cg::cuda_make_plan(k, {})) {
    for (size_t i = 0; i < pl_.fields.size(); ++i)
      field_[pl_.fields[i].name] = static_cast<uint16_t>(i);
  }

  StandinLaunch build() {
    check_covered();
    int slots = 0;
    const std::vector<int> slot = assign_slots(k_, slots);
    if (slots > si::kLargeSlots)
      throw NotCovered{fmt::format("{} live values, more than {}", slots, si::kLargeSlots)};
    StandinLaunch out;
    out.large = slots > si::kSmallSlots;
    out.params = cg_params();
    std::vector<std::byte>& bytes = out.params.bytes;
    const uint64_t program_at = bytes.size();
    std::memcpy(bytes.data(), &program_at, 8);
    append(bytes, program());
    for (size_t j = 0; j < k_.inputs.size(); ++j) append(bytes, input(j));
    for (size_t j = 0; j < k_.outputs.size(); ++j) append(bytes, output(j, slot));
    for (size_t t = 0; t < k_.tape.size(); ++t) append(bytes, inst(t, slot));
    for (const KernelDot& d : k_.dots) append(bytes, dot(d));
    if (bytes.size() > size_t(si::kArgsBytes))
      throw NotCovered{
          fmt::format("{} bytes of arguments, more than {}", bytes.size(), si::kArgsBytes)};
    bytes.resize(si::kArgsBytes);
    out.shape = shape();
    return out;
  }

private:
  bool dot_layout() const { return !k_.dots.empty() && v_.gemm_tile == 0; }
  bool gemm_layout() const { return v_.gemm_tile > 0; }
  int cluster() const { return t_.arch >= 90 ? std::max(1, v_.dot_cluster) : 1; }

  void check_covered() const {
    if (k_.segmented()) throw NotCovered{"a segmented kernel"};
    if (k_.kind != FusedKernel::Kind::elementwise) throw NotCovered{"a reduction"};
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
  }

  uint16_t field(const std::string& name) const {
    auto it = field_.find(name);
    if (it == field_.end()) throw NotCovered{"no Params field " + name}; // a codegen change
    return it->second;
  }

  // The kernel's own Params, one word in: the pointers and constants patch the same fields.
  ParamTemplate cg_params() const {
    ParamTemplate own = param_template(k_, v_);
    ParamTemplate t;
    t.bytes.resize(8);
    t.bytes.insert(t.bytes.end(), own.bytes.begin(), own.bytes.end());
    for (ParamTemplate::Pointer p : own.pointers) {
      p.at += 8;
      t.pointers.push_back(p);
    }
    for (ParamTemplate::Value v : own.values) {
      v.at += 8;
      t.values.push_back(v);
    }
    return t;
  }

  si::Program program() const {
    si::Program p{};
    p.layout = dot_layout() ? si::l_dot : gemm_layout() ? si::l_gemm_tile : si::l_elementwise;
    p.rank = static_cast<uint8_t>(pl_.rank);
    p.n_in = static_cast<uint16_t>(k_.inputs.size());
    p.n_out = static_cast<uint16_t>(k_.outputs.size());
    p.n_inst = static_cast<uint16_t>(k_.tape.size());
    p.n_dots = static_cast<uint16_t>(k_.dots.size());
    p.n_field = field("n");
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
    return o;
  }

  si::Inst inst(size_t t, const std::vector<int>& slot) const {
    const TapeInst& in = k_.tape[t];
    si::Inst x{};
    x.op = *op_of(in.op);
    x.type = static_cast<uint8_t>(in.dtype);
    x.dst = static_cast<uint8_t>(slot[t]);
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
      break;
    }
    return x;
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

  CudaLaunch shape() const {
    if (dot_layout()) { // launch_dot's grid; the cluster is given at launch here
      CudaLaunch l = launch_for(k_, v_, t_);
      l.cluster = static_cast<uint32_t>(cluster());
      l.shared_bytes = static_cast<uint32_t>(k_.dots.size() * cg::kBlock * sizeof(double));
      return l;
    }
    CudaLaunch l;
    const int64_t n = k_.shape.numel();
    l.block = cg::kBlock;
    l.grid = static_cast<uint32_t>(std::min<int64_t>((n + cg::kBlock - 1) / cg::kBlock,
                                                     int64_t(std::max(1, t_.sm_count)) * 8));
    return l;
  }

  const FusedKernel& k_;
  const CudaVariant& v_;
  const CudaTarget& t_;
  cg::CgPlan pl_;
  std::unordered_map<std::string, uint16_t> field_;
};

} // namespace

std::optional<StandinLaunch> plan_standin(const FusedKernel& k, const CudaVariant& v,
                                          const CudaTarget& t, std::string* why) {
  try {
    return Builder(k, v, t).build();
  } catch (const NotCovered& e) {
    if (why) *why = e.why;
    return std::nullopt;
  }
}

const char* standin_entry(bool large) {
  return large ? "kiln_standin_large" : "kiln_standin_small";
}

} // namespace kiln::detail

// Front-ends of the elementwise ops: type promotion, broadcasting checks, node recording.
#include "engine/loop_template.h"
#include "engine/ops_common.h"
#include "ir/host_convert.h"
#include "ir/shape_math.h"

#include <kiln/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace kiln {

using namespace detail;

namespace detail {

Tensor cast_to(const Tensor& t, DType to, bool internal) {
  if (t.dtype() == to) return t;
  Node* n = new_node(OpCode::cast, to, t.device(), t.shape());
  add_input(n, t.node());
  return publish(n, internal);
}

namespace {

// The integer a floating scalar truncates to when it is stored in an integer dtype.
std::optional<int64_t> truncated(double v) {
  if (!(v >= -0x1p63 && v < 0x1p63)) return std::nullopt; // NaN, inf, out of int64
  return static_cast<int64_t>(v);
}

bool fits_integer(int64_t v, DType dt) {
  return dt == DType::i64 ||
         (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max());
}

// v rounded to the floating dtype dt (as the backends store it), back in double.
double rounded_to(double v, DType dt) {
  switch (dt) {
  case DType::f16:
    return static_cast<float>(half(static_cast<float>(v)));
  case DType::bf16:
    return static_cast<float>(bfloat16(static_cast<float>(v)));
  case DType::f32:
    return static_cast<float>(v);
  default:
    return v;
  }
}

void check_representable(const char* op, Scalar s, DType dt, bool finite_range) {
  const bool floating = s.kind == Scalar::Kind::floating;
  // The value as text only for the error: formatting it on every scalar op cost ~4% of recording.
  auto overflow = [&] {
    const std::string text = floating ? fmt::format("{}", s.f) : fmt::format("{}", s.i);
    fail(op, "value {} cannot be converted to {} without overflow", text, dtype_name(dt));
  };
  if (is_integral(dt)) {
    auto v = floating ? truncated(s.f) : std::optional<int64_t>(s.i);
    if (!v || !fits_integer(*v, dt)) overflow();
  } else if (finite_range && is_floating(dt)) {
    const double v = floating ? s.f : static_cast<double>(s.i);
    if (std::isfinite(v) && !std::isfinite(rounded_to(v, dt))) overflow();
  }
}

} // namespace

namespace {

// A scalar's value as a constant node holds it (NodeAttrs::scalar and iscalar).
std::pair<double, int64_t> constant_value(Scalar s) {
  const bool floating = s.kind == Scalar::Kind::floating;
  return {floating ? s.f : static_cast<double>(s.i), floating ? saturate_cast<int64_t>(s.f) : s.i};
}

} // namespace

void set_constant(const char* op, Node* n, Scalar s, bool finite_range) {
  check_representable(op, s, n->dtype, finite_range);
  std::tie(n->scalar, n->iscalar) = constant_value(s);
}

Tensor scalar_tensor(const char* op, Scalar s, DType dt, Device dev) {
  check_representable(op, s, dt, /*finite_range=*/false);
  const auto [scalar, iscalar] = constant_value(s);
  if (Node* shared = loop_constant(dt, dev, scalar, iscalar)) return handle_to(shared);
  Node* n = new_node(OpCode::constant, dt, dev, Shape{});
  n->scalar = scalar;
  n->iscalar = iscalar;
  Tensor t = publish(n, /*internal=*/true);
  share_loop_constant(n);
  return t;
}

} // namespace detail

namespace {

enum class Category { boolean = 0, integer = 1, floating = 2 };

Category category(DType t) {
  return t == DType::boolean ? Category::boolean
         : is_floating(t)    ? Category::floating
                             : Category::integer;
}
Category category(Scalar::Kind k) {
  return static_cast<Category>(static_cast<int>(k));
}
DType default_type(Category c) {
  return c == Category::floating  ? DType::f32
         : c == Category::integer ? DType::i64
                                  : DType::boolean;
}

// PyTorch's result_type: dimensioned tensors, then 0-d tensors, then scalars; a lower tier
// only matters when it is of a higher category.
struct ResultType {
  bool have[3] = {};
  DType type[3] = {};
  void add_tensor(const Node* n) { add(n->layout.shape.size() ? 0 : 1, n->dtype); }
  void add_scalar(Scalar s) { add(2, default_type(category(s.kind))); }
  void add(int tier, DType t) {
    type[tier] = have[tier] ? promote_types(type[tier], t) : t;
    have[tier] = true;
  }
  DType get() const {
    DType r{};
    bool any = false;
    for (int tier = 0; tier < 3; ++tier) {
      if (!have[tier]) continue;
      if (!any)
        r = type[tier], any = true;
      else if (category(type[tier]) > category(r))
        r = tier == 2 ? type[tier] : promote_types(r, type[tier]);
    }
    return r;
  }
};

Shape broadcast_or_fail(const char* op, const Shape& a, const Shape& b) {
  if (a == b) return a; // most binary ops of a step: no broadcast to work out
  auto s = broadcast_shapes(a, b);
  if (!s) fail(op, "shapes {} and {} cannot be broadcast together", a, b);
  return *s;
}

// Checks three operands of one op (same device, broadcastable); returns the result shape.
Shape broadcast3_or_fail(const char* op, const Node* a, const Node* b, const Node* c) {
  same_device(op, a, b);
  same_device(op, a, c);
  return broadcast_or_fail(op, broadcast_or_fail(op, a->layout.shape, b->layout.shape),
                           c->layout.shape);
}

// Arithmetic whose result type is boolean, as PyTorch: + is "or", * is "and"; - and pow have
// no boolean meaning. Division is true division and never boolean.
OpCode boolean_op(OpCode op) {
  switch (op) {
  case OpCode::add:
    return OpCode::logical_or;
  case OpCode::mul:
    return OpCode::logical_and;
  case OpCode::sub:
  case OpCode::pow:
    fail(op_name(op), "not supported for two boolean operands; use logical_not/logical_and/"
                      "logical_or, or cast first");
  default:
    return op;
  }
}

Tensor record(OpCode op, DType out, const Shape& shape, Device dev,
              std::initializer_list<const Tensor*> ins) {
  Node* n = new_node(op, out, dev, shape);
  for (const Tensor* t : ins) add_input(n, t->node());
  return publish(n);
}

// Binary op where `a` and `b` are the tensor operands after result typing. `compute` is the
// type both operands are cast to; the output type is boolean for comparisons.
Tensor binary_typed(OpCode op, const Tensor& a, const Tensor& b, DType compute, const Shape& s) {
  DType out =
      op_kind(op) == OpKind::Compare || op_kind(op) == OpKind::Logical ? DType::boolean : compute;
  // Before the casts, so that a failed call records nothing; without casts new_node checks.
  if (a.dtype() != compute || b.dtype() != compute) check_extents(op_name(op), s, out);
  Tensor sa, sb;
  const Tensor &ca = as_dtype(a, compute, sa), &cb = as_dtype(b, compute, sb);
  return record(op, out, s, a.device(), {&ca, &cb});
}

DType compute_type(OpCode op, DType r) {
  if (op_kind(op) == OpKind::Logical) return DType::boolean;
  if (op == OpCode::div && !is_floating(r)) return DType::f32; // true division
  return r;
}

Tensor binary(OpCode op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  Node* na = arg(a, name);
  Node* nb = arg(b, name);
  LoopCall call{.form = CallForm::binary, .op = op, .a = na, .b = nb};
  if (Tensor t = from_template(call); t.defined()) return t;
  same_device(name, na, nb);
  Shape s = broadcast_or_fail(name, na->layout.shape, nb->layout.shape);
  ResultType rt;
  rt.add_tensor(na);
  rt.add_tensor(nb);
  DType r = rt.get();
  if (r == DType::boolean) op = boolean_op(op);
  Tensor t = binary_typed(op, a, b, compute_type(op, r), s);
  learned(call, t);
  return t;
}

// Tensor (op) scalar; `reversed` computes scalar (op) tensor.
Tensor binary_scalar(OpCode op, const Tensor& a, Scalar b, bool reversed = false) {
  const char* name = op_name(op);
  Node* na = arg(a, name);
  LoopCall call{.form = reversed ? CallForm::scalar_reversed : CallForm::scalar,
                .op = op,
                .a = na,
                .scalar = b,
                .name = name};
  if (Tensor t = from_template(call); t.defined()) return t;
  ResultType rt;
  rt.add_tensor(na);
  rt.add_scalar(b);
  DType r = rt.get();
  if (r == DType::boolean) op = boolean_op(op);
  DType c = compute_type(op, r);
  Tensor sb = scalar_tensor(name, b, c, na->device);
  Tensor t = reversed ? binary_typed(op, sb, a, c, na->layout.shape)
                      : binary_typed(op, a, sb, c, na->layout.shape);
  learned(call, t);
  return t;
}

Tensor unary(OpCode op, const Tensor& a) {
  const char* name = op_name(op);
  Node* na = arg(a, name);
  LoopCall call{.form = CallForm::unary, .op = op, .a = na};
  if (Tensor made = from_template(call); made.defined()) return made;
  DType t = na->dtype;
  OpKind k = op_kind(op);
  if (k == OpKind::Logical) {
    Tensor sa;
    const Tensor& ca = as_dtype(a, DType::boolean, sa);
    return record(op, DType::boolean, na->layout.shape, na->device, {&ca});
  }
  if (t == DType::boolean && k == OpKind::Unary)
    fail(name, "not supported for boolean tensors; use logical_not or cast first");
  DType out = (k == OpKind::UnaryFloat && !is_floating(t)) ? DType::f32 : t;
  Tensor sa;
  const Tensor& ca = as_dtype(a, out, sa);
  Tensor r = record(op, out, na->layout.shape, na->device, {&ca});
  learned(call, r);
  return r;
}

} // namespace

Tensor detail::binary_op(OpCode op, const Tensor& g, const Tensor& y) {
  return binary(op, g, y);
}

#define KILN_BINARY_FRONTEND(fn)                                                                   \
  Tensor fn(const Tensor& a, const Tensor& b) {                                                    \
    return binary(OpCode::fn, a, b);                                                               \
  }
KILN_BINARY_FRONTEND(add)
KILN_BINARY_FRONTEND(sub)
KILN_BINARY_FRONTEND(mul)
KILN_BINARY_FRONTEND(div)
KILN_BINARY_FRONTEND(pow)
KILN_BINARY_FRONTEND(maximum)
KILN_BINARY_FRONTEND(minimum)
KILN_BINARY_FRONTEND(eq)
KILN_BINARY_FRONTEND(ne)
KILN_BINARY_FRONTEND(lt)
KILN_BINARY_FRONTEND(le)
KILN_BINARY_FRONTEND(gt)
KILN_BINARY_FRONTEND(ge)
KILN_BINARY_FRONTEND(logical_and)
KILN_BINARY_FRONTEND(logical_or)
#undef KILN_BINARY_FRONTEND

#define KILN_SCALAR_FRONTEND(fn)                                                                   \
  Tensor fn(const Tensor& a, Scalar b) {                                                           \
    return binary_scalar(OpCode::fn, a, b);                                                        \
  }
KILN_SCALAR_FRONTEND(add)
KILN_SCALAR_FRONTEND(sub)
KILN_SCALAR_FRONTEND(mul)
KILN_SCALAR_FRONTEND(div)
KILN_SCALAR_FRONTEND(pow)
KILN_SCALAR_FRONTEND(maximum)
KILN_SCALAR_FRONTEND(minimum)
KILN_SCALAR_FRONTEND(eq)
KILN_SCALAR_FRONTEND(ne)
KILN_SCALAR_FRONTEND(lt)
KILN_SCALAR_FRONTEND(le)
KILN_SCALAR_FRONTEND(gt)
KILN_SCALAR_FRONTEND(ge)
#undef KILN_SCALAR_FRONTEND
Tensor rsub(const Tensor& a, Scalar b) {
  return binary_scalar(OpCode::sub, a, b, true);
}
Tensor rdiv(const Tensor& a, Scalar b) {
  return binary_scalar(OpCode::div, a, b, true);
}

#define KILN_UNARY_FRONTEND(fn)                                                                    \
  Tensor fn(const Tensor& a) {                                                                     \
    return unary(OpCode::fn, a);                                                                   \
  }
namespace {

// Compound assignment: a takes the result r of `a op b`, which must keep a's shape and may
// only be cast down or within its category, as PyTorch's in-place ops.
Tensor& assign(const char* op, Tensor& a, Tensor r) {
  const Node* n = a.node();
  const Node* rn = r.node();
  if (rn->layout.shape != n->layout.shape)
    fail(op,
         "the result has shape {}, the assigned tensor {}; compound assignment cannot change "
         "a tensor's shape",
         rn->layout.shape, n->layout.shape);
  if (rn->dtype != n->dtype) {
    if (category(rn->dtype) > category(n->dtype))
      fail(op, "the result type {} cannot be cast to the assigned tensor's type {}",
           dtype_name(rn->dtype), dtype_name(n->dtype));
    r = cast(r, n->dtype);
  }
  a = std::move(r);
  return a;
}

// On a leaf that requires grad (a parameter) compound assignment is an update, as under
// torch.no_grad: recorded without history, its result again a leaf that requires grad, so
// `w -= lr * g` keeps w trainable and a training loop's history does not grow step by step.
template <class F> Tensor& compound(const char* op, Tensor& a, F&& compute) {
  const Node* n = arg(a, op);
  if (!n->requires_grad || n->grad_record || n->grad_freed) return assign(op, a, compute());
  {
    NoGradGuard no_grad;
    Tensor r = compute();
    if (r.node()->handles > 1) r = r.detach(); // a value shared with others keeps its flags
    assign(op, a, std::move(r));
  }
  a.node()->requires_grad = true;
  return a;
}

} // namespace

Tensor& operator+=(Tensor& a, const Tensor& b) {
  return compound("operator+=", a, [&] { return add(a, b); });
}
Tensor& operator-=(Tensor& a, const Tensor& b) {
  return compound("operator-=", a, [&] { return sub(a, b); });
}
Tensor& operator*=(Tensor& a, const Tensor& b) {
  return compound("operator*=", a, [&] { return mul(a, b); });
}
Tensor& operator/=(Tensor& a, const Tensor& b) {
  return compound("operator/=", a, [&] { return div(a, b); });
}
Tensor& operator+=(Tensor& a, Scalar b) {
  return compound("operator+=", a, [&] { return add(a, b); });
}
Tensor& operator-=(Tensor& a, Scalar b) {
  return compound("operator-=", a, [&] { return sub(a, b); });
}
Tensor& operator*=(Tensor& a, Scalar b) {
  return compound("operator*=", a, [&] { return mul(a, b); });
}
Tensor& operator/=(Tensor& a, Scalar b) {
  return compound("operator/=", a, [&] { return div(a, b); });
}

KILN_UNARY_FRONTEND(neg)
KILN_UNARY_FRONTEND(abs)
KILN_UNARY_FRONTEND(exp)
KILN_UNARY_FRONTEND(log)
KILN_UNARY_FRONTEND(log1p)
KILN_UNARY_FRONTEND(sqrt)
KILN_UNARY_FRONTEND(rsqrt)
KILN_UNARY_FRONTEND(sin)
KILN_UNARY_FRONTEND(cos)
KILN_UNARY_FRONTEND(tanh)
KILN_UNARY_FRONTEND(sigmoid)
KILN_UNARY_FRONTEND(relu)
KILN_UNARY_FRONTEND(gelu)
KILN_UNARY_FRONTEND(logical_not)
#undef KILN_UNARY_FRONTEND

Tensor cast(const Tensor& a, DType to) {
  arg(a, "cast");
  check_dtype("cast", to);
  return cast_to(a, to, /*internal=*/false);
}

Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  arg(a, "clamp");
  if (!lo && !hi) fail("clamp", "at least one of lo and hi must be given");
  if (a.dtype() == DType::boolean) fail("clamp", "not supported for boolean tensors");
  Tensor r = a;
  if (lo) r = maximum(r, *lo);
  if (hi) r = minimum(r, *hi);
  return r;
}

Tensor clamp(const Tensor& a, const Tensor& lo, const Tensor& hi) {
  Node* na = arg(a, "clamp");
  Node* nl = arg(lo, "clamp");
  Node* nh = arg(hi, "clamp");
  broadcast3_or_fail("clamp", na, nl, nh);
  if (a.dtype() == DType::boolean) fail("clamp", "not supported for boolean tensors");
  return minimum(maximum(a, lo), hi);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Node* nc = arg(cond, "where");
  Node* na = arg(a, "where");
  Node* nb = arg(b, "where");
  if (nc->dtype != DType::boolean)
    fail("where", "the condition must be boolean, got {}", dtype_name(nc->dtype));
  Shape s = broadcast3_or_fail("where", nc, na, nb);
  ResultType rt;
  rt.add_tensor(na);
  rt.add_tensor(nb);
  DType r = rt.get();
  check_extents("where", s, r);
  Tensor sa, sb;
  const Tensor &ca = as_dtype(a, r, sa), &cb = as_dtype(b, r, sb);
  return record(OpCode::where, r, s, nc->device, {&cond, &ca, &cb});
}

namespace {
Tensor where_scalar(const Tensor& cond, const Tensor& t, Scalar s, bool scalar_second) {
  Node* nc = arg(cond, "where");
  Node* nt = arg(t, "where");
  same_device("where", nc, nt);
  if (nc->dtype != DType::boolean)
    fail("where", "the condition must be boolean, got {}", dtype_name(nc->dtype));
  Shape shape = broadcast_or_fail("where", nc->layout.shape, nt->layout.shape);
  ResultType rt;
  rt.add_tensor(nt);
  rt.add_scalar(s);
  DType r = rt.get();
  check_extents("where", shape, r);
  Tensor cs = scalar_tensor("where", s, r, nc->device); // first: it may reject the value
  Tensor st;
  const Tensor& ct = as_dtype(t, r, st);
  return scalar_second ? record(OpCode::where, r, shape, nc->device, {&cond, &ct, &cs})
                       : record(OpCode::where, r, shape, nc->device, {&cond, &cs, &ct});
}
} // namespace

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  return where_scalar(cond, a, b, true);
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  return where_scalar(cond, b, a, false);
}

} // namespace kiln

// The gradient rule of every differentiable primitive op. The composite ops of ops.h (softmax,
// var, layer_norm, clamp, ...) are recorded as these primitives, so their gradients follow.
// Each rule records ordinary ops (the caller holds a NoGradGuard), so backward fuses like
// forward. Ties of maximum/minimum and of max/min reductions are documented in docs/autograd.md.
#include "engine/autograd.h"
#include "engine/ops_common.h"

namespace kiln::detail {

// The gradient of a strided slice: g's elements at positions start, start+step, ... of an
// extent-`len` dim, zeros elsewhere. Interleaving zeros through a reshape keeps it two concats.
Tensor slice_backward(const Tensor& g, const Shape& in, const ViewPrim& p) {
  const int d = p.dim;
  const int64_t len = in[d];
  if (p.length == 0) return zeros(in, g.dtype(), g.device());
  Tensor span = g;
  if (p.step > 1) {
    Shape gap = g.shape();
    gap.insert(d + 1, p.step - 1);
    Shape spread = g.shape();
    spread[d] = p.length * p.step;
    span = reshape(concat({unsqueeze(g, d + 1), zeros(gap, g.dtype(), g.device())}, d + 1), spread);
    span = slice(span, d, 0, std::min(p.length * p.step, len - p.start));
  }
  std::vector<Tensor> pieces;
  auto pad = [&](int64_t n) {
    if (n == 0) return;
    Shape s = g.shape();
    s[d] = n;
    pieces.push_back(zeros(s, g.dtype(), g.device()));
  };
  pad(p.start);
  pieces.push_back(span);
  pad(len - p.start - span.shape()[d]);
  return pieces.size() == 1 ? span : concat(pieces, d);
}

namespace {

/// `g` summed over the dims along which `to` was broadcast to g's shape, then shaped as `to`.
Tensor unbroadcast(const Tensor& g, const Shape& to) {
  const Shape& s = g.shape();
  if (s == to) return g;
  const int lead = s.size() - to.size();
  std::vector<int> axes;
  for (int i = 0; i < s.size(); ++i)
    if (i < lead || (to[i - lead] == 1 && s[i] != 1)) axes.push_back(i);
  return reshape(axes.empty() ? g : sum(g, axes, true), to);
}

// sigmoid_grad / tanh_grad compute in their operands' type; f16 and bf16 chains round after each
// op, which the fused ops would not.
bool fused_activation_grad(const Tensor& g, const Tensor& out) {
  return g.dtype() == out.dtype() && (g.dtype() == DType::f32 || g.dtype() == DType::f64);
}

Tensor unary_rule(OpCode op, const Tensor& x, const Tensor& out, const Tensor& g) {
  switch (op) {
  case OpCode::copy:
    return g;
  case OpCode::neg:
    return -g;
  case OpCode::abs: // 0 at 0, as PyTorch
    return where(x > 0, g, where(x < 0, -g, 0.0));
  case OpCode::relu: // 0 at 0, as PyTorch
    return where(x > 0, g, 0.0);
  case OpCode::exp:
    return g * out;
  case OpCode::log:
    return g / x;
  case OpCode::log1p:
    return g / (x + 1.0);
  case OpCode::sqrt:
    return g / (out * 2.0);
  case OpCode::rsqrt:
    return g * (out * out * out) * -0.5;
  case OpCode::sin:
    return g * cos(x);
  case OpCode::cos:
    return g * -sin(x);
  case OpCode::tanh: // one node where g and y are f32 or f64; the chain keeps f16's roundings
    return fused_activation_grad(g, out) ? binary_op(OpCode::tanh_grad, g, out)
                                         : g * (1.0 - out * out);
  case OpCode::sigmoid:
    return fused_activation_grad(g, out) ? binary_op(OpCode::sigmoid_grad, g, out)
                                         : g * out * (1.0 - out);
  case OpCode::gelu: {
    // gelu(x) = x * Phi(x), so Phi(x) = out / x (1/2 at 0); d/dx = Phi(x) + x * phi(x).
    const Tensor cdf = where(x == 0, 0.5, out / x);
    const Tensor pdf = exp(x * x * -0.5) * 0.3989422804014327;
    return g * (cdf + x * pdf);
  }
  default:
    fail("grad", "no gradient rule for {}", op_name(op));
  }
}

// d max(a, b) / da: where a wins, and half where they tie; against an op's own scalar (clamp,
// maximum(x, 0)) a tie gives the tensor the whole gradient, as torch.clamp.
Tensor extreme_share(OpCode op, const Tensor& a, const Tensor& b, bool b_scalar, const Tensor& g) {
  const bool is_max = op == OpCode::maximum;
  if (b_scalar) return where(is_max ? a >= b : a <= b, g, 0.0);
  return where(is_max ? a > b : a < b, g, where(a == b, g * 0.5, 0.0));
}

llvm::SmallVector<Tensor, 3> binary_rule(const GradRecord& r, const Tensor& out, const Tensor& g,
                                         unsigned skip) {
  const Tensor& a = r.inputs[0].value;
  const Tensor& b = r.inputs[1].value;
  Tensor ga, gb;
  switch (r.op) {
  case OpCode::add:
    ga = g, gb = g;
    break;
  case OpCode::sub:
    ga = g, gb = -g;
    break;
  case OpCode::mul:
    if (r.inputs[0].requires_grad) ga = g * b;
    if (r.inputs[1].requires_grad) gb = g * a;
    break;
  case OpCode::div:
    if (r.inputs[0].requires_grad) ga = g / b;
    if (r.inputs[1].requires_grad) gb = -(g * a) / (b * b);
    break;
  case OpCode::pow: // the masks are PyTorch's: no NaN from 0 * inf where the limit is 0
    if (r.inputs[0].requires_grad) ga = where(b == 0, 0.0, g * b * pow(a, b - 1.0));
    if (r.inputs[1].requires_grad) gb = g * where(logical_and(a == 0, b >= 0), 0.0, out * log(a));
    break;
  case OpCode::maximum:
  case OpCode::minimum:
    if (r.inputs[0].requires_grad) ga = extreme_share(r.op, a, b, r.inputs[1].scalar_operand, g);
    if (r.inputs[1].requires_grad) gb = extreme_share(r.op, b, a, r.inputs[0].scalar_operand, g);
    break;
  default:
    fail("grad", "no gradient rule for {}", op_name(r.op));
  }
  llvm::SmallVector<Tensor, 3> grads(2);
  for (unsigned i = 0; i < 2; ++i)
    if (r.inputs[i].requires_grad && !(skip & (1u << i)))
      grads[i] = unbroadcast(i == 0 ? ga : gb, r.inputs[i].shape);
  return grads;
}

Tensor view_rule(const GradRecord& r, const Tensor& g) {
  const Shape& in = r.inputs[0].shape;
  const ViewPrim& p = r.attrs.view;
  switch (p.kind) {
  case ViewPrim::Kind::reshape:
    return reshape(g, in);
  case ViewPrim::Kind::permute: {
    std::vector<int> inverse(p.shape.size());
    for (int i = 0; i < p.shape.size(); ++i) inverse[p.shape[i]] = i;
    return permute(g, inverse);
  }
  case ViewPrim::Kind::expand:
    return unbroadcast(g, in);
  case ViewPrim::Kind::slice:
    return slice_backward(g, in, p);
  }
  fail("grad", "unknown view kind");
}

// g reshaped to the keepdim shape of a reduction over `axes` of `in`.
Tensor kept_dims(const Tensor& g, const Shape& in, uint32_t axes, bool keepdim) {
  if (keepdim) return g;
  Shape kept = in;
  for (int d = 0; d < in.size(); ++d)
    if (axes & (1u << d)) kept[d] = 1;
  return reshape(g, kept);
}

Tensor reduce_rule(const GradRecord& r, const Tensor& out, const Tensor& g) {
  const Shape& in = r.inputs[0].shape;
  const uint32_t axes = r.attrs.axes;
  const Tensor gk = kept_dims(g, in, axes, r.attrs.keepdim);
  std::vector<int> dims;
  int64_t count = 1;
  for (int d = 0; d < in.size(); ++d)
    if (axes & (1u << d)) dims.push_back(d), count *= in[d];
  switch (r.op) {
  case OpCode::sum:
    return expand(gk, in);
  case OpCode::mean:
    return expand(gk / static_cast<double>(count), in);
  case OpCode::max:
  case OpCode::min: { // shared evenly by the elements that tie for the extreme (torch.amax)
    const Tensor& x = r.inputs[0].value;
    const Tensor hit = x == kept_dims(out, in, axes, r.attrs.keepdim);
    const Tensor ties = cast(sum(hit, dims, true), g.dtype());
    return where(hit, expand(gk / ties, in), 0.0);
  }
  default:
    fail("grad", "no gradient rule for {}", op_name(r.op));
  }
}

// d(a @ b): g @ b^T and a^T @ g. An operand that is the transpose of a matrix that requires
// grad (nn::Linear's `x @ W^T`) gets the gradient of that matrix instead, `g^T a` (see
// gradient_target): as `(a^T g)^T`, a matmul read through a view, it would be a kernel of its
// own at every step. A parameter's product is usually taken as factors by grad() instead
// (StackedProducts, autograd.cpp) and skipped here. The ops recorded do not depend on what is
// realized, so lazy and eager round alike.
llvm::SmallVector<Tensor, 3> matmul_rule(const GradRecord& r, const Tensor& g, unsigned skip) {
  const Tensor& a = r.inputs[0].value;
  const Tensor& b = r.inputs[1].value;
  llvm::SmallVector<Tensor, 3> grads(2);
  if (r.inputs[0].requires_grad && !(skip & 1u))
    grads[0] = transposed_matrix(r.inputs[0]) ? matmul(b, transpose(g, -1, -2))
                                              : matmul(g, transpose(b, -1, -2));
  if (r.inputs[1].requires_grad && !(skip & 2u))
    grads[1] = transposed_matrix(r.inputs[1]) ? matmul(transpose(g, -1, -2), a)
                                              : matmul(transpose(a, -1, -2), g);
  return grads;
}

llvm::SmallVector<Tensor, 3> concat_rule(const GradRecord& r, const Tensor& g) {
  llvm::SmallVector<Tensor, 3> grads(r.inputs.size());
  const int d = r.attrs.dim;
  int64_t offset = 0;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const int64_t n = r.inputs[i].shape[d];
    if (r.inputs[i].requires_grad) grads[i] = slice(g, d, offset, offset + n);
    offset += n;
  }
  return grads;
}

// t (a gradient over the index's shape) padded with zeros to `to`, a shape at least as large in
// every dim: scatter_add reads only the part of src that the index covers.
Tensor pad_to(Tensor t, const Shape& to) {
  for (int d = 0; d < to.size(); ++d) {
    if (t.shape()[d] == to[d]) continue;
    Shape rest = t.shape();
    rest[d] = to[d] - rest[d];
    t = concat({t, zeros(rest, t.dtype(), t.device())}, d);
  }
  return t;
}

// gather: g goes back to the positions it was read from, summed where indices repeat.
// scatter_add: x's gradient is g; src's is g at the positions src was added to.
llvm::SmallVector<Tensor, 3> index_rule(const GradRecord& r, const Tensor& g) {
  const int d = r.attrs.dim;
  const GradInput& x = r.inputs[0];
  const Tensor& index = r.inputs[1].value;
  llvm::SmallVector<Tensor, 3> grads(r.inputs.size());
  if (r.op == OpCode::gather) {
    if (x.requires_grad) grads[0] = scatter_add(zeros(x.shape, g.dtype(), g.device()), d, index, g);
    return grads;
  }
  if (x.requires_grad) grads[0] = g;
  if (r.inputs[2].requires_grad) grads[2] = pad_to(gather(g, d, index), r.inputs[2].shape);
  return grads;
}

} // namespace

llvm::SmallVector<Tensor, 3> backward_rule(const GradRecord& r, const Tensor& out, const Tensor& g,
                                           unsigned skip) {
  const GradInput& x = r.inputs[0];
  switch (op_kind(r.op)) {
  case OpKind::Unary:
  case OpKind::UnaryFloat:
    return {unary_rule(r.op, x.value, out, g)};
  case OpKind::Cast:
    return {cast(g, x.dtype)};
  case OpKind::Transfer:
    return {g.to(x.device)};
  case OpKind::View:
    return {view_rule(r, g)};
  case OpKind::Reduce:
    return {reduce_rule(r, out, g)};
  case OpKind::Binary:
    return binary_rule(r, out, g, skip);
  case OpKind::Ternary: {
    const Tensor& cond = x.value;
    llvm::SmallVector<Tensor, 3> grads(3);
    if (r.inputs[1].requires_grad) grads[1] = unbroadcast(where(cond, g, 0.0), r.inputs[1].shape);
    if (r.inputs[2].requires_grad) grads[2] = unbroadcast(where(cond, 0.0, g), r.inputs[2].shape);
    return grads;
  }
  case OpKind::Gemm:
    return matmul_rule(r, g, skip);
  case OpKind::Concat:
    return concat_rule(r, g);
  case OpKind::Index:
    return index_rule(r, g);
  default:
    fail("grad", "no gradient rule for {}", op_name(r.op));
  }
}

bool transposed_matrix(const GradInput& in) {
  const GradRecord* v = in.value.defined() ? in.value.node()->grad_record : nullptr;
  return v && v->op == OpCode::view && v->attrs.view.kind == ViewPrim::Kind::permute &&
         v->attrs.view.shape == Shape{1, 0};
}

std::optional<std::pair<Tensor, Tensor>> weight_gradient_factors(const GradRecord& r,
                                                                 const Tensor& g) {
  const Tensor& a = r.inputs[0].value;
  if (r.op != OpCode::matmul || a.ndim() != 2 || g.ndim() != 2) return std::nullopt;
  // matmul_rule's grads[1]: g^T a for a @ W^T (delivered to W), else a^T g
  if (transposed_matrix(r.inputs[1])) return std::make_pair(g, a);
  return std::make_pair(a, g);
}

Node* gradient_target(const GradRecord& r, size_t i) {
  const GradInput& in = r.inputs[i];
  if (r.op == OpCode::matmul && transposed_matrix(in))
    return in.value.node()->grad_record->inputs[0].value.node(); // the matrix before transpose
  return in.value.node();
}

} // namespace kiln::detail

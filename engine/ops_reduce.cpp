// Reductions and the composites built from them (softmax, log_softmax, layer_norm).
#include "engine/ops_common.h"

#include <kiln/autograd.h>

#include <algorithm>
#include <optional>

namespace kiln {

using namespace detail;

namespace {

uint32_t axes_mask(const char* op, const std::vector<int64_t>& axes, int rank) {
  if (axes.empty()) return rank ? (1u << rank) - 1 : 0;
  uint32_t mask = 0;
  for (int64_t a : axes) {
    int d = norm_dim(op, a, rank);
    if (mask & (1u << d)) fail(op, "axis {} is repeated", d);
    mask |= 1u << d;
  }
  return mask;
}

Shape reduced_shape(const Shape& s, uint32_t mask, bool keepdim) {
  Shape os;
  for (int i = 0; i < s.size(); ++i)
    if (!(mask & (1u << i)))
      os.push_back(s[i]);
    else if (keepdim)
      os.push_back(1);
  return os;
}

// A floating sum or mean over dims of extent 1 adds up one element: x + 0, what the reduction
// computes from its zero start (-0.0 becomes +0.0; x / 1 is x), as an elementwise op that fuses
// into its neighbours where a reduction would be a kernel of its own (a loss's mean at batch 1,
// at every time step of an RNN). Null where a dim reduced is not of extent 1.
std::optional<Tensor> sum_of_one(const Tensor& a, uint32_t mask, bool keepdim) {
  const Shape& s = a.node()->layout.shape;
  if (!is_floating(a.dtype())) return std::nullopt;
  for (int i = 0; i < s.size(); ++i)
    if ((mask & (1u << i)) && s[i] != 1) return std::nullopt;
  return add(reshape(a, reduced_shape(s, mask, keepdim)), Scalar(0.0));
}

Tensor reduce(OpCode op, const Tensor& a, uint32_t mask, bool keepdim, DType out) {
  const char* name = op_name(op);
  Node* in = a.node();
  const Shape& s = in->layout.shape;
  for (int i = 0; i < s.size(); ++i)
    if ((mask & (1u << i)) && s[i] == 0 &&
        (op == OpCode::max || op == OpCode::min || op == OpCode::argmax))
      fail(name, "cannot reduce over the zero-size dim {} of shape {}", i, s);
  const Shape os = reduced_shape(s, mask, keepdim);
  Node* n = new_node(op, out, in->device, os);
  n->axes = mask;
  n->keepdim = keepdim;
  add_input(n, in);
  return publish(n);
}

// The max that softmax subtracts for range only: the result does not depend on it, so no
// gradient flows through it (its ties would otherwise add terms that cancel).
Tensor stabilizer(const Tensor& x, int d) {
  NoGradGuard no_grad;
  return max(x, {d}, true);
}

// softmax over a zero-size dim, as PyTorch: a tensor of the input's shape with no elements.
Tensor empty_like(const Tensor& x) {
  return zeros(x.shape(), x.dtype(), x.device());
}

} // namespace

Tensor sum(const Tensor& a, const Axes& axes, bool keepdim) {
  Node* n = arg(a, "sum");
  DType out = is_floating(n->dtype) ? n->dtype : DType::i64;
  const uint32_t mask = axes_mask("sum", axes.list(), n->layout.shape.size());
  if (auto one = sum_of_one(a, mask, keepdim)) return *one;
  return reduce(OpCode::sum, a, mask, keepdim, out);
}

Tensor mean(const Tensor& a, const Axes& axes, bool keepdim) {
  Node* n = arg(a, "mean");
  if (!is_floating(n->dtype))
    fail("mean", "needs a floating-point input, got {} (cast first)", dtype_name(n->dtype));
  const uint32_t mask = axes_mask("mean", axes.list(), n->layout.shape.size());
  if (auto one = sum_of_one(a, mask, keepdim)) return *one;
  return reduce(OpCode::mean, a, mask, keepdim, n->dtype);
}

Tensor max(const Tensor& a, const Axes& axes, bool keepdim) {
  Node* n = arg(a, "max");
  return reduce(OpCode::max, a, axes_mask("max", axes.list(), n->layout.shape.size()), keepdim,
                n->dtype);
}

Tensor min(const Tensor& a, const Axes& axes, bool keepdim) {
  Node* n = arg(a, "min");
  return reduce(OpCode::min, a, axes_mask("min", axes.list(), n->layout.shape.size()), keepdim,
                n->dtype);
}

namespace {

// The values argmin finds the first maximum of: the input in reversed order. -x is exact for
// floats (NaN stays NaN, which both argmax and argmin pick, as PyTorch), -1 - x reverses every
// integer without overflow (it is ~x), logical_not reverses bools. Ties keep the first index.
Tensor reversed_order(const Tensor& a) {
  const DType t = a.dtype();
  if (is_floating(t)) return neg(a);
  return t == DType::boolean ? logical_not(a) : rsub(a, Scalar(-1));
}

// argmax of a, or with `min` argmin (the argmax of reversed_order(a)).
Tensor arg_extreme(const char* op, const Tensor& a, std::optional<int> axis, bool keepdim,
                   bool min) {
  Node* n = arg(a, op);
  const Tensor x = min ? reversed_order(a) : a;
  if (!axis) {
    if (n->numel() == 0) fail(op, "cannot reduce an empty tensor of shape {}", n->layout.shape);
    Tensor flat = reshape(x, Shape{n->numel()});
    Tensor r = reduce(OpCode::argmax, flat, 1u, false, DType::i64);
    if (!keepdim) return r;
    Shape ones;
    ones.resize(n->layout.shape.size(), 1);
    return reshape(r, ones);
  }
  const int d = norm_dim(op, *axis, n->layout.shape.size());
  if (n->layout.shape[d] == 0)
    fail(op, "cannot reduce over the zero-size dim {} of shape {}", d, n->layout.shape);
  return reduce(OpCode::argmax, x, 1u << d, keepdim, DType::i64);
}

// The number of elements each output of a reduction over `axes` folds.
int64_t reduced_count(const char* op, const Shape& s, const std::vector<int64_t>& axes) {
  const uint32_t mask = axes_mask(op, axes, s.size());
  int64_t n = 1;
  for (int d = 0; d < s.size(); ++d)
    if (mask & (1u << d)) n *= s[d];
  return n;
}

} // namespace

Tensor argmax(const Tensor& a, std::optional<int> axis, bool keepdim) {
  return arg_extreme("argmax", a, axis, keepdim, false);
}

Tensor argmin(const Tensor& a, std::optional<int> axis, bool keepdim) {
  return arg_extreme("argmin", a, axis, keepdim, true);
}

Tensor var(const Tensor& a, const Axes& axes, int64_t correction, bool keepdim) {
  Node* n = arg(a, "var");
  if (!is_floating(n->dtype))
    fail("var", "needs a floating-point input, got {} (cast first)", dtype_name(n->dtype));
  const int64_t count = reduced_count("var", n->layout.shape, axes.list());
  const Tensor d = a - mean(a, axes, true);
  // As torch.var: the divisor is max(0, N - correction), so too few elements give inf or NaN.
  return sum(d * d, axes, keepdim) / static_cast<double>(std::max<int64_t>(0, count - correction));
}

Tensor stddev(const Tensor& a, const Axes& axes, int64_t correction, bool keepdim) {
  arg(a, "stddev");
  return sqrt(var(a, axes, correction, keepdim));
}

Tensor softmax(const Tensor& a, int axis) {
  Node* n = arg(a, "softmax");
  int d = norm_dim("softmax", axis, n->layout.shape.size());
  Tensor x = is_floating(n->dtype) ? a : cast(a, DType::f32);
  if (n->layout.shape[d] == 0) return empty_like(x); // max over no elements is undefined
  Tensor e = exp(x - stabilizer(x, d));
  return e / sum(e, {d}, true);
}

Tensor log_softmax(const Tensor& a, int axis) {
  Node* n = arg(a, "log_softmax");
  int d = norm_dim("log_softmax", axis, n->layout.shape.size());
  Tensor x = is_floating(n->dtype) ? a : cast(a, DType::f32);
  if (n->layout.shape[d] == 0) return empty_like(x);
  Tensor shifted = x - stabilizer(x, d);
  return shifted - log(sum(exp(shifted), {d}, true));
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Node* n = arg(x, "layer_norm");
  const Shape& s = n->layout.shape;
  if (s.size() == 0) fail("layer_norm", "needs at least one dimension, got a scalar");
  if (!is_floating(n->dtype))
    fail("layer_norm", "needs a floating-point input, got {} (cast first)", dtype_name(n->dtype));
  const Shape want{s[s.size() - 1]};
  for (const Tensor* t : {&weight, &bias})
    if (t->defined() && t->node()->layout.shape != want)
      fail("layer_norm", "{} must have shape {} for input {}, got {}",
           t == &weight ? "weight" : "bias", want, s, t->node()->layout.shape);
  const int last = s.size() - 1;
  Tensor xc = x - mean(x, {last}, true);
  Tensor y = xc * rsqrt(mean(xc * xc, {last}, true) + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

} // namespace kiln

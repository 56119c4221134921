// Data-dependent indexing with PyTorch's semantics: index_select, gather, scatter_add. Each is
// a node the planner runs as an unfused step over operands in memory (ir/index_step.h);
// index_select is a gather of its index broadcast over the output, so one kernel serves both.
// Indices are checked against the data when the step runs (the values are not known before).
#include "engine/ops_common.h"
#include "ir/shape_math.h"

#include <algorithm>

namespace kiln {

using namespace detail;

namespace {

void check_index_dtype(const char* op, const Node* index) {
  if (index->dtype != DType::i32 && index->dtype != DType::i64)
    fail(op, "index must be i32 or i64, got {} (shape {})", dtype_name(index->dtype),
         index->shape());
}

void same_rank(const char* op, const char* what, const Node* x, const Node* t) {
  if (t->shape().size() != x->shape().size())
    fail(op, "{} must have as many dims as the input: shapes {} and {}", what, t->shape(),
         x->shape());
}

// index.shape[d] <= of.shape[d] for every d (but `skip`): PyTorch's rule for gather and
// scatter_add, which read or write only the part of a larger operand the index covers.
void index_fits(const char* op, const Node* index, const Node* of, const char* what, int skip) {
  const Shape &is = index->shape(), &s = of->shape();
  for (int d = 0; d < is.size(); ++d)
    if (d != skip && is[d] > s[d])
      fail(op, "index shape {} is larger than {} shape {} at dim {} ({} > {})", is, what, s, d,
           is[d], s[d]);
}

// A 0-d operand works as shape [1] (PyTorch accepts dim 0 or -1 for it).
Tensor at_least_1d(const Tensor& t) {
  return t.ndim() == 0 ? reshape(t, {1}) : t;
}

Tensor gather_node(const Tensor& x, int dim, const Tensor& index, bool select) {
  Node* nx = x.node();
  Node* n = new_node(OpCode::gather, nx->dtype, nx->device, index.shape());
  n->dim = dim;
  n->select = select;
  add_input(n, nx);
  add_input(n, index.node());
  return publish(n);
}

} // namespace

Tensor gather(const Tensor& x, int dim, const Tensor& index) {
  const char* op = "gather";
  Node* nx = arg(x, op);
  Node* ni = arg(index, op);
  same_device(op, nx, ni);
  check_index_dtype(op, ni);
  same_rank(op, "index", nx, ni);
  const int rank = nx->shape().size();
  const int d = norm_dim(op, dim, std::max(rank, 1));
  index_fits(op, ni, nx, "input", d);
  if (rank == 0) return reshape(gather_node(at_least_1d(x), d, at_least_1d(index), false), {});
  return gather_node(x, d, index, false);
}

Tensor index_select(const Tensor& x, int dim, const Tensor& index) {
  const char* op = "index_select";
  Node* nx = arg(x, op);
  Node* ni = arg(index, op);
  same_device(op, nx, ni);
  check_index_dtype(op, ni);
  if (ni->shape().size() > 1) fail(op, "index must be 0-d or 1-d, got shape {}", ni->shape());
  const int rank = nx->shape().size();
  const int d = norm_dim(op, dim, std::max(rank, 1));
  const Tensor xs = at_least_1d(x);
  Shape out = xs.shape();
  out[d] = ni->numel();
  check_extents(op, out, nx->dtype);
  Shape along; // the index along dim, broadcast over the other dims
  for (int i = 0; i < out.size(); ++i) along.push_back(i == d ? ni->numel() : 1);
  const Tensor idx = expand(reshape(index, along), out);
  const Tensor r = gather_node(xs, d, idx, true);
  if (rank > 0) return r;
  return ni->shape().size() == 0 ? reshape(r, {}) : r;
}

Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src) {
  const char* op = "scatter_add";
  Node* nx = arg(x, op);
  Node* ni = arg(index, op);
  Node* ns = arg(src, op);
  same_device(op, nx, ni);
  same_device(op, nx, ns);
  check_index_dtype(op, ni);
  if (ns->dtype != nx->dtype)
    fail(op, "src must have the input's dtype: {} and {}", dtype_name(ns->dtype),
         dtype_name(nx->dtype));
  if (nx->dtype == DType::boolean)
    fail(op, "boolean tensors are not supported (shape {})", nx->shape());
  same_rank(op, "index", nx, ni);
  same_rank(op, "src", nx, ns);
  const int rank = nx->shape().size();
  const int d = norm_dim(op, dim, std::max(rank, 1));
  index_fits(op, ni, ns, "src", -1);
  index_fits(op, ni, nx, "input", d);
  const Tensor xs = at_least_1d(x);
  Node* n = new_node(OpCode::scatter_add, nx->dtype, nx->device, xs.shape());
  n->dim = d;
  add_input(n, xs.node());
  add_input(n, at_least_1d(index).node());
  add_input(n, at_least_1d(src).node());
  const Tensor r = publish(n);
  return rank == 0 ? reshape(r, {}) : r;
}

} // namespace kiln

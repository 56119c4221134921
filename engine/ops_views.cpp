// Views: O(1), no copy. A view of a realized tensor is realized at once (an alias of the same
// buffer with a new layout); a view of a pending value is a pending view node that the planner
// turns into index maps.
#include "engine/autograd.h"
#include "engine/loop_template.h"
#include "engine/ops_common.h"
#include "ir/shape_math.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace kiln {

using namespace detail;

namespace detail {

Tensor make_view(const Tensor& a, const ViewPrim& prim, const Layout& l) {
  Node* in = a.node();
  if (in->realized()) {
    Tensor alias = publish(new_realized(in->dtype, in->device, in->buffer, l));
    note_view(alias.node(), in);
    NodeAttrs attrs;
    attrs.view = prim;
    // The alias has no inputs for publish to read the history from.
    if (wants_grad_record(OpCode::view, in->dtype, {in}))
      record_grad(alias.node(), OpCode::view, attrs, {in});
    return alias;
  }
  Node* n = new_node(OpCode::view, in->dtype, in->device, l);
  n->view = prim;
  add_input(n, in);
  return publish(n);
}

} // namespace detail

namespace {

// The view of `a` by `prim`: from a confirmed loop's template where the call is alike
// (engine/loop_template.h), else made here and offered to the template; a copy first where the
// view cannot be expressed with strides.
Tensor view_or_copy(const Tensor& a, const ViewPrim& prim) {
  LoopCall call{.form = CallForm::view, .op = OpCode::view, .a = a.node(), .prim = &prim};
  if (Tensor t = from_template(call); t.defined()) return t;
  if (auto l = apply_view(a.node()->layout, prim)) {
    Tensor t = make_view(a, prim, *l);
    learned(call, t);
    return t;
  }
  Tensor c = contiguous(a); // only reshape can fail, and never on a contiguous layout
  return make_view(c, prim, *apply_view(c.node()->layout, prim));
}

Shape infer_shape(const char* op, const Shape& in, const Shape& req) {
  Shape out = req;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < req.size(); ++i) {
    if (req[i] == -1) {
      if (infer >= 0) fail(op, "only one dimension can be -1, got {}", req);
      infer = i;
    } else if (req[i] < 0) {
      fail(op, "invalid extent {} in shape {}", req[i], req);
    } else {
      auto product = mul_extents(known, req[i]);
      if (!product)
        fail(op,
             "shape {} is invalid for input of shape {} ({} elements): its extents overflow "
             "int64",
             req, in, in.numel());
      known = *product;
    }
  }
  if (infer >= 0) {
    if (known == 0 || in.numel() % known != 0)
      fail(op, "shape {} is invalid for input of shape {} ({} elements)", req, in, in.numel());
    out[infer] = in.numel() / known;
  }
  if (out.numel() != in.numel())
    fail(op, "shape {} is invalid for input of shape {} ({} elements)", req, in, in.numel());
  return out;
}

} // namespace

Tensor reshape(const Tensor& a, const Shape& shape) {
  Node* n = arg(a, "reshape");
  Shape s = infer_shape("reshape", n->layout.shape, shape);
  if (s == n->layout.shape) return a;
  ViewPrim p;
  p.kind = ViewPrim::Kind::reshape;
  p.shape = s;
  return view_or_copy(a, p);
}

Tensor permute(const Tensor& a, const std::vector<int>& dims) {
  Node* n = arg(a, "permute");
  int rank = n->layout.shape.size();
  if (static_cast<int>(dims.size()) != rank)
    fail("permute", "got {} dims for a tensor of shape {}", dims.size(), n->layout.shape);
  ViewPrim p;
  p.kind = ViewPrim::Kind::permute;
  bool seen[kMaxRank] = {};
  bool identity = true;
  for (int i = 0; i < rank; ++i) {
    int d = norm_dim("permute", dims[i], rank);
    if (seen[d]) fail("permute", "dim {} repeated in the permutation", d);
    seen[d] = true;
    identity = identity && d == i;
    p.shape.push_back(d);
  }
  if (identity) return a;
  return view_or_copy(a, p);
}

Tensor transpose(const Tensor& a, int d0, int d1) {
  Node* n = arg(a, "transpose");
  int rank = n->layout.shape.size();
  if (rank == 0 && (d0 == 0 || d0 == -1) && (d1 == 0 || d1 == -1)) return a;
  int x = norm_dim("transpose", d0, rank), y = norm_dim("transpose", d1, rank);
  if (x == y) return a;
  // The permutation directly (permute's list would be a heap allocation): a layer reads its
  // weight transposed at every call.
  ViewPrim p;
  p.kind = ViewPrim::Kind::permute;
  for (int i = 0; i < rank; ++i) p.shape.push_back(i == x ? y : i == y ? x : i);
  return view_or_copy(a, p);
}

Tensor slice(const Tensor& a, int dim, int64_t start, int64_t stop, int64_t step) {
  Node* n = arg(a, "slice");
  int d = norm_dim("slice", dim, n->layout.shape.size());
  if (step < 1) fail("slice", "step must be >= 1, got {}", step);
  int64_t len = n->layout.shape[d];
  auto clampi = [&](int64_t v) {
    if (v < 0) v += len;
    return std::clamp<int64_t>(v, 0, len);
  };
  int64_t s = clampi(start), e = std::max(clampi(stop), s);
  ViewPrim p;
  p.kind = ViewPrim::Kind::slice;
  p.dim = d;
  p.start = s;
  p.length = e > s ? (e - s - 1) / step + 1 : 0; // (e - s + step - 1) could overflow
  // With two or more elements step < len, so stride * step stays within the input's span; with
  // fewer the step is never used, and a huge one would only overflow offset arithmetic.
  p.step = p.length > 1 ? step : 1;
  if (s == 0 && p.length == len && step == 1) return a;
  return view_or_copy(a, p);
}

Tensor expand(const Tensor& a, const Shape& shape) {
  Node* n = arg(a, "expand");
  const Shape& in = n->layout.shape;
  if (shape.size() < in.size())
    fail("expand", "cannot expand shape {} to fewer dimensions {}", in, shape);
  ViewPrim p;
  p.kind = ViewPrim::Kind::expand;
  p.shape = shape;
  int lead = shape.size() - in.size();
  for (int i = 0; i < shape.size(); ++i) {
    int j = i - lead;
    if (shape[i] == -1) {
      if (j < 0) fail("expand", "-1 is not allowed for the new leading dim {} in {}", i, shape);
      p.shape[i] = in[j];
    } else if (shape[i] < 0) {
      fail("expand", "invalid extent {} in {}", shape[i], shape);
    } else if (j >= 0 && in[j] != 1 && in[j] != shape[i]) {
      fail("expand", "cannot expand shape {} to {}: dim {} has extent {}, not 1", in, shape, j,
           in[j]);
    }
  }
  if (p.shape == in) return a;
  check_extents("expand", p.shape, n->dtype);
  return view_or_copy(a, p);
}

Tensor unsqueeze(const Tensor& a, int dim) {
  Node* n = arg(a, "unsqueeze");
  Shape s = n->layout.shape;
  if (s.size() == kMaxRank)
    fail("unsqueeze", "a tensor of shape {} already has the maximum of {} dims", s, kMaxRank);
  int d = norm_dim("unsqueeze", dim, s.size() + 1);
  s.insert(d, 1);
  return reshape(a, s);
}

Tensor squeeze(const Tensor& a, int dim) {
  Node* n = arg(a, "squeeze");
  Shape s = n->layout.shape;
  if (s.size() == 0) return a;
  int d = norm_dim("squeeze", dim, s.size());
  if (s[d] != 1) return a; // like PyTorch: squeezing a non-1 dim is a no-op
  s.erase(d);
  return reshape(a, s);
}

Tensor squeeze(const Tensor& a) {
  Node* n = arg(a, "squeeze");
  Shape s;
  for (int64_t e : n->layout.shape)
    if (e != 1) s.push_back(e);
  return reshape(a, s);
}

Tensor flatten(const Tensor& a, int start_dim, int end_dim) {
  Node* n = arg(a, "flatten");
  const Shape& in = n->layout.shape;
  if (in.size() == 0) { // as torch: its dims are 0 and -1 only, and it becomes one element
    norm_dim("flatten", start_dim, 1);
    norm_dim("flatten", end_dim, 1);
    return reshape(a, Shape{1});
  }
  const int first = norm_dim("flatten", start_dim, in.size());
  const int last = norm_dim("flatten", end_dim, in.size());
  if (first > last)
    fail("flatten", "start_dim {} comes after end_dim {} for a tensor of shape {}", start_dim,
         end_dim, in);
  Shape out;
  int64_t merged = 1; // a product of the input's extents: no larger than its element count
  for (int d = 0; d < in.size(); ++d) {
    if (d < first || d > last) out.push_back(in[d]);
    if (d >= first && d <= last) merged *= in[d];
    if (d == last) out.push_back(merged);
  }
  return reshape(a, out);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int dim) {
  Node* n = arg(a, "split");
  int d = norm_dim("split", dim, n->layout.shape.size());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", "negative size {}", s);
    auto sum = add_extents(total, s);
    if (!sum) fail("split", "sizes {} overflow int64 when added", fmt::join(sizes, ", "));
    total = *sum;
  }
  if (total != n->layout.shape[d])
    fail("split", "sizes sum to {} but dim {} of shape {} has extent {}", total, d, n->layout.shape,
         n->layout.shape[d]);
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(a, d, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, int64_t size, int dim) {
  Node* n = arg(a, "split");
  int d = norm_dim("split", dim, n->layout.shape.size());
  if (size <= 0) fail("split", "split size must be positive, got {}", size);
  const int64_t len = n->layout.shape[d];
  // The pieces directly (split by sizes would build and check a list of them first): an LSTM
  // or GRU step chunks its gates every step.
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(len / size + (len % size != 0), 1)));
  for (int64_t at = 0; at < len; at += size)
    out.push_back(slice(a, d, at, at + std::min(size, len - at)));
  if (out.empty()) out.push_back(slice(a, d, 0, 0));
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, int chunks, int dim) {
  Node* n = arg(a, "chunk");
  int d = norm_dim("chunk", dim, n->layout.shape.size());
  if (chunks <= 0) fail("chunk", "number of chunks must be positive, got {}", chunks);
  int64_t len = n->layout.shape[d];
  int64_t size = std::max<int64_t>(1, (len + chunks - 1) / chunks);
  return split(a, size, d);
}

Tensor contiguous(const Tensor& a) {
  Node* n = arg(a, "contiguous");
  if (is_contiguous(n->layout)) return a;
  Node* c = new_node(OpCode::copy, n->dtype, n->device, n->layout.shape);
  add_input(c, n);
  return publish(c);
}

Tensor concat(const std::vector<Tensor>& ts, int dim) {
  if (ts.empty()) fail("concat", "needs at least one tensor");
  Node* first = arg(ts[0], "concat");
  int rank = first->layout.shape.size();
  if (rank == 0) fail("concat", "zero-dimensional tensors cannot be concatenated");
  int d = norm_dim("concat", dim, rank);
  Shape out = first->layout.shape;
  out[d] = 0;
  DType dt = first->dtype;
  for (const Tensor& t : ts) {
    Node* n = arg(t, "concat");
    same_device("concat", first, n);
    const Shape& s = n->layout.shape;
    bool ok = s.size() == rank;
    for (int i = 0; ok && i < rank; ++i) ok = i == d || s[i] == first->layout.shape[i];
    if (!ok) fail("concat", "shapes {} and {} differ outside dim {}", first->layout.shape, s, d);
    auto extent = add_extents(out[d], s[d]);
    if (!extent) fail("concat", "the extents along dim {} overflow int64 when added", d);
    out[d] = *extent;
    dt = promote_types(dt, n->dtype);
  }
  std::vector<Tensor> cast_inputs;
  for (const Tensor& t : ts) cast_inputs.push_back(cast_to(t, dt));
  Node* c = new_node(OpCode::concat, dt, first->device, out);
  c->dim = d;
  for (const Tensor& t : cast_inputs) add_input(c, t.node());
  return publish(c);
}

Tensor stack(const std::vector<Tensor>& ts, int dim) {
  if (ts.empty()) fail("stack", "needs at least one tensor");
  const Node* first = arg(ts[0], "stack");
  const int rank = first->layout.shape.size();
  const int d = norm_dim("stack", dim, rank + 1); // a new dim: 0..rank
  std::vector<Tensor> pieces;
  pieces.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    const Node* n = arg(ts[i], "stack");
    same_device("stack", first, n);
    if (n->layout.shape != first->layout.shape)
      fail("stack", "every tensor must have one shape: tensor 0 has {}, tensor {} has {}",
           first->layout.shape, i, n->layout.shape);
    pieces.push_back(unsqueeze(ts[i], d));
  }
  return concat(pieces, d);
}

} // namespace kiln

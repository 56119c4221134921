// matmul with torch.matmul semantics. The GEMM itself runs on the backend's BLAS.
#include "engine/loop_template.h"
#include "engine/ops_common.h"
#include "ir/shape_math.h"

namespace kiln {

using namespace detail;

namespace {

// BLAS takes a matrix with a unit stride in one of its dims and a leading dimension at least
// that wide; anything else (an expanded or doubly strided matrix) is made contiguous first.
Tensor gemm_operand(const Tensor& t) {
  const Layout& l = t.node()->layout;
  int r = l.shape.size();
  int64_t rows = l.shape[r - 2], cols = l.shape[r - 1];
  int64_t rs = l.strides[r - 2], cs = l.strides[r - 1];
  bool row_major = (cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1));
  bool col_major = (rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1));
  return row_major || col_major ? t : contiguous(t);
}

} // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  Node* na = arg(a, "matmul");
  Node* nb = arg(b, "matmul");
  LoopCall call{.form = CallForm::matmul, .op = OpCode::matmul, .a = na, .b = nb};
  if (Tensor t = from_template(call); t.defined()) return t;
  same_device("matmul", na, nb);
  const Shape &sa = na->layout.shape, &sb = nb->layout.shape;
  if (sa.size() == 0 || sb.size() == 0)
    fail("matmul", "both arguments need at least one dimension, got shapes {} and {}", sa, sb);
  if (na->dtype == DType::boolean || nb->dtype == DType::boolean)
    fail("matmul", "boolean tensors are not supported (shapes {} and {})", sa, sb);
  // The common case of a loop step, two matrices of one dtype: no casts, reshapes or batch
  // broadcasts to record (each would return its input), so skip building them (~0.1 us).
  if (sa.size() == 2 && sb.size() == 2 && na->dtype == nb->dtype) {
    if (sa[1] != sb[0])
      fail("matmul", "shapes {} and {} cannot be multiplied ({} != {})", sa, sb, sa[1], sb[0]);
    check_extents("matmul", Shape{sa[0], sb[1]}, na->dtype);
    Tensor x = gemm_operand(a), y = gemm_operand(b);
    Node* g = new_node(OpCode::matmul, na->dtype, na->device, Shape{sa[0], sb[1]});
    add_input(g, x.node());
    add_input(g, y.node());
    Tensor t = publish(g);
    learned(call, t);
    return t;
  }
  // Validate everything before recording anything.
  Shape ma = sa, mb = sb;
  if (ma.size() == 1) ma.insert(0, 1);
  if (mb.size() == 1) mb.push_back(1);
  int64_t m = ma[ma.size() - 2], k = ma.back(), k2 = mb[mb.size() - 2], n = mb.back();
  if (k != k2) fail("matmul", "shapes {} and {} cannot be multiplied ({} != {})", sa, sb, k, k2);
  Shape ba(ma.begin(), ma.end() - 2), bb(mb.begin(), mb.end() - 2);
  auto batch = broadcast_shapes(ba, bb);
  if (!batch) fail("matmul", "batch dims of shapes {} and {} cannot be broadcast", sa, sb);

  DType dt = promote_types(na->dtype, nb->dtype);
  Shape fa = *batch, fb = *batch, out = *batch;
  fa.push_back(m);
  fa.push_back(k);
  fb.push_back(k);
  fb.push_back(n);
  out.push_back(m);
  out.push_back(n);
  for (const Shape* s : {&fa, &fb, &out}) check_extents("matmul", *s, dt);
  Tensor x = reshape(cast_to(a, dt), ma), y = reshape(cast_to(b, dt), mb);
  x = gemm_operand(expand(x, fa));
  y = gemm_operand(expand(y, fb));
  Node* g = new_node(OpCode::matmul, dt, na->device, out);
  add_input(g, x.node());
  add_input(g, y.node());
  Tensor r = publish(g);
  Shape final_shape = *batch;
  if (sa.size() > 1) final_shape.push_back(m);
  if (sb.size() > 1) final_shape.push_back(n);
  return reshape(r, final_shape);
}

} // namespace kiln

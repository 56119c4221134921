#include "ir/layout.h"

#include <algorithm>

namespace kiln::detail {

namespace {

// `st`, of `shape`'s rank, becomes its contiguous strides (every extent overwritten).
void write_contiguous_strides(const Shape& shape, Shape& st) {
  int64_t s = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    st[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
}

} // namespace

Shape contiguous_strides(const Shape& shape) {
  Shape st = shape;
  write_contiguous_strides(shape, st);
  return st;
}

Layout contiguous_layout(const Shape& shape) {
  return {shape, contiguous_strides(shape), 0};
}

void set_contiguous(Layout& l, const Shape& shape) {
  l.shape = shape;
  l.strides = shape;
  write_contiguous_strides(shape, l.strides);
  l.offset = 0;
}

bool is_contiguous(const Layout& l) {
  if (l.shape.numel() == 0) return true;
  int64_t expect = 1;
  for (int i = l.shape.size() - 1; i >= 0; --i) {
    if (l.shape[i] == 1) continue;
    if (l.strides[i] != expect) return false;
    expect *= l.shape[i];
  }
  return true;
}

namespace {

// Strides for viewing `in` as `shape` without a copy, or nullopt. The algorithm is the one
// PyTorch documents for view(): chunks of input dims that are contiguous among themselves
// can be re-split freely.
std::optional<Shape> reshape_strides(const Layout& in, const Shape& shape) {
  Shape out;
  out.resize(shape.size());
  if (in.shape.numel() == 0 || shape.numel() == 0) return contiguous_strides(shape);
  int64_t view_d = shape.size() - 1;
  int64_t chunk_base_stride = in.strides.size() ? in.strides.back() : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = in.shape.size() - 1; d >= 0; --d) {
    tensor_numel *= in.shape[d];
    if (d == 0 || (in.shape[d - 1] != 1 && in.strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = in.strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

} // namespace

std::optional<Layout> apply_view(const Layout& in, const ViewPrim& v) {
  Layout out;
  out.offset = in.offset;
  switch (v.kind) {
  case ViewPrim::Kind::reshape: {
    if (in.shape.size() == 0) { // scalar -> any all-ones shape
      out.shape = v.shape;
      out.strides = contiguous_strides(v.shape);
      return out;
    }
    auto st = reshape_strides(in, v.shape);
    if (!st) return std::nullopt;
    out.shape = v.shape;
    out.strides = *st;
    return out;
  }
  case ViewPrim::Kind::permute:
    out.shape.resize(v.shape.size());
    out.strides.resize(v.shape.size());
    for (int i = 0; i < v.shape.size(); ++i) {
      out.shape[i] = in.shape[static_cast<int>(v.shape[i])];
      out.strides[i] = in.strides[static_cast<int>(v.shape[i])];
    }
    return out;
  case ViewPrim::Kind::slice:
    out.shape = in.shape;
    out.strides = in.strides;
    if (v.length > 0) out.offset += v.start * in.strides[v.dim];
    out.shape[v.dim] = v.length;
    out.strides[v.dim] = in.strides[v.dim] * v.step;
    return out;
  case ViewPrim::Kind::expand: {
    int lead = v.shape.size() - in.shape.size();
    out.shape = v.shape;
    out.strides.resize(v.shape.size());
    for (int i = 0; i < v.shape.size(); ++i) {
      int j = i - lead;
      if (j < 0 || (in.shape[j] == 1 && v.shape[i] != 1))
        out.strides[i] = 0;
      else
        out.strides[i] = in.strides[j];
    }
    return out;
  }
  }
  return std::nullopt;
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  int n = std::max(a.size(), b.size());
  Shape out;
  out.resize(n);
  for (int i = 0; i < n; ++i) {
    int ia = i - (n - a.size()), ib = i - (n - b.size());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

} // namespace kiln::detail

#pragma once
// Layout: where a tensor's elements are (shape, strides in elements, offset) relative to the
// start of its storage. View ops are functions Layout -> Layout; the planner applies the same
// functions to push views down to the buffers a fused kernel loads from.
#include <kiln/shape.h>

#include <optional>

namespace kiln::detail {

struct Layout {
  Shape shape;
  Shape strides;
  int64_t offset = 0;
};

Shape contiguous_strides(const Shape& shape);
Layout contiguous_layout(const Shape& shape);
/// `l` becomes the contiguous layout of `shape`, written in place: every recorded op makes one,
/// and building it by value copied its two shapes twice.
void set_contiguous(Layout& l, const Shape& shape);
bool is_contiguous(const Layout& l); // ignoring extents of size 1, and empty tensors

/// One primitive view. Its output shape is `shape` (for permute: the permutation).
struct ViewPrim {
  enum class Kind : uint8_t { reshape, permute, slice, expand } kind = Kind::reshape;
  Shape shape;        // reshape/expand: new shape; permute: the permutation
  int dim = 0;        // slice
  int64_t start = 0;  // slice
  int64_t step = 1;   // slice
  int64_t length = 0; // slice: resulting extent
};

/// Apply a view to a layout; nullopt when a reshape cannot be expressed with strides.
std::optional<Layout> apply_view(const Layout& in, const ViewPrim& v);

/// NumPy broadcasting of two shapes; nullopt if incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

} // namespace kiln::detail

#pragma once
// Shape arithmetic that cannot overflow. Every product or sum of extents an op forms goes
// through these, and every node's shape passes check_extents when the node is made, so the
// rest of kiln may compute numel, strides and byte offsets with plain int64 arithmetic.
#include <kiln/dtype.h>
#include <kiln/shape.h>

#include <cstdint>
#include <optional>

namespace kiln::detail {

/// a * b and a + b, or nullopt when the exact result does not fit in int64. Inline: every op
/// checks its shape with them when it is recorded.
inline std::optional<int64_t> mul_extents(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> add_extents(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// The product of the extents with zeros counted as 1: the largest contiguous stride times
/// the outermost extent, i.e. what bounds every offset into a layout of this shape.
/// nullopt on overflow or a negative extent.
inline std::optional<int64_t> span_of(const Shape& s) {
  int64_t span = 1;
  for (int64_t e : s)
    if (e < 0 || __builtin_mul_overflow(span, e > 1 ? e : 1, &span)) return std::nullopt;
  return span;
}

/// Throws "[op] ..." unless every extent is >= 0 and span_of(s) * itemsize(dt) fits in
/// int64: then numel(), nbytes(), contiguous strides and byte offsets of the shape do too.
void fail_extents(const char* op, const Shape& s, DType dt); // the throwing half
inline void check_extents(const char* op, const Shape& s, DType dt) {
  auto span = span_of(s);
  int64_t bytes;
  if (static_cast<unsigned>(dt) >= static_cast<unsigned>(kNumDTypes) || !span ||
      __builtin_mul_overflow(*span, itemsize(dt), &bytes))
    fail_extents(op, s, dt);
}

/// Throws "[op] ..." unless dt is one of kiln's dtypes (a DType made from an integer may not be).
void check_dtype(const char* op, DType dt);

} // namespace kiln::detail

#pragma once
// Element conversion between dtypes, shared by host reads and the CPU backend. Casting rules:
// float -> int truncates toward zero and saturates at the integer range, NaN -> 0;
// anything -> bool is "!= 0" (NaN -> true); f16/bf16 round to nearest even.
#include <kiln/dtype.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln::detail {

template <class I> inline I saturate_cast(double v) {
  if (std::isnan(v)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

/// Read element i of an array of dtype t as double (exact for every dtype but i64 > 2^53).
double load_as_double(const void* p, DType t, size_t i);
/// Convert n contiguous elements from one dtype to another.
void convert_elements(const void* src, DType from, void* dst, DType to, size_t n);

} // namespace kiln::detail

#pragma once
// A double-double running sum (Knuth's TwoSum): hi + lo holds the total to about 106 bits, so
// its value rounded to double depends on the order of the additions only when the exact total
// lies within about 2^-100 (relative) of a rounding boundary. Sums that must not depend on
// the order (f64 sums on the GPU, whose layouts add in different orders; every floating sum and
// dot product in reproducible mode, on every device) accumulate in it. Compiled on the host
// (the CPU interpreter) and, pasted verbatim into NVRTC sources (CMake embeds this file as
// kDsumCoreSource), on the device: the same additions on both. Needs every operation rounded
// on its own (no fma: -ffp-contract=off on the host, --fmad=false in NVRTC). An aggregate
// without initializers, so that it can live in __shared__ arrays: start from DSum{0, 0}.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define KILN_DSUM_FN __host__ __device__ __forceinline__
#define KILN_ISFINITE(x) isfinite(x)
#else
#include <cmath>
#define KILN_DSUM_FN inline
#define KILN_ISFINITE(x) std::isfinite(x)
#endif

namespace kiln::detail {

struct DSum {
  double hi, lo;
  /// hi + lo += x, on separate hi and lo: arrays where a loop should vectorize, or vectors of
  /// doubles (T), each lane rounding as the scalar code does.
  template <class T> KILN_DSUM_FN static void add(T& hi, T& lo, T x) {
    const T s = hi + x, b = s - hi;
    lo += (hi - (s - b)) + (x - b);
    hi = s;
  }
  KILN_DSUM_FN void operator+=(double x) { add<double>(hi, lo, x); }
  KILN_DSUM_FN void operator+=(const DSum& o) {
    *this += o.hi;
    lo += o.lo;
  }
  /// The total rounded to double; a non-finite hi is the result (lo is NaN then).
  KILN_DSUM_FN double value() const { return KILN_ISFINITE(hi) ? hi + lo : hi; }
};

} // namespace kiln::detail

struct k_dsum {
  double hi, lo;
  __device__ __forceinline__ void operator+=(double x) {
    const double s = hi + x, b = s - hi;
    lo += (hi - (s - b)) + (x - b);
    hi = s;
  }
  __device__ __forceinline__ void operator+=(const k_dsum& o) {
    *this += o.hi;
    lo += o.lo;
  }
};
__device__ __forceinline__ double k_value(const k_dsum& a) { return isfinite(a.hi) ? a.hi + a.lo : a.hi; }
__device__ __forceinline__ k_dsum k_shfl_down(const k_dsum& a, int s) {
  return k_dsum{__shfl_down_sync(0xffffffffu, a.hi, s), __shfl_down_sync(0xffffffffu, a.lo, s)};
}

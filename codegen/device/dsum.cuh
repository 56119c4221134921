// The double-double sum of ir/dsum.h (pasted before this) under the generated code's k_ names.
typedef kiln::detail::DSum k_dsum;
__device__ __forceinline__ double k_value(const k_dsum& a) { return a.value(); }
__device__ __forceinline__ k_dsum k_shfl_down(const k_dsum& a, int s) {
  return k_dsum{__shfl_down_sync(0xffffffffu, a.hi, s), __shfl_down_sync(0xffffffffu, a.lo, s)};
}

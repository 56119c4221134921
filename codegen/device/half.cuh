#include <cuda_fp16.h>
#include <cuda_bf16.h>
// f16/bf16 values compute in float and are rounded to their precision after every op. From
// sm_80 the rounding is the paired conversion (cvt.rn.*x2.f32, an F2FP on the ALU) given the
// value twice: the single one (F2F) issues at 16 per clock per SM and bounded bf16 softmax at
// 63% of copy bandwidth (80% with F2FP; same bits).
__device__ __forceinline__ __half k_to_f16(float x) {
#if __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));
  return __ushort_as_half((unsigned short)r);
#else
  return __float2half_rn(x);
#endif
}
__device__ __forceinline__ __nv_bfloat16 k_to_bf16(float x) {
#if __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(x));
  return __ushort_as_bfloat16((unsigned short)r);
#else
  return __float2bfloat16_rn(x);
#endif
}
__device__ __forceinline__ float k_rh(float x) { return __half2float(k_to_f16(x)); }
__device__ __forceinline__ float k_rb(float x) {
  return __uint_as_float((unsigned)__bfloat16_as_ushort(k_to_bf16(x)) << 16);
}
// exp and division of f16/bf16 values, which keep 8 or 11 bits: the hardware approximations
// (ex2.approx of x * log2(e); div.full, at most 2 float ulps over the whole range) are over
// 100x closer than half an ulp of either type, at a third of the instructions of the correctly
// rounded float sequences. The rounded value can differ from the CPU's only when the exact one
// lies that close to a rounding boundary (none did in 67M softmax values). exp flushes results
// below 2^-126 to zero (.ftz: 5% faster bf16 softmax): f16 rounds those to zero anyway; bf16
// loses its subnormals there (exp(x) for x < -87.3).
__device__ __forceinline__ float k_exp_h(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
__device__ __forceinline__ float k_div_h(float a, float b) {
  float y;
  asm("div.full.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

#define KD __device__ __forceinline__
typedef unsigned long long k_u64;
// Every kernel's first statement: wait until the kernels before it have completed and their
// writes are visible. A no-op unless the launch is a programmatic dependent one (CUDA graphs on
// sm_90+, runtime/cuda/cuda_batch.cpp), which may start this kernel while the last one ends.
KD void k_wait_for_predecessors() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Wrapping integer arithmetic (signed overflow is undefined in C++).
KD int k_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
KD int k_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
KD int k_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
KD long long k_add(long long a, long long b) { return (long long)((k_u64)a + (k_u64)b); }
KD long long k_sub(long long a, long long b) { return (long long)((k_u64)a - (k_u64)b); }
KD long long k_mul(long long a, long long b) { return (long long)((k_u64)a * (k_u64)b); }
// Integer power by squaring; negative exponents: 1 for base 1, +-1 for base -1, else 0.
template <class T> KD T k_ipow(T base, T e) {
  if (e < 0) return base == 1 ? T(1) : base == -1 ? ((e & 1) ? T(-1) : T(1)) : T(0);
  T r = 1;
  while (e) {
    if (e & 1) r = k_mul(r, base);
    base = k_mul(base, base);
    e >>= 1;
  }
  return r;
}
// float -> int: truncate toward zero, saturate at the range, NaN -> 0.
KD int k_sat_i32(double v) {
  if (v != v) return 0;
  if (v <= -2147483648.0) return -2147483647 - 1;
  if (v >= 2147483647.0) return 2147483647;
  return (int)v;
}
KD long long k_sat_i64(double v) {
  if (v != v) return 0;
  if (v <= -9223372036854775808.0) return -9223372036854775807LL - 1;
  if (v >= 9223372036854775807.0) return 9223372036854775807LL;
  return (long long)v;
}
// maximum/minimum: NaN in either operand gives NaN (b's first, as the CPU).
template <class T> KD T k_max(T a, T b) {
  T r = a > b ? a : b;
  return b != b ? b : (a != a ? a : r);
}
template <class T> KD T k_min(T a, T b) {
  T r = a < b ? a : b;
  return b != b ? b : (a != a ? a : r);
}
KD double k_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
// Reduction folds (also used to combine partial results): NaN wins and stays.
template <class A> KD void k_fold_max(A& a, A x) {
  if ((x > a || x != x) && a == a) a = x;
}
template <class A> KD void k_fold_min(A& a, A x) {
  if ((x < a || x != x) && a == a) a = x;
}
#if __CUDA_ARCH__ >= 800
// The same folds for float in one instruction each: max.NaN/min.NaN return NaN when either
// operand is NaN.
KD void k_fold_max(float& a, float x) { asm("max.NaN.f32 %0, %0, %1;" : "+f"(a) : "f"(x)); }
KD void k_fold_min(float& a, float x) { asm("min.NaN.f32 %0, %0, %1;" : "+f"(a) : "f"(x)); }
#endif
// argmax: the first maximum; the first NaN wins. ia < 0: no element yet.
template <class A> KD void k_fold_argmax(A& a, long long& ia, A b, long long ib) {
  if (ib < 0) return;
  bool take;
  if (ia < 0) take = true;
  else if (a != a || b != b) take = b != b && (a == a || ib < ia);
  else take = b > a || (b == a && ib < ia);
  if (take) {
    a = b;
    ia = ib;
  }
}
// N consecutive elements, loaded/stored with 16-byte accesses (fewer bytes when N is small).
template <class T, int N> struct alignas(sizeof(T) * N > 16 ? 16 : sizeof(T) * N) k_vec { T v[N]; };

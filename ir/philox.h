#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// counter-based, so element i of a random tensor depends only on (seed, counter + i) and every
// device produces the same numbers. Compiled on the host and, pasted verbatim into NVRTC
// sources by codegen/cuda_codegen.cpp (CMake embeds this file as a string), on the device.
#if defined(__CUDACC_RTC__) // NVRTC: no <cstdint>; device math from the CUDA headers
#define KILN_HD __host__ __device__
#define KILN_SQRT(x) sqrt(x)
#define KILN_LOG(x) log(x)
#define KILN_COS(x) cos(x)
namespace kiln::detail {
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
} // namespace kiln::detail
#else
#include "ir/float_math.h" // log_d, cos_2pi_d
#include <cstdint>
#if defined(__CUDACC__)
#define KILN_HD __host__ __device__
#define KILN_SQRT(x) sqrt(x)
#define KILN_LOG(x) log(x)
#define KILN_COS(x) cos(x)
#else
#define KILN_HD
#define KILN_SQRT(x) __builtin_sqrt(x)
#define KILN_LOG(x) __builtin_log(x)
#define KILN_COS(x) __builtin_cos(x)
#endif
#endif

namespace kiln::detail {

struct Philox4 {
  uint32_t v[4];
};

KILN_HD inline Philox4 philox4x32_10(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// Uniform in [0, 1) at the resolution of the dtype's significand (so rounding never gives 1):
/// bits = 24 (f32), 53 (f64), 11 (f16), 8 (bf16).
KILN_HD inline double philox_uniform(uint64_t seed, uint64_t counter, int bits) {
  Philox4 r = philox4x32_10(seed, counter);
  if (bits > 32) {
    uint64_t x = (uint64_t(r.v[0]) << 32 | r.v[1]) >> (64 - bits);
    return static_cast<double>(x) * (1.0 / static_cast<double>(uint64_t(1) << bits));
  }
  return static_cast<double>(r.v[0] >> (32 - bits)) / static_cast<double>(uint64_t(1) << bits);
}

/// Standard normal by Box-Muller, in double: with the C library's (CUDA's) log and cos, or,
/// `portable`, with ir/float_math.h's, which give the same bits on every device (reproducible
/// mode; float_math.h comes before this file wherever it is compiled).
KILN_HD inline double philox_normal(uint64_t seed, uint64_t counter, bool portable = false) {
  Philox4 r = philox4x32_10(seed, counter);
  double u1 = (static_cast<double>(r.v[0]) + 0.5) * 0x1p-32; // (0, 1)
  double u2 = static_cast<double>(r.v[1]) * 0x1p-32;
  if (portable) return KILN_SQRT(-2.0 * log_d(u1)) * cos_2pi_d(6.283185307179586 * u2);
  return KILN_SQRT(-2.0 * KILN_LOG(u1)) * KILN_COS(6.283185307179586 * u2);
}

} // namespace kiln::detail

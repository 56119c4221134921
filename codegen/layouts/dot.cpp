// The dot layout: elementwise kernels with small dot products (a matrix times a vector, an
// RNN cell at batch 1). dot_bx elements side by side per block, the rest of the block (and of
// a cluster, on sm_90) splitting each element's K (the emitter: Emitter::dot_body).
#include "codegen/cuda_codegen_internal.h"

#include <algorithm>

namespace kiln::detail::cg {

void choose_dot(const FusedKernel& k, CudaVariant& v, int64_t blocks) {
  const int64_t n = k.shape.numel();
  // Dot layout: dot_bx elements side by side (neighbouring columns of B: 8 x 4 bytes fill a
  // 32-byte sector), the rest of the block down K. Wider when there are elements enough to
  // give every SM blocks anyway.
  v.dot_bx = 8;
  while (v.dot_bx < 32 && n >= int64_t(v.dot_bx) * blocks) v.dot_bx *= 2;
  // Few element groups (an LSTM's 256 hidden units are 32 of them): their blocks would each
  // stream a large share of B through one SM, whose loads in flight are capped, while most
  // SMs idle (the LSTM cell took 14.5 us in 32 blocks under ncu). A cluster of up to 8
  // blocks per group splits K further, up to ~two blocks per SM, while every thread
  // keeps at least one k.
  const int64_t groups = (n + v.dot_bx - 1) / v.dot_bx;
  int64_t max_k = 0;
  for (const KernelDot& d : k.dots) max_k = std::max(max_k, d.K);
  const int by = kBlock / v.dot_bx;
  while (v.dot_cluster < 8 && groups * v.dot_cluster * 2 <= blocks &&
         int64_t(by) * v.dot_cluster * 2 <= max_k)
    v.dot_cluster *= 2;
}

// Whole clusters (dot_cluster blocks each, on sm_90+).
CudaLaunch launch_dot(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  CudaLaunch l;
  const int64_t n = k.shape.numel();
  const int sms = std::max(1, t.sm_count), c = t.arch >= 90 ? v.dot_cluster : 1;
  l.block = kBlock;
  l.grid = static_cast<uint32_t>(
      std::min<int64_t>((n + v.dot_bx - 1) / v.dot_bx, int64_t(sms) * (2048 / kBlock) / c) * c);
  return l;
}

} // namespace kiln::detail::cg

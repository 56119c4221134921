// The tiled layout: elementwise kernels over a transposed read. 32 x 32 tiles of the inputs
// read with stride 1 along another dim than the last go through shared memory, so that both
// their reads and the output's writes are coalesced (the emitter: Emitter::tiled_body).
#include "codegen/cuda_codegen_internal.h"

#include <algorithm>

namespace kiln::detail::cg {

// Tiling pays when an input is read with stride 1 along some dim other than the last while
// the outputs are written along the last (a transpose): without it one of the two sides is
// uncoalesced. Picks the dim that the most inputs are transposed along. False: no input is.
bool choose_tiled(const FusedKernel& k, CudaVariant& v) {
  const int rank = k.shape.size();
  if (rank < 2 || k.shape.numel() < 1024) return false;
  const int last = rank - 1;
  for (const KernelOutput& o : k.outputs)
    if (!is_contiguous(Layout{k.shape, o.strides, 0})) return false;
  if (k.shape[last] < 8) return false;
  int best = 0;
  for (int d = 0; d < last; ++d) {
    if (k.shape[d] < 8) continue;
    uint32_t mask = 0;
    int count = 0;
    for (size_t j = 0; j < k.inputs.size() && j < 32; ++j) {
      const KernelInput& in = k.inputs[j];
      if (in.cls == IndexClass::strided && in.strides[d] == 1 && in.strides[last] != 1 &&
          in.strides[last] != 0) {
        mask |= 1u << j;
        ++count;
      }
    }
    if (count > best) {
      best = count;
      v.tile_dim = d;
      v.tile_inputs = mask;
    }
  }
  return v.tile_dim >= 0;
}

CudaLaunch launch_tiled(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  CudaLaunch l;
  const int64_t n = k.shape.numel();
  if (n == 0) return launch_elementwise(k, v, t); // grid 0: nothing to launch
  const int64_t D = k.shape[v.tile_dim], L = k.shape[k.shape.size() - 1];
  const int64_t tiles = n / (D * L) * ((D + 31) / 32) * ((L + 31) / 32);
  l.block = kBlock;
  l.grid = static_cast<uint32_t>(std::min<int64_t>(tiles, int64_t(std::max(1, t.sm_count)) * 8));
  return l;
}

} // namespace kiln::detail::cg

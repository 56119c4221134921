// The tiled layout: elementwise kernels over a transposed read. 32 x 32 tiles of the inputs
// read with stride 1 along another dim than the last go through shared memory, so that both
// their reads and the output's writes are coalesced (emitted by Emitter::tiled_body, below).
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace kiln::detail::cg {

// Tiling pays when an input is read with stride 1 along some dim other than the last while
// the outputs are written along the last (a transpose): without it one of the two sides is
// uncoalesced. Picks the dim that the most inputs are transposed along. False: no input is.
// Each tiled input takes a 32 x 33 tile of shared memory; past the 47 KB a block may use
// statically (48 KB less 1 KB the hardware reserves) further inputs are read directly.
bool choose_tiled(const FusedKernel& k, CudaVariant& v) {
  constexpr int64_t kMaxTileBytes = int64_t(47) << 10;
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
    int64_t bytes = 0;
    for (size_t j = 0; j < k.inputs.size() && j < 32; ++j) {
      const KernelInput& in = k.inputs[j];
      const int64_t tile = 32 * 33 * itemsize(in.dtype);
      if (in.cls == IndexClass::strided && in.strides[d] == 1 && in.strides[last] != 1 &&
          in.strides[last] != 0 && bytes + tile <= kMaxTileBytes) {
        mask |= 1u << j;
        ++count;
        bytes += tile;
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
  // At most 8 blocks per SM, looping over the tiles: a block per tile took the transpose of
  // 16384 x 16384 f32 on the H200 from 85% of copy bandwidth to 82-83%
  // (bench/results/2026-11-28-h200-session42.md).
  const int64_t cap = elementwise_grid_cap(t);
  l.grid = static_cast<uint32_t>(std::min<int64_t>(tiles, cap));
  return l;
}

// ---- the emitter ---------------------------------------------------------------------------

// Tiled elementwise kernel (CudaVariant::tile_dim): each block takes 32x32 tiles of the
// (tile_dim, last dim) plane. The tiled inputs are read with threads along tile_dim (their
// stride-1 dim) into shared memory, then every element is computed and stored with threads
// along the last dim (the output's stride-1 dim). Padding the rows to 33 avoids bank
// conflicts on the transposed reads.
void Emitter::tiled_body() {
  const int df = v_.tile_dim, last = pl_.rank - 1;
  // The mask has 32 bits: inputs past 31 are never tiled (a shift by 32 or more is undefined).
  auto tiled = [&](size_t j) { return j < 32 && ((v_.tile_inputs >> j) & 1u); };
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (tiled(j))
      line(1, fmt::format("__shared__ {} k_t{}[32][33];", cg::st_name(k_.inputs[j].dtype), j));
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, fmt::format("const idx_t D = (idx_t)p.sh{}, L = (idx_t)p.sh{};", df, last));
  line(1, "const idx_t td_n = (D + 31) / 32, tl_n = (L + 31) / 32;");
  line(1, "const idx_t tiles = n == 0 ? 0 : n / (D * L) * td_n * tl_n;");
  line(1, "const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;");
  line(1, "for (idx_t t = blockIdx.x; t < tiles; t += gridDim.x) {");
  line(2, "idx_t rest = t;");
  line(2, "const idx_t tl = rest % tl_n; rest /= tl_n;");
  line(2, "const idx_t td = rest % td_n; rest /= td_n;");
  // Flat output offset of the tile's other dims (row-major, the highest dim fastest).
  line(2, "idx_t base = 0, cs = 1, cs_df = 1;");
  for (int d = last; d >= 0; --d) {
    if (d == df)
      line(2, "cs_df = cs;");
    else if (d != last)
      line(2, fmt::format("base += (rest % (idx_t)p.sh{0}) * cs; rest /= (idx_t)p.sh{0};", d));
    line(2, fmt::format("cs *= (idx_t)p.sh{};", d));
  }
  // Each strided input's offset at (d, l) = 0 of this tile: one unravel per tile; elements
  // then add d and l times their strides (no division per element).
  declare_offsets(2, "bi", nullptr);
  unravel(2, "base", 0, pl_.rank, "bi", "");
  auto stride_term = [&](size_t j, int dim, const char* var) -> std::string {
    const std::vector<int>& dims = pl_.in[j].dims;
    if (std::find(dims.begin(), dims.end(), dim) == dims.end()) return "";
    return fmt::format(" + {} * {}", var, cast_idx(fmt::format("in{}_s{}", j, dim)));
  };
  auto phase = [&](const char* d_expr, const char* l_expr, bool load) {
    line(2, "#pragma unroll");
    line(2, "for (int k = 0; k < 32; k += 8) {");
    line(3, fmt::format("const idx_t d = td * 32 + {}, l = tl * 32 + {};", d_expr, l_expr));
    line(3, "if (d < D && l < L) {");
    line(4, "const idx_t i = base + d * cs_df + l;");
    for (size_t j = 0; j < pl_.in.size(); ++j)
      if (pl_.in[j].mode == M::strided)
        line(4, fmt::format("const idx_t oi{0} = bi{0}{1}{2};", j, stride_term(j, df, "d"),
                            stride_term(j, last, "l")));
    if (load) {
      for (size_t j = 0; j < pl_.in.size(); ++j)
        if (tiled(j)) line(4, fmt::format("k_t{0}[ty + k][tx] = p.in{0}[oi{0}];", j));
    } else {
      tape(4,
           [&](int j) { return tiled(j) ? fmt::format("k_t{}[tx][ty + k]", j) : element_load(j); });
      for (size_t j = 0; j < pl_.out.size(); ++j)
        line(4, fmt::format("p.out{}[i] = {};", j, stored(j)));
    }
    line(3, "}");
    line(2, "}");
    line(2, "__syncthreads();");
  };
  phase("tx", "ty + k", true);
  phase("ty + k", "tx", false);
  line(1, "}");
}

} // namespace kiln::detail::cg

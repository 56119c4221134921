// The GEMM-tile layout: kernels whose dot products form a matrix of outputs (more than a few
// rows; the seed loop's step). A block computes a T x T tile of outputs, its K staged in
// shared-memory chunks and split between groups of threads, clusters of blocks splitting K
// further on sm_90 (the emitter: Emitter::gemm_body).
#include "codegen/cuda_codegen_internal.h"

#include <algorithm>

namespace kiln::detail::cg {

bool gemm_f64(const FusedKernel& k) {
  return !k.dots.empty() && k.inputs[k.dots[0].a].dtype == DType::f64;
}

int gemm_bk(const FusedKernel& k, const CudaVariant& v) {
  return v.gemm_tile > 0 ? std::min(64, (gemm_f64(k) ? 1024 : 2048) / v.gemm_tile) : 0;
}

int gemm_groups(const CudaVariant& v) {
  const int threads_per_edge = v.gemm_tile / kGemmRegTile;
  return kBlock / (threads_per_edge * threads_per_edge);
}

int64_t gemm_smem_elems(const FusedKernel& k, const CudaVariant& v) {
  const int T = v.gemm_tile, BK = gemm_bk(k, v), G = gemm_groups(v);
  const int64_t chunks = int64_t(2) * BK * (T + kGemmRegTile + T);
  const int64_t sums = int64_t(k.dots.size()) * T * T + (G > 1 ? int64_t(G) * T * T : 0);
  return std::max(chunks, sums);
}

// The GEMM-tile layout (Emitter::gemm_body) takes kernels over [batch..., M, N] with more
// than kGemmMinRows rows per matrix (fewer: the dot layout, which splits each element's K over
// a block) whose every dot reads row m of A and column n of B at element (m, n), through
// strided index maps, all with one accumulator type. The tile: the smallest of 16, 32 and 64
// that keeps the grid within ~two blocks per SM (`blocks`; 264 on the H100); a block's 256 threads
// then split each K chunk between 16, 4 or 1 groups (gemm_groups). Clusters of up to 8 blocks split
// K further while the grid stays within that and every block keeps two chunks of K. Measured by
// hand-written variants of the seed step and seven other shapes, side by side
// (tools/gemm-tile/seed_lab.cu; bench/results/2026-11-22-h100-gemm-k-groups.md): the seed
// loop's 256 x 256 x 256 takes 5.5 us per step in tiles of 16 (256 blocks), 5.8 in tiles of
// 32 with clusters of 2 and 7.1 in tiles of 64 with clusters of 8; 512 x 128 x 256 (512
// tiles of 16) is fastest in tiles of 32. False when no tile's shared memory fits the 48 KB a
// launch gets without opting in.
constexpr int64_t kGemmMinRows = 4;
constexpr int64_t kGemmMaxSharedBytes = int64_t(48) << 10;

bool choose_gemm_tile(const FusedKernel& k, CudaVariant& v, int64_t blocks) {
  const int r = k.shape.size();
  if (r < 2 || k.shape[r - 2] <= kGemmMinRows) return false;
  const bool f64 = gemm_f64(k);
  int64_t max_k = 0;
  for (const KernelDot& d : k.dots) {
    const KernelInput &a = k.inputs[d.a], &b = k.inputs[d.b];
    if (a.cls != IndexClass::strided || b.cls != IndexClass::strided) return false;
    if (a.strides[r - 1] != 0 || b.strides[r - 2] != 0) return false;
    if ((a.dtype == DType::f64) != f64 || (b.dtype == DType::f64) != f64) return false;
    max_k = std::max(max_k, d.K);
  }
  const int64_t M = k.shape[r - 2], N = k.shape[r - 1];
  if (N <= 0) return false; // (M > 4 above)
  const int64_t batch = k.shape.numel() / (M * N);
  auto tiles = [&](int T) { return batch * ((M + T - 1) / T) * ((N + T - 1) / T); };
  auto fits = [&](int T) {
    CudaVariant t;
    t.gemm_tile = T;
    return gemm_smem_elems(k, t) * (f64 ? 8 : 4) <= kGemmMaxSharedBytes;
  };
  int T = 0;
  for (int t : {16, 32, 64})
    if (fits(t) && (T == 0 || tiles(T) > blocks)) T = t;
  if (T == 0) return false;
  v.gemm_tile = T;
  const int BK = gemm_bk(k, v);
  while (v.dot_cluster < 8 && tiles(T) * v.dot_cluster * 2 <= blocks &&
         max_k >= int64_t(v.dot_cluster) * 4 * BK)
    v.dot_cluster *= 2;
  return true;
}

// x: column tiles (a cluster each), y: row tiles, z: matrices.
CudaLaunch launch_gemm_tile(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  CudaLaunch l;
  const int64_t n = k.shape.numel();
  const int T = v.gemm_tile, r = k.shape.size(), c = t.arch >= 90 ? v.dot_cluster : 1;
  const int64_t M = k.shape[r - 2], N = k.shape[r - 1];
  if (n == 0) {
    l.grid = 0;
    return l;
  }
  constexpr int64_t kMaxYZ = 65535; // more row tiles or matrices: blocks loop over them
  l.block = kBlock;
  l.grid = static_cast<uint32_t>((N + T - 1) / T * c);
  l.grid_y = static_cast<uint32_t>(std::min((M + T - 1) / T, kMaxYZ));
  l.grid_z = static_cast<uint32_t>(std::min(n / (M * N), kMaxYZ));
  return l;
}

} // namespace kiln::detail::cg

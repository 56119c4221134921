// Merged launches (cuda_codegen.h, CudaRepeat): a run of launches of one kernel as one launch
// whose grid is one block or one thread-block cluster, the members' bodies in order with a
// barrier over the grid between them.
//
// Why a barrier is enough: every member's body computes the same elements on the same blocks
// whatever else runs, and reads only what earlier members wrote. A block barrier
// (__syncthreads) makes a block's global writes visible to the block; the cluster barrier's
// arrive has release and its wait acquire semantics at cluster scope, which makes every
// block's writes before it visible to every block of the cluster after it. No member may
// read through the non-coherent read-only path, which kernels never do (no __restrict__, no
// __ldg).
#include "codegen/cuda_codegen_internal.h"
#include "ir/kernel_key.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail {

using namespace cg;

namespace {

// A launch's Params may take 32764 bytes from CUDA 12.1 (NVRTC and driver); before, 4096.
int64_t max_param_bytes(const CudaTarget& t) {
  return t.nvrtc_version >= 12010 ? 32764 : 4096;
}

// The merged kernel's barrier over the grid: the block's, or the cluster's (release on arrive,
// acquire on wait: the PTX defaults).
const char* grid_barrier(const CudaLaunch& shape) {
  const bool one_block = shape.grid * shape.grid_y * shape.grid_z == 1;
  return one_block ? "__syncthreads();"
                   : "asm volatile(\"barrier.cluster.arrive.aligned;\\n\\t"
                     "barrier.cluster.wait.aligned;\" ::: \"memory\");";
}

} // namespace

// Only kernels whose own grid is one cluster (or one block) merge, in their own variant:
// merging then changes no variant and no grid, only the launches, and the merged steps compute
// the bits of the steps launched one by one. Shrinking a larger grid to fit a cluster was
// measured slower than the launches it saves: the seed step's tile of 32 on 4 SMs took 3.1 us a
// step, the LSTM cell's dots on 8 SMs 11.4 (bench/results/2026-11-27-h100-session30.md).
std::optional<CudaRepeat> choose_repeat(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                                        const CudaTarget& t) {
  if (k.segmented() || k.shape.numel() == 0) return std::nullopt;
  CudaRepeat r;
  r.variant = choose_variant(k, slot_base, t);
  if (r.variant.dot_cluster > 1) return std::nullopt; // clusters of its own: the grid is not one
  r.shape = launch_for(k, r.variant, t);
  const int64_t blocks = int64_t(r.shape.grid) * r.shape.grid_y * r.shape.grid_z;
  if (blocks < 1 || blocks > (t.arch >= 90 ? kMaxRepeatBlocks : 1)) return std::nullopt;
  if (r.shape.shared_bytes > (48u << 10)) return std::nullopt;
  const int64_t bytes = int64_t(param_template(k, r.variant).bytes.size());
  r.max_count =
      int(std::min<int64_t>(kMaxRepeatCount, max_param_bytes(t) / std::max<int64_t>(bytes, 8)));
  if (r.max_count < 2) return std::nullopt;
  return r;
}

CudaKernelSource render_cuda_repeat(const FusedKernel& k, const CudaRepeat& r, const CudaTarget& t,
                                    int count) {
  const CudaLaunch& g = r.shape;
  const bool one_block = g.grid * g.grid_y * g.grid_z == 1;
  CudaKernelSource src;
  const std::string structural = kernel_key(k);
  src.key = full_key(structural, k, r.variant, t) +
            fmt::format(" repeat{} grid{}x{}x{}", count, g.grid, g.grid_y, g.grid_z);
  src.name = readable_name(k, r.variant, t, structural, src.key, fmt::format("_x{}", count));
  std::string s = source_prelude(k, src.name, src.key);
  CgPlan pl = cuda_make_plan(k, {});
  s += params_decl(pl);
  s += Emitter(k, r.variant, pl).run_step("k_step");
  s += fmt::format("struct RepeatParams {{\n  Params p[{}];\n}};\n", count);
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}){} {}(const "
                   "__grid_constant__ RepeatParams r) {{\n",
                   kBlock,
                   one_block
                       ? std::string()
                       : fmt::format(" __cluster_dims__({}, {}, {})", g.grid, g.grid_y, g.grid_z),
                   src.name);
  s += fmt::format("  for (int s = 0; s < {}; ++s) {{\n"
                   "    if (s > 0) {}\n"
                   "    k_step(r.p[s]);\n"
                   "  }}\n}}\n",
                   count, grid_barrier(g));
  src.source = std::move(s);
  return src;
}

} // namespace kiln::detail

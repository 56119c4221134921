// The dot layout: elementwise kernels with small dot products (a matrix times a vector, an
// RNN cell at batch 1). dot_bx elements side by side per block, the rest of the block (and of
// a cluster, on sm_90) splitting each element's K (emitted by Emitter::dot_body, below).
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail::cg {

void choose_dot(const FusedKernel& k, CudaVariant& v, int64_t blocks) {
  const int64_t n = k.shape.numel();
  // Dot layout: dot_bx elements side by side (neighbouring columns of B: 8 x 4 bytes fill a
  // 32-byte sector), the rest of the block down K. Wider when there are elements enough to
  // give every SM blocks anyway.
  v.dot_bx = 8;
  while (v.dot_bx < 32 && n >= int64_t(v.dot_bx) * blocks) v.dot_bx *= 2;
  // Few element groups with long dots: a cluster of up to 8 blocks per group splits K further,
  // up to ~two blocks per SM, while every thread keeps at least one k, so that a long B is not
  // streamed through a few SMs whose loads in flight are capped. Not while a thread's share of
  // K is at most kDotKsWithoutCluster ks: there the cluster's barrier and the sums it adds
  // through distributed shared memory cost more than they spread. LSTM and GRU cells at batch
  // 1, hidden 128 to 512, took 11-22% less GPU time a step without clusters in 5 of 6 loops
  // and 12-26% less with their weights evicted from L2 before every step in 5 of 6 (an LSTM at
  // 256 18% more; bench/results/2026-11-27-h100-session36.md, calls 10-11).
  const int64_t groups = (n + v.dot_bx - 1) / v.dot_bx;
  int64_t max_k = 0;
  for (const KernelDot& d : k.dots) max_k = std::max(max_k, d.K);
  const int by = kBlock / v.dot_bx;
  if (max_k <= int64_t(by) * kDotKsWithoutCluster) return;
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

// ---- the emitter ---------------------------------------------------------------------------

// Where element i's run of input j starts (its index map; the pointer is already offset).
std::string Emitter::dot_base(int j) const {
  switch (pl_.in[j].mode) {
  case M::scalar:
    return "0";
  case M::contiguous:
    return "i";
  case M::strided:
    return fmt::format("oi{}", j);
  }
  return "0";
}

// The dot layout's sizes, shared by the dot_* emitters.
struct Emitter::DotShape {
  int bx, by; // elements per block, and threads splitting each element's K
  int C, S;   // blocks per cluster, and the k step of a thread (C * by)
};

// Dot layout (CudaVariant::dot_bx = bx): a block takes bx consecutive elements, one per
// thread column tx; the by = kBlock / bx threads of a column split each of its element's dot
// products along K (thread ty takes k = ty, ty + by, ...). Neighbouring elements of a small
// matmul's output are neighbouring columns of B, so a warp's 8 columns x 4 rows of B are four
// full 32-byte sectors. Each thread issues four rows' loads before it adds any (see
// column_body on why ptxas does not do it for a plain loop), the partial sums are added by warp
// shuffles and then in shared memory (dot_tree_sum), and thread ty = 0 runs the tape and stores.
// With dot_cluster = C > 1 (sm_90) the C blocks of a cluster take the same elements and split K
// once more (block r: k = r * by + ty, step C * by); after each block's own tree, block 0 adds the
// others' sums through distributed shared memory (choose_dot takes clusters for long dots only:
// an LSTM's 32 groups of 8 units at hidden 256 run on 32 blocks). The sums use fma (the kernel is
// built with --fmad=false, which would otherwise round every product), in float, double for f64:
// cuBLAS's accumulation, not the CPU reference's double, so results agree to rounding.
//
// Why not cuBLAS: at batch 1 an LSTM step's two GEMVs were two graph nodes, a written result
// and a kernel to read it, ~10 us of GPU time per replay; here the gates' eight dot products and
// the cell update are one kernel (bench/results/2026-11-22-h100-small-matmul.md).
void Emitter::dot_body() {
  DotShape ds;
  ds.bx = v_.dot_bx > 0 ? v_.dot_bx : 8;
  ds.by = kBlock / ds.bx;
  ds.C = std::max(1, v_.dot_cluster);
  ds.S = ds.C * ds.by;
  dot_element_loop(ds);
  const std::vector<int> early = dot_prefetch(ds);
  for (size_t j = 0; j < k_.dots.size(); ++j)
    line(2, fmt::format("{} acc{} = {};", dot_acc(j), j, k_.reproducible ? "{0, 0}" : "0"));
  // One loop over K per group of dots with the same K (KernelDot::same_k).
  for (size_t g = 0; g < k_.dots.size(); ++g)
    if (k_.dots[g].same_k == static_cast<int>(g)) dot_group_sums(ds, g);
  dot_tree_sum(ds);
  dot_finish(ds, early);
  line(1, "}"); // the element loop
}

// Dot j's accumulator type: double for f64 operands, else float (a group of dots with the same
// K may mix them); in a reproducible kernel double-double for all, whose rounded total is the
// same whatever the split of K (the CPU's order differs).
const char* Emitter::dot_acc(size_t j) const {
  if (k_.reproducible) return "k_dsum";
  return k_.inputs[k_.dots[j].a].dtype == DType::f64 ? "double" : "float";
}

// The shared arrays of partial sums (one per dot, one slot per thread), the thread's column and
// row, and the head of the loop over the block's runs of bx elements, up to the element's
// index and operand offsets. Every block of a cluster walks the same elements (the cluster
// barriers must match).
void Emitter::dot_element_loop(const DotShape& ds) {
  const int bx = ds.bx, C = ds.C;
  for (size_t j = 0; j < k_.dots.size(); ++j) // a slot per warp and column (dot_tree_sum)
    line(1, fmt::format("__shared__ {} k_sd{}[{}];", dot_acc(j), j, kBlock / 32 * bx));
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, fmt::format("const int tx = threadIdx.x % {0}, ty = threadIdx.x / {0};", bx));
  if (C > 1) line(1, "const unsigned k_rank = k_cluster_rank();");
  scalars(1);
  const std::string cluster_idx = C > 1 ? fmt::format("(blockIdx.x / {})", C) : "blockIdx.x";
  const std::string clusters = C > 1 ? fmt::format("(gridDim.x / {})", C) : "gridDim.x";
  line(1, fmt::format("for (idx_t ib = (idx_t){1} * {0}; ib < n; ib += (idx_t){2} * {0}) {{", bx,
                      cluster_idx, clusters));
  line(2, "const idx_t i = ib + tx;");
  line(2, "const bool valid = i < n;");
  declare_offsets(2, "oi", nullptr, "oo");
  if (pl_.shape_fields) {
    line(2, "if (valid)");
    unravel(2, "i", 0, pl_.rank, "oi", "oo");
  }
}

// The tape's per-element loads, issued by the thread that runs the tape before the dot products
// rather than after their sums meet, so that the tape waits only for the sums: under ncu the
// LSTM cell's tail (block 0's tape: its loads of bias and c, then the gates' math) held every
// other warp of the cluster at the last barrier for ~40% of the kernel. Measured in a loop
// (CUPTI): the LSTM cell at batch 1 5.5 -> 5.4 us, the GRU's 6.7 -> 6.0
// (bench/results/2026-11-26-h100-session27.md). Returns each input's prefetch slot, or -1.
std::vector<int> Emitter::dot_prefetch(const DotShape& ds) {
  std::vector<int> early(k_.inputs.size(), -1);
  int n = 0;
  for (const TapeInst& in : k_.tape) {
    if (in.op != OpCode::load || pl_.in[in.a].mode == M::scalar || early[in.a] >= 0) continue;
    if (n == kMaxDotPrefetch) break;
    early[in.a] = n++;
  }
  if (n == 0) return early;
  const char* tape_thread = ds.C > 1 ? "k_rank == 0 && ty == 0 && valid" : "ty == 0 && valid";
  for (size_t j = 0; j < early.size(); ++j)
    if (early[j] >= 0) line(2, fmt::format("{} k_pf{}{{}};", cg::st_name(k_.inputs[j].dtype), j));
  line(2, fmt::format("if ({}) {{", tape_thread));
  for (size_t j = 0; j < early.size(); ++j)
    if (early[j] >= 0) line(3, fmt::format("k_pf{} = {};", j, element_load(static_cast<int>(j))));
  line(2, "}");
  return early;
}

// This thread's partial sums of the dots whose K is dot g's (the group led by g): operand
// pointers at the element and the K loops.
void Emitter::dot_group_sums(const DotShape& ds, size_t g) {
  std::vector<size_t> group;
  for (size_t j = g; j < k_.dots.size(); ++j)
    if (k_.dots[j].same_k == static_cast<int>(g)) group.push_back(j);
  line(2, "{");
  line(3, "if (valid) {");
  line(4, fmt::format("const idx_t K = (idx_t)p.d{}_K;", g));
  for (size_t j : group) {
    const KernelDot& d = k_.dots[j];
    line(4, fmt::format("const {0}* a{1} = p.in{2} + {3}; const idx_t ak{1} = (idx_t)p.d{1}_ak;",
                        cg::st_name(k_.inputs[d.a].dtype), j, d.a, dot_base(d.a)));
    line(4, fmt::format("const {0}* b{1} = p.in{2} + {3}; const idx_t bk{1} = (idx_t)p.d{1}_bk;",
                        cg::st_name(k_.inputs[d.b].dtype), j, d.b, dot_base(d.b)));
  }
  line(4, ds.C > 1 ? fmt::format("idx_t k = (idx_t)k_rank * {} + ty;", ds.by) : "idx_t k = ty;");
  dot_k_loops(ds, group);
  line(3, "}");
  line(2, "}");
}

// The group's loops over this thread's ks (step S): four ks at a time, every dot's four rows of
// loads issued before any of their products is added, then the remaining ks one by one.
void Emitter::dot_k_loops(const DotShape& ds, const std::vector<size_t>& group) {
  const int S = ds.S;
  line(4, fmt::format("for (; k + {} < K; k += {}) {{", 3 * S, 4 * S));
  for (int u = 0; u < 4; ++u) {
    const std::string kk = u ? fmt::format("(k + {})", u * S) : "k";
    for (size_t j : group) {
      const KernelDot& d = k_.dots[j];
      line(5, fmt::format("const {0} a{1}_{2} = a{1}[{3} * ak{1}]; const {4} b{1}_{2} = "
                          "b{1}[{3} * bk{1}];",
                          cg::st_name(k_.inputs[d.a].dtype), j, u, kk,
                          cg::st_name(k_.inputs[d.b].dtype)));
    }
  }
  for (int u = 0; u < 4; ++u)
    for (size_t j : group)
      line(5, dot_term(j, fmt::format("a{}_{}", j, u), fmt::format("b{}_{}", j, u)));
  line(4, "}");
  line(4, fmt::format("for (; k < K; k += {}) {{", S));
  for (size_t j : group)
    line(5, dot_term(j, fmt::format("a{0}[k * ak{0}]", j), fmt::format("b{0}[k * bk{0}]", j)));
  line(4, "}");
}

// One multiply-add of dot j, acc<j> += a * b, both converted to its accumulator type, with fma.
// Reproducible: the product in double (exact for f32, f16 and bf16; for f64 rounded, as on the
// CPU) added to the double-double sum.
std::string Emitter::dot_term(size_t j, const std::string& a, const std::string& b) const {
  const KernelDot& d = k_.dots[j];
  if (k_.reproducible)
    return fmt::format("acc{} += (double)({}) * (double)({});", j,
                       cg::load_cvt(k_.inputs[d.a].dtype, a),
                       cg::load_cvt(k_.inputs[d.b].dtype, b));
  const std::string A = dot_acc(j);
  return fmt::format("acc{} = {}(({}){}, ({}){}, acc{});", j, A == "double" ? "fma" : "fmaf", A,
                     cg::load_cvt(k_.inputs[d.a].dtype, a), A,
                     cg::load_cvt(k_.inputs[d.b].dtype, b), j);
}

// Each column's by partial sums to one per block, with one __syncthreads rather than one per
// level of a tree in shared memory, through codegen/device/dot_sum.cuh, which the stand-in
// interpreter calls as well: the rows a warp holds (32 / bx) are added by shuffles, ty + half of
// them first; the warps' sums meet in k_sd (slot warp * bx + tx), and thread ty = 0 adds the 8 of
// its column in a tree (w + 4, w + 2, w + 1) and leaves the block's sum in slot tx. Measured under
// ncu (warm caches), the 5-level tree was 18% of the LSTM cell's warp samples at batch 1
// (bench/results/2026-11-27-h100-session28.md). k_sd holds 8 warps x bx slots per dot: the LSTM
// cell's 8 dots take 2 KB; past 8 KB its kernel took 1.5x as long
// (bench/results/2026-11-27-h100-session29.md).
void Emitter::dot_tree_sum(const DotShape& ds) {
  constexpr int kWarps = kBlock / 32;
  for (size_t j = 0; j < k_.dots.size(); ++j)
    line(2, fmt::format("k_warp_sum(k_sd{0}, {1}, tx, acc{0});", j, ds.bx));
  line(2, "__syncthreads();");
  line(2, "if (ty == 0) {");
  for (size_t j = 0; j < k_.dots.size(); ++j)
    line(3, fmt::format("k_warps_sum<{}>(k_sd{}, {}, tx);", kWarps, j, ds.bx));
  line(2, "}");
}

// Thread ty = 0 (of block 0 of a cluster) takes every dot's sum as k_dot<j>, adding the other
// blocks' through distributed shared memory in rank order, runs the tape and stores; then the
// barrier before k_sd is written again. Every remote sum is loaded before any is added, so that
// the loads wait for one round trip rather than one per add (the LSTM cell's tail under ncu).
void Emitter::dot_finish(const DotShape& ds, const std::vector<int>& early) {
  const int C = ds.C;
  if (C > 1) line(2, "k_cluster_sync(); // every block's sums are in its shared memory");
  line(2, C > 1 ? "if (k_rank == 0 && ty == 0 && valid) {" : "if (ty == 0 && valid) {");
  for (size_t j = 0; j < k_.dots.size() && C > 1; ++j)
    for (int r = 1; r < C; ++r)
      line(3, k_.reproducible
                  ? fmt::format("const k_dsum k_r{0}_{1}{{k_cluster_ld(&k_sd{0}[tx].hi, {1}), "
                                "k_cluster_ld(&k_sd{0}[tx].lo, {1})}};",
                                j, r)
                  : fmt::format("const {2} k_r{0}_{1} = k_cluster_ld(&k_sd{0}[tx], {1});", j, r,
                                dot_acc(j)));
  for (size_t j = 0; j < k_.dots.size(); ++j) {
    line(3, fmt::format("{2}{0} k_dot{1} = k_sd{1}[tx];", dot_acc(j), j, C > 1 ? "" : "const "));
    for (int r = 1; r < C; ++r) line(3, fmt::format("k_dot{0} += k_r{0}_{1};", j, r));
  }
  tape(3, [&](int j) { return early[j] >= 0 ? fmt::format("k_pf{}", j) : element_load(j); });
  store_outputs(3);
  line(2, "}");
  line(2, C > 1 ? "k_cluster_sync_relaxed(); // block 0 has read the others' k_sd: free to reuse"
                : "__syncthreads(); // k_sd is written again for the next elements");
}

} // namespace kiln::detail::cg

// The GEMM-tile layout: kernels whose dot products form a matrix of outputs (more than a few
// rows; the seed loop's step). A block computes a T x T tile of outputs, its K staged in
// shared-memory chunks and split between groups of threads, clusters of blocks splitting K
// further on sm_90 (emitted by Emitter::gemm_body, below).
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

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
  const int64_t chunks = int64_t(2) * BK * 2 * (T + kGemmRegTile); // two buffers of A and B
  const int64_t sums = int64_t(k.dots.size()) * T * T + (G > 1 ? int64_t(G) * T * T : 0);
  return std::max(chunks, sums);
}

// The GEMM-tile layout (Emitter::gemm_body) takes kernels over [batch..., M, N] with more
// than kGemmMinRows rows per matrix and columns (fewer: the dot layout, which splits each
// element's K over a block, so that a tile is not mostly padding) whose every dot reads row m of A
// and column n of B at element (m, n), through strided index maps, all with one accumulator type.
// The tile: the smallest of 16, 32 and 64 that keeps the grid within ~two blocks per SM (`blocks`;
// 264 on the H100); a block's 256 threads then split each K chunk between 16, 4 or 1 groups
// (gemm_groups). Clusters of up to kGemmMaxCluster blocks split K further while the grid stays
// within that and every block keeps two chunks of K. Measured by hand-written variants of the seed
// step and seven other shapes, side by side (tools/gemm-tile/seed_lab.cu;
// bench/results/2026-11-22-h100-gemm-k-groups.md): the seed loop's 256 x 256 x 256 takes 5.5 us per
// step in tiles of 16 (256 blocks), 5.8 in tiles of 32 with clusters of 2 and 7.1 in tiles of 64
// with clusters of 8; 512 x 128 x 256 (512 tiles of 16) is fastest in tiles of 32. False when no
// tile's shared memory fits the 48 KB a launch gets without opting in.
constexpr int64_t kGemmMinRows = 4, kGemmMinCols = 4;
// Dots with K at most this (and at most a K group's share of a chunk) are short: see gemm_body.
constexpr int64_t kGemmShortK = 4;
// Clusters of 8 were slower than of 4 where the rule picked them: an LSTM's backward step at
// batch 32 (32 x 1024 x 256) took 1.128 ms per training step, 1.040 with at most 4
// (bench/results/2026-11-26-h100-session22.md).
constexpr int kGemmMaxCluster = 4;

namespace {
// Bit d of a per-dot mask (CudaVariant): dots past the 32nd have none.
bool has_bit(uint32_t mask, int d) {
  return d < 32 && (mask >> d & 1);
}
} // namespace
// 48 KB less the 1 KB sm_80+ reserves per block, which ptxas counts against the static limit.
constexpr int64_t kGemmMaxSharedBytes = int64_t(47) << 10;

bool choose_gemm_tile(const FusedKernel& k, CudaVariant& v, int64_t blocks) {
  const int r = k.shape.size();
  // Reproducible kernels: the dot layout, whose double-double sums fit in its shared memory.
  if (k.reproducible) return false;
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
  if (N <= kGemmMinCols) return false; // (M > 4 above)
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
  if (const char* e = std::getenv("PROBE_GEMM_T"); e && fits(std::atoi(e))) T = std::atoi(e);
  if (T == 0) return false;
  v.gemm_tile = T;
  const int BK = gemm_bk(k, v);
  // Short dots: K <= 4 is within group 0's share of a chunk (BK / G >= 4 in every tile).
  for (size_t d = 0; d < k.dots.size() && d < 32; ++d) {
    if (k.dots[d].K <= kGemmShortK) v.gemm_short_dots |= uint32_t(1) << d;
    if (k.dots[d].a_k == 1) v.gemm_a_along_k |= uint32_t(1) << d;
    if (k.dots[d].b_k == 1) v.gemm_b_along_k |= uint32_t(1) << d;
  }
  while (v.dot_cluster < kGemmMaxCluster && tiles(T) * v.dot_cluster * 2 <= blocks &&
         max_k >= int64_t(v.dot_cluster) * 4 * BK)
    v.dot_cluster *= 2;
  if (const char* e = std::getenv("PROBE_GEMM_C")) v.dot_cluster = std::atoi(e);
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

// ---- the emitter ---------------------------------------------------------------------------

// GEMM-tile layout. The kernel's iteration space is [batch..., M, N] and every dot reads row m
// of its A and column n of its B at element (..., m, n) (choose_variant checks the index maps).
// A block of 256 threads owns a T x T tile of the outputs. Its threads form G = gemm_groups
// groups of (T/4)^2 (16 groups at T = 16, 4 at 32, 1 at 64); thread (kg, ty, tx) accumulates
// the 4 x 4 elements at rows ty * 4.., columns tx * 4.. of every dot in registers, over group
// kg's share of each chunk's K, reading them from shared memory as 4-wide vectors (a 4 x 4
// tile feeds 16 multiply-adds per two vector loads, where smaller register tiles were bound by
// shared-memory wavefronts). K goes in chunks of BK: each chunk of A (T x BK) and of B (BK x T)
// is loaded into registers while the previous chunk is multiplied out of shared memory, one
// barrier per chunk (two buffers); the last chunk of a dot prefetches the first of the next
// dot. Both are stored k-major, rows padded to P = T + 4. An operand with stride 1 along k (A
// row-major, B transposed: a weight read as W^T) is loaded by warps of 8 k x 4 rows: whole
// 32-byte sectors from memory, and with the padding every lane of a warp stores to a bank of
// its own; any other operand along its rows (coalesced when they have stride 1); the variant
// says which (a select per element between the two cost registers and time, as did a branch
// between two loops: bench/results/2026-11-26-h100-session22.md). With dot_cluster = C > 1 (sm_90)
// the C blocks of a cluster take the same tile and split K in BK-aligned ranges (choose_gemm_tile
// leaves each block two chunks: a block's setup and epilogue cost more than a longer K).
//
// The epilogue goes through shared memory: each thread parks its sums there (with G > 1 the
// groups' partial tiles first, which each element adds in group order); after a (cluster)
// barrier the tile's T * T elements are split between the cluster's blocks, consecutive
// elements on consecutive threads, and each element adds every block's sum in rank order (the
// same rounding whichever block adds), then runs the tape and stores, coalesced along n. Without
// a cluster, K groups' sums are added by the thread whose element it is, into registers: no
// second trip through shared memory and no barrier before the tape. When a
// thread has at most kPrefetchElems elements, the inputs its tape loads are read before the K
// loop (after the first chunk's loads, which are on the critical path), so that their round
// trip overlaps the multiply-adds.
//
// Short dots (CudaVariant::gemm_short_dots: K of at most 4 within group 0's share of a chunk,
// an RNN's input of one feature) take no part in the chunks: each element of the epilogue sums
// its own along k from +0 (before the K loop when it prefetches), the bits the tile would give
// without a chunk's round trip, two barriers and the partial sums.
//
// Why not cuBLAS with a separate epilogue kernel: for the small GEMMs of a recurrent step (the
// seed loop's 256 x 256 x 256) cuBLAS's kernel plus the epilogue kernel are two graph nodes and
// a round trip of the result through memory, and either kernel fills a fraction of the GPU;
// here the step is one kernel, 5.4 us against 9.8
// (bench/results/2026-11-22-h100-gemm-k-groups.md). Sums use fma in float (double for f64) as in
// the dot layout: cuBLAS's accumulation, not TF32.
namespace {
constexpr int kPrefetchElems = 4;
} // namespace

// The layout's sizes for this kernel and variant, shared by the gemm_* emitters.
struct Emitter::GemmShape {
  GemmShape(const FusedKernel& k, const CudaVariant& v, const CgPlan& pl) {
    T = v.gemm_tile;
    TM = kGemmRegTile;
    TR = T / TM;
    BK = gemm_bk(k, v);
    P = T + TM;
    G = gemm_groups(v);
    KG = BK / G;
    C = std::max(1, v.dot_cluster);
    r = pl.rank;
    LA = T * BK / kBlock;
    f64 = gemm_f64(k);
    acc = f64 ? "double" : "float";
    nd = static_cast<int>(k.dots.size());
    share = T * T / C;
    E = (share + kBlock - 1) / kBlock;
    prefetch = E <= kPrefetchElems;
    for (int d = 0; d < nd; ++d) is_short.push_back(has_bit(v.gemm_short_dots, d));
    // A shared-memory store of 16 bytes is served 8 lanes at a time. In a tile of 16 those 8
    // lanes park two rows of register tiles, 64 words apart: the same 16 banks twice (ncu: 23% of
    // the seed step's shared wavefronts excessive). So the odd rows' halves of 16 words swap
    // places (gemm_park). Larger tiles give the 8 lanes one row of 32 words; f64 stays as is.
    swizzle = !f64 && G > 1 && T == 16;
    sums_in_registers = G > 1 && C == 1 && prefetch; // the epilogue's elements unrolled
    loaded.assign(pl.in.size(), false);
    for (const TapeInst& in : k.tape)
      if (in.op == OpCode::load && pl.in[in.a].mode != M::scalar) loaded[in.a] = true;
  }
  int T;           // the block's tile of outputs is T x T
  int TM;          // a thread's register tile is TM x TM
  int TR;          // threads along each side of a group's tile
  int BK;          // the K chunk staged per step
  int P;           // the padded row of A's and B's k-major chunks in shared memory
  int G, KG;       // K groups, and each one's share of a chunk
  int C;           // blocks per cluster, each taking a range of K
  int r;           // the rank of the iteration space
  int LA;          // chunk elements per thread, of A and of B each
  bool f64;        // sums in double
  const char* acc; // the accumulators' type
  int nd;          // dot products
  int share, E;    // a block's share of the tile's elements, and epilogue elements per thread
  bool prefetch;   // the epilogue's inputs are loaded before the K loop
  bool swizzle;    // parked partial tiles swap the 16-word halves of odd register-tile rows
  // The K groups' sums are added in the registers of the threads whose epilogue elements they
  // are (element tid + q * kBlock in both), not parked again: no other block reads them, and the
  // epilogue, unrolled over its elements (prefetch), indexes them by constants.
  bool sums_in_registers;
  std::vector<bool> loaded;   // the inputs the tape loads (not scalars: those are hoisted already)
  std::vector<bool> is_short; // dots each element sums itself (CudaVariant::gemm_short_dots)
  // The first dot from `d` on that the tile sums (not short); nd if none.
  int next_long(int d) const {
    while (d < nd && is_short[d]) ++d;
    return d;
  }
};

void Emitter::gemm_body() {
  const GemmShape g(k_, v_, pl_);
  gemm_tile_loop(g);
  gemm_tile_operands(g);
  gemm_k_loops(g);
  gemm_park_sums(g);
  gemm_epilogue(g);
  line(1, "}"); // the tile loop
}

// The shared array, the thread's place in the tile, and the head of the loop over tiles, up to
// the strided operands' offsets at this matrix's (0, 0). The grid (launch_for): x the column
// tiles, C blocks (a cluster) each; y the row tiles and z the matrices of a batch, looped over
// past 65535. No division by a runtime value (but for the batch dims of a batched matmul,
// unravelled once per tile).
void Emitter::gemm_tile_loop(const GemmShape& g) {
  const int T = g.T, TR = g.TR, r = g.r;
  line(1, fmt::format("__shared__ __align__(16) {} k_sm[{}];", g.acc, gemm_smem_elems(k_, v_)));
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, fmt::format("const idx_t M = (idx_t)p.sh{}, N = (idx_t)p.sh{};", r - 2, r - 1));
  line(1, fmt::format("const idx_t tm_n = (M + {}) / {};", T - 1, T));
  if (g.G == 1)
    line(1, fmt::format("const int tid = threadIdx.x, tx = tid % {0}, ty = tid / {0};", TR));
  else
    line(1, fmt::format("const int tid = threadIdx.x, kg = tid / {0}, tx = tid % {1}, ty = tid / "
                        "{1} % {1};",
                        TR * TR, TR));
  line(1, g.C > 1 ? "const unsigned k_rank = k_cluster_rank();" : "const unsigned k_rank = 0;");
  line(1, fmt::format("const idx_t tn = (idx_t)blockIdx.x / {};", g.C));
  scalars(1);
  line(1, "for (idx_t rest = blockIdx.z; rest * M * N < n; rest += gridDim.z)");
  line(1, "for (idx_t tm = blockIdx.y; tm < tm_n; tm += gridDim.y) {");
  line(2, fmt::format("const idx_t m0 = tm * {0}, n0 = tn * {0};", T));
  line(2, fmt::format("const int mr = (int)min((idx_t){0}, M - m0), nr = (int)min((idx_t){0}, N - "
                      "n0);",
                      T));
  line(2, "const idx_t base = rest * M * N; // flat index of this matrix's element (0, 0)");
  line(2, fmt::format("const bool whole = mr == {0} && nr == {0}; // no edge in this tile", T));
  // Each strided operand's offset at this matrix's (0, 0): the batch dims of `rest` unravelled.
  declare_offsets(2, "bi", nullptr, "bo");
  unravel(2, "rest", 0, r - 2, "bi", "bo");
}

// Input j's stride along dim as an expression ("0" unless it is strided along it).
std::string Emitter::gemm_in_stride(int j, int dim) const {
  const std::vector<int>& dims = pl_.in[j].dims;
  if (pl_.in[j].mode != M::strided || std::find(dims.begin(), dims.end(), dim) == dims.end())
    return "0";
  return cast_idx(fmt::format("in{}_s{}", j, dim));
}

// Input j's offset at this matrix's (0, 0).
std::string Emitter::gemm_in_base(int j) const {
  return pl_.in[j].mode == M::strided ? fmt::format("bi{}", j) : std::string("0");
}

// Element q of this thread's share of the tile: its position and flat index, whether it is
// inside the tile, and the offsets of the strided operands. `q` is the element's number as an
// expression: a constant when unrolled, else a loop index.
void Emitter::gemm_element(const GemmShape& g, int ind, const std::string& q) {
  const int r = g.r;
  line(ind, fmt::format("const int e = (int)k_rank * {} + tid + {} * {};", g.share, q, kBlock));
  line(ind, fmt::format("const int mm = e / {0}, nn = e % {0};", g.T));
  line(ind, fmt::format("const bool valid = tid + {} * {} < {} && mm < mr && nn < nr;", q, kBlock,
                        g.share));
  // Past the tile's edge an element's offsets could overflow idx_t: they are taken at (0, 0).
  line(ind, "const idx_t m = m0 + (valid ? mm : 0), nc = n0 + (valid ? nn : 0);");
  line(ind, "const idx_t i = base + m * N + nc;");
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (pl_.in[j].mode == M::strided)
      line(ind, fmt::format("const idx_t oi{0} = bi{0} + m * {1} + nc * {2};", j,
                            gemm_in_stride(static_cast<int>(j), r - 2),
                            gemm_in_stride(static_cast<int>(j), r - 1)));
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (pl_.out[j].mode == M::strided)
      line(ind, fmt::format("const idx_t oo{0} = bo{0} + m * {1} + nc * {2};", j,
                            cast_idx(fmt::format("out{}_s{}", j, r - 2)),
                            cast_idx(fmt::format("out{}_s{}", j, r - 1))));
}

// Per tile: the registers the epilogue's inputs are prefetched into, and every dot's operand
// pointers at the tile's rows (A) and columns (B), its K range for this block (C ranges of
// whole chunks) and its TM x TM accumulators.
void Emitter::gemm_tile_operands(const GemmShape& g) {
  const int r = g.r, BK = g.BK, C = g.C;
  if (g.prefetch)
    for (size_t j = 0; j < pl_.in.size(); ++j)
      if (g.loaded[j])
        line(2, fmt::format("{} k_p{}[{}];", cg::st_name(k_.inputs[j].dtype), j, g.E));
  for (int d = 0; d < g.nd; ++d) {
    const KernelDot& kd = k_.dots[d];
    line(2, fmt::format("const {0}* A{1} = p.in{2} + {3} + m0 * {4};",
                        cg::st_name(k_.inputs[kd.a].dtype), d, kd.a, gemm_in_base(kd.a),
                        gemm_in_stride(kd.a, r - 2)));
    line(2, fmt::format("const {0}* B{1} = p.in{2} + {3} + n0 * {4};",
                        cg::st_name(k_.inputs[kd.b].dtype), d, kd.b, gemm_in_base(kd.b),
                        gemm_in_stride(kd.b, r - 1)));
    if (g.is_short[d]) {
      if (g.prefetch) line(2, fmt::format("{} k_sd{}[{}];", g.acc, d, g.E));
      continue;
    }
    line(2, fmt::format("const idx_t kspan{0} = ((idx_t)p.d{0}_K + {1}) / {2} * {3};", d,
                        C * BK - 1, C * BK, BK));
    line(2,
         fmt::format("const idx_t kb{0} = (idx_t)k_rank * kspan{0}, ke{0} = min((idx_t)p.d{0}_K, "
                     "kb{0} + kspan{0});",
                     d));
    line(2, fmt::format("{} acc{}[{}][{}] = {{}};", g.acc, d, g.TM, g.TM));
  }
}

// The epilogue's loads into k_p, and the short dots into k_sd, issued right after the first
// chunk's (those are on the critical path, these are not), so that their round trip overlaps
// the multiply-adds.
void Emitter::gemm_prefetch_epilogue(const GemmShape& g) {
  for (int q = 0; q < g.E; ++q) {
    line(2, "{");
    gemm_element(g, 3, std::to_string(q));
    line(3, "if (valid) {");
    for (size_t j = 0; j < pl_.in.size(); ++j)
      if (g.loaded[j]) line(4, fmt::format("k_p{}[{}] = {};", j, q, element_load(j)));
    for (int d = 0; d < g.nd; ++d)
      if (g.is_short[d]) gemm_short_dot(g, 4, d, fmt::format("k_sd{}[{}]", d, q));
    line(3, "}");
    line(2, "}");
  }
}

// Loads of dot d's chunk at k0 (an expression) into the registers ra, rb, zero past the tile's
// edges and K. A whole tile and chunk loads without a test per element (the common case).
void Emitter::gemm_load_chunk(const GemmShape& g, int ind, int d, const std::string& k0) {
  const KernelDot& kd = k_.dots[d];
  const char* acc = g.acc;
  line(ind, "{");
  line(ind + 1, fmt::format("const idx_t kc = {};", k0));
  line(ind + 1, fmt::format("const idx_t am = {}, bn = {}, ak = (idx_t)p.d{}_ak, bk = "
                            "(idx_t)p.d{}_bk;",
                            gemm_in_stride(kd.a, g.r - 2), gemm_in_stride(kd.b, g.r - 1), d, d));
  gemm_along_k(ind + 1, d);
  const std::string a_el =
      cg::load_cvt(k_.inputs[kd.a].dtype, fmt::format("A{}[ma * am + (kc + ka) * ak]", d));
  const std::string b_el =
      cg::load_cvt(k_.inputs[kd.b].dtype, fmt::format("B{}[(kc + kq) * bk + nb * bn]", d));
  for (bool edge : {false, true}) {
    line(ind + 1,
         edge ? std::string("else {") : fmt::format("if (whole && kc + {} <= ke{}) {{", g.BK, d));
    if (edge)
      gemm_chunk_loop(g, ind + 2,
                      fmt::format("ra[q] = ma < mr && kc + ka < ke{0} ? ({1}){2} : ({1})0; rb[q] = "
                                  "nb < nr && kc + kq < ke{0} ? ({1}){3} : ({1})0;",
                                  d, acc, a_el, b_el));
    else
      gemm_chunk_loop(g, ind + 2,
                      fmt::format("ra[q] = ({0}){1}; rb[q] = ({0}){2};", acc, a_el, b_el));
    line(ind + 1, "}");
  }
  line(ind, "}");
}

// The loop over K chunks of every dot in turn, the chunks double-buffered in shared memory.
// `pre` carries the next dot's first chunk, loaded during the last chunk of this one.
void Emitter::gemm_k_loops(const GemmShape& g) {
  line(2, fmt::format("{0} ra[{1}], rb[{1}];", g.acc, g.LA));
  line(2, "int buf = 0;     // the shared buffer the next chunk goes to (alternates across dots)");
  line(2, "bool pre = false; // ra, rb hold the next dot's first chunk");
  if (g.prefetch && g.next_long(0) == g.nd) gemm_prefetch_epilogue(g); // no chunk to load first
  for (int d = g.next_long(0); d < g.nd; d = g.next_long(d + 1)) gemm_dot_k_loop(g, d);
}

// Dot d's K loop: its first chunk's loads (unless the previous dot prefetched them), then per
// chunk: stage it, start the next chunk's loads (or the next dot's first), and multiply. A whole
// chunk is unrolled; the last one of a dot, shorter, runs in a loop (zeros past K would add
// nothing but time).
void Emitter::gemm_dot_k_loop(const GemmShape& g, int d) {
  const int BK = g.BK, KG = g.KG;
  const int next = g.next_long(d + 1);
  line(2, fmt::format("if (!pre && kb{0} < ke{0})", d));
  gemm_load_chunk(g, 3, d, fmt::format("kb{}", d));
  if (d == g.next_long(0) && g.prefetch) gemm_prefetch_epilogue(g);
  line(2, "pre = false;");
  line(2, fmt::format("for (idx_t k0 = kb{0}; k0 < ke{0}; k0 += {1}) {{", d, BK));
  gemm_stage_chunk(g, d);
  line(3, "// The next chunk's loads fly while this one is multiplied.");
  line(3, fmt::format("if (k0 + {} < ke{})", BK, d));
  gemm_load_chunk(g, 4, d, fmt::format("k0 + {}", BK));
  if (next < g.nd) {
    line(3, fmt::format("else if (kb{0} < ke{0}) {{", next));
    gemm_load_chunk(g, 4, next, fmt::format("kb{}", next));
    line(4, "pre = true;");
    line(3, "}");
  }
  line(3, fmt::format("if (k0 + {} <= ke{}) {{", BK, d));
  gemm_multiply(g, 4, d, std::to_string(BK), true);
  line(3, "} else {");
  gemm_multiply(g, 4, d,
                g.G > 1 ? fmt::format("min(kg * {} + {}, (int)(ke{} - k0))", KG, KG, d)
                        : fmt::format("(int)(ke{} - k0)", d),
                false);
  line(3, "}");
  line(3, "buf ^= 1;");
  line(2, "}");
}

// Whether dot d's A and B load along k (a_along_k, b_along_k: CudaVariant::gemm_a_along_k,
// gemm_b_along_k).
void Emitter::gemm_along_k(int ind, int d) {
  line(ind, fmt::format("constexpr bool a_along_k = {}, b_along_k = {};",
                        has_bit(v_.gemm_a_along_k, d) ? "true" : "false",
                        has_bit(v_.gemm_b_along_k, d) ? "true" : "false"));
}

// Element e of a chunk (an expression of q) as (ka, ma) of A and (kq, nb) of B: along k in warps
// of 8 k x 4 rows for an operand with stride 1 along k (a_along_k, b_along_k), else along the rows.
void Emitter::gemm_chunk_coords(const GemmShape& g, int ind) {
  const std::string along_k = fmt::format("e % 8 + e / 32 % {} * 8", g.BK / 8);
  const std::string k_row = fmt::format("e / 8 % 4 + e / {} * 4", 4 * g.BK);
  line(ind, fmt::format("const int ka = a_along_k ? {0} : e / {2}, ma = a_along_k ? {1} : e % {2};",
                        along_k, k_row, g.T));
  line(ind, fmt::format("const int kq = b_along_k ? {0} : e / {2}, nb = b_along_k ? {1} : e % {2};",
                        along_k, k_row, g.T));
}

// `body` (one statement per element, of ka, ma, kq, nb) over this thread's elements of a chunk.
void Emitter::gemm_chunk_loop(const GemmShape& g, int ind, const std::string& body) {
  line(ind, "#pragma unroll");
  line(ind, fmt::format("for (int q = 0; q < {}; ++q) {{", g.LA));
  line(ind + 1, fmt::format("const int e = tid + q * {};", kBlock));
  gemm_chunk_coords(g, ind + 1);
  line(ind + 1, body);
  line(ind, "}");
}

// Stores dot d's chunk in ra, rb into shared buffer `buf`, both k-major with rows padded to P
// (gemm_chunk_loop's elements, as gemm_load_chunk loaded them); then the one barrier per chunk.
void Emitter::gemm_stage_chunk(const GemmShape& g, int d) {
  const int BK = g.BK, P = g.P;
  line(3,
       fmt::format("{0}* As = k_sm + buf * {1}; {0}* Bs = As + {2};", g.acc, 2 * BK * P, BK * P));
  gemm_along_k(3, d);
  gemm_chunk_loop(g, 3, fmt::format("As[ka * {0} + ma] = ra[q]; Bs[kq * {0} + nb] = rb[q];", P));
  line(3, "__syncthreads();");
}

// Vector loads of TM consecutive accumulators from shared memory at `at` into dst[0..TM).
std::string Emitter::gemm_vec_load(const GemmShape& g, const std::string& dst,
                                   const std::string& at) const {
  const int TM = g.TM;
  if (TM == 1) return fmt::format("{}[0] = {};", dst, at);
  const int w = g.f64 ? 2 : std::min(TM, 4);
  std::string s;
  for (int h = 0; h < TM; h += w) {
    const std::string vt = fmt::format("{}{}", g.acc, w);
    s += fmt::format("{{ const {0} u = *reinterpret_cast<const {0}*>(&{1} + {2});", vt, at, h);
    const char* lanes = "xyzw";
    for (int l = 0; l < w; ++l) s += fmt::format(" {}[{}] = u.{};", dst, h + l, lanes[l]);
    s += " }";
  }
  return s;
}

// The register-tile multiply-adds of dot d over the staged chunk's ks up to `end` (whole: the
// full chunk, unrolled): per k, TM values of A's column and of B's row as vectors, then TM x TM
// fmas. With K groups, group kg takes ks [kg * KG, kg * KG + KG) of each chunk.
void Emitter::gemm_multiply(const GemmShape& g, int ind, int d, const std::string& end,
                            bool whole) {
  const int TM = g.TM;
  const std::string first = g.G > 1 ? fmt::format("kg * {}", g.KG) : std::string("0");
  line(ind, whole ? "#pragma unroll" : "#pragma unroll 4");
  if (whole && g.G > 1)
    line(ind, fmt::format("for (int kk = {0}; kk < {0} + {1}; ++kk) {{", first, g.KG));
  else
    line(ind, fmt::format("for (int kk = {}; kk < {}; ++kk) {{", first, end));
  line(ind + 1, fmt::format("{} a[{}], b[{}];", g.acc, TM, TM));
  line(ind + 1, gemm_vec_load(g, "a", fmt::format("As[kk * {} + ty * {}]", g.P, TM)));
  line(ind + 1, gemm_vec_load(g, "b", fmt::format("Bs[kk * {} + tx * {}]", g.P, TM)));
  line(ind + 1, "#pragma unroll");
  line(ind + 1, fmt::format("for (int i = 0; i < {0}; ++i)", TM));
  line(ind + 2, "#pragma unroll");
  line(ind + 2, fmt::format("for (int j = 0; j < {0}; ++j) acc{1}[i][j] = {2}(a[i], b[j], "
                            "acc{1}[i][j]);",
                            TM, d, g.f64 ? "fma" : "fmaf"));
  line(ind, "}");
}

// Parks every dot's sums in shared memory at d * T * T, in tile order, after a barrier (every
// thread is past its last read of the chunk buffers). With K groups each dot's groups park their
// partial tiles after the dots' sums first, and gemm_combine_groups adds them up. Ends with the
// (cluster) barrier after which every block's sums can be read, where they were parked.
void Emitter::gemm_park_sums(const GemmShape& g) {
  const int T = g.T, nd = g.nd;
  if (g.next_long(0) == nd) return; // only short dots: nothing parked
  line(2, "__syncthreads();");
  for (int d = g.next_long(0); d < nd; d = g.next_long(d + 1)) {
    if (g.G == 1) {
      gemm_park(g, std::to_string(d * T * T), d, false);
      continue;
    }
    gemm_park(g, fmt::format("{} + kg * {}", nd * T * T, T * T), d, g.swizzle);
    line(2, "__syncthreads();");
    gemm_combine_groups(g, d);
    if (g.next_long(d + 1) < nd)
      line(2, "__syncthreads(); // the next dot's groups park in the same place");
  }
  if (g.sums_in_registers) return;
  line(2, g.C > 1 ? "k_cluster_sync(); // every block's sums are in its shared memory"
                  : "__syncthreads();");
}

// Stores this thread's TM x TM register tile of dot d at k_sm[off + its element]; with `swizzle`
// (GemmShape::swizzle) at element e ^ 16 in odd rows of register tiles, a row of 4 as one
// 16-byte store (the swizzle keeps rows 16-byte aligned).
void Emitter::gemm_park(const GemmShape& g, const std::string& off, int d, bool swizzle) {
  if (swizzle) { // f32, TM = 4
    line(2, "#pragma unroll");
    line(2, fmt::format("for (int i = 0; i < {}; ++i) {{", g.TM));
    line(3, fmt::format("const int e = (ty * {0} + i) * {1} + tx * {0};", g.TM, g.T));
    line(3, fmt::format("*reinterpret_cast<float4*>(&k_sm[{0} + (e ^ (ty & 1) << 4)]) = "
                        "make_float4(acc{1}[i][0], acc{1}[i][1], acc{1}[i][2], acc{1}[i][3]);",
                        off, d));
    line(2, "}");
    return;
  }
  line(2, "#pragma unroll");
  line(2, fmt::format("for (int i = 0; i < {0}; ++i)", g.TM));
  line(3, "#pragma unroll");
  line(3, fmt::format("for (int j = 0; j < {0}; ++j) {{", g.TM));
  line(4, fmt::format("const int e = (ty * {0} + i) * {1} + tx * {0} + j;", g.TM, g.T));
  line(4, fmt::format("k_sm[{} + e] = acc{}[i][j];", off, d));
  line(3, "}");
}

// Dot d's sums from the K groups' parked partial tiles: each element adds them in group order
// (the same rounding whichever thread adds), into k_c<d> when the sums stay in registers, else
// parked at d * T * T.
void Emitter::gemm_combine_groups(const GemmShape& g, int d) {
  const int T = g.T, nd = g.nd, per_thread = T * T / kBlock;
  // Element e's place in a parked partial tile (gemm_park): its row of register tiles is
  // e / (TM * T), bit 6 of e in a tile of 16.
  const std::string at = g.swizzle ? "(e ^ (e >> 6 & 1) << 4)" : "e";
  if (g.sums_in_registers) line(2, fmt::format("{} k_c{}[{}];", g.acc, d, per_thread));
  line(2, "#pragma unroll");
  line(2, fmt::format("for (int q = 0; q < {}; ++q) {{", per_thread));
  line(3, fmt::format("const int e = tid + q * {};", kBlock));
  line(3, fmt::format("{} s = k_sm[{} + {}];", g.acc, nd * T * T, at));
  line(3, "#pragma unroll");
  line(3, fmt::format("for (int g = 1; g < {}; ++g) s += k_sm[{} + g * {} + {}];", g.G, nd * T * T,
                      T * T, at));
  if (g.sums_in_registers)
    line(3, fmt::format("k_c{}[q] = s;", d));
  else
    line(3, fmt::format("k_sm[{} + e] = s;", d * T * T));
  line(2, "}");
}

// The epilogue over this thread's elements of the block's share of the tile: unrolled over the
// prefetched inputs, else a loop; then the barrier before k_sm is reused.
void Emitter::gemm_epilogue(const GemmShape& g) {
  if (g.prefetch) {
    for (int q = 0; q < g.E; ++q) {
      line(2, "{");
      gemm_element(g, 3, std::to_string(q));
      line(3, "if (valid) {");
      gemm_finish(g, 4, std::to_string(q), [&](int j) {
        return g.loaded[j] ? fmt::format("k_p{}[{}]", j, q) : element_load(j);
      });
      line(3, "}");
      line(2, "}");
    }
  } else {
    line(2, fmt::format("for (int q = 0; q < {}; ++q) {{", g.E));
    gemm_element(g, 3, "q");
    line(3, "if (!valid) continue;");
    gemm_finish(g, 3, "", [&](int j) { return element_load(j); });
    line(2, "}");
  }
  line(2, g.C > 1 ? "k_cluster_sync_relaxed(); // the others have read this block's sums: free to "
                    "reuse"
                  : "__syncthreads(); // k_sm is written again for the next tile");
}

// One element of the epilogue: every dot's sum as k_dot<d>, then the tape and the stores. `q`:
// the element's number when the short dots were summed before the K loop (into k_sd), else "".
void Emitter::gemm_finish(const GemmShape& g, int ind, const std::string& q, const Load& load) {
  for (int d = 0; d < g.nd; ++d) {
    if (!g.is_short[d]) {
      gemm_cluster_sum(g, ind, d, q);
    } else if (!q.empty()) {
      line(ind, fmt::format("const {0} k_dot{1} = k_sd{1}[{2}];", g.acc, d, q));
    } else {
      line(ind, fmt::format("{} k_dot{};", g.acc, d));
      gemm_short_dot(g, ind, d, fmt::format("k_dot{}", d));
    }
  }
  tape(ind, load);
  store_outputs(ind);
}

// Dot d's sum of element e (the epilogue's q-th) as k_dot<d>. With a cluster: every block's parked
// sum first (C loads in flight, distributed shared memory for the others'), then added in rank
// order, so that the rounding is the same whichever block adds.
void Emitter::gemm_cluster_sum(const GemmShape& g, int ind, int d, const std::string& q) {
  const int C = g.C, TT = g.T * g.T;
  if (g.sums_in_registers) { // q is the element's number (GemmShape::sums_in_registers)
    line(ind, fmt::format("const {0} k_dot{1} = k_c{1}[{2}];", g.acc, d, q));
    return;
  }
  if (C == 1) {
    line(ind, fmt::format("const {} k_dot{} = k_sm[{} + e];", g.acc, d, d * TT));
    return;
  }
  line(ind, fmt::format("{} k_s{}[{}];", g.acc, d, C));
  line(ind, "#pragma unroll");
  line(ind, fmt::format("for (unsigned q = 0; q < {0}; ++q) k_s{1}[q] = q == k_rank ? k_sm[{2} "
                        "+ e] : k_cluster_ld(&k_sm[{2} + e], q);",
                        C, d, d * TT));
  line(ind, fmt::format("{0} k_dot{1} = k_s{1}[0];", g.acc, d));
  line(ind, "#pragma unroll");
  line(ind, fmt::format("for (unsigned q = 1; q < {}; ++q) k_dot{} += k_s{}[q];", C, d, d));
}

// Short dot d of element (mm, nn) of the tile into `dst`: fmas from zero along k, in order. The
// tile gives the same bits: its K (at most a K group's share of a chunk) falls to group 0 of
// cluster rank 0, which adds it up in this order from +0; then, with more than one group or
// block, the others' +0 partial sums are added, which changes nothing but a -0 (a product that
// underflows), into +0: so is the `+ 0` here.
void Emitter::gemm_short_dot(const GemmShape& g, int ind, int d, const std::string& dst) {
  const KernelDot& kd = k_.dots[d];
  const std::string a =
      cg::load_cvt(k_.inputs[kd.a].dtype, fmt::format("A{}[mm * {} + kk * (idx_t)p.d{}_ak]", d,
                                                      gemm_in_stride(kd.a, g.r - 2), d));
  const std::string b =
      cg::load_cvt(k_.inputs[kd.b].dtype, fmt::format("B{}[kk * (idx_t)p.d{}_bk + nn * {}]", d, d,
                                                      gemm_in_stride(kd.b, g.r - 1)));
  line(ind, fmt::format("{} = 0;", dst));
  line(ind, "#pragma unroll");
  line(ind, fmt::format("for (int kk = 0; kk < {}; ++kk)", kGemmShortK));
  line(ind + 1, fmt::format("if (kk < (int)p.d{}_K) {} = {}(({}){}, ({}){}, {});", d, dst,
                            g.f64 ? "fma" : "fmaf", g.acc, a, g.acc, b, dst));
  if (g.G > 1 || g.C > 1) line(ind, fmt::format("{0} = {0} + ({1})0;", dst, g.acc));
}

} // namespace kiln::detail::cg

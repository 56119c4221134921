// Source emission of elementwise kernels whose dot products form a matrix of outputs (a GEMM
// with its epilogue; Emitter, see cuda_emit.cpp): the GEMM-tile layout, CudaVariant::gemm_tile.
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::detail::cg {

// GEMM-tile layout. The kernel's iteration space is [batch..., M, N] and every dot reads row m
// of its A and column n of its B at element (..., m, n) (choose_variant checks the index maps).
// A block of 16 x 16 threads owns a T x T tile of the outputs; thread (ty, tx) accumulates the
// TM x TM elements at rows ty * TM.., columns tx * TM.. (TM = T / 16) of every dot in
// registers. K goes in chunks of BK: each chunk of A (T x BK, stored k-major with rows padded by
// TM so that the transposed stores conflict less) and of B (BK x T) is loaded into registers
// while the previous chunk is multiplied out of shared memory, one barrier per chunk (two
// buffers). Loads run along k for A and along n for B: coalesced for row-major operands, strided
// but correct for transposed ones. With dot_cluster = C > 1 (sm_90) the C blocks of a cluster
// take the same tile and split K in BK-aligned ranges.
//
// The epilogue goes through shared memory: each thread parks its sums there; after a (cluster)
// barrier the tile's T * T elements are split between the cluster's blocks, consecutive
// elements on consecutive threads, and each element adds every block's sum in rank order (the
// same rounding whichever block adds), then runs the tape and stores, coalesced along n.
//
// Why not cuBLAS with a separate epilogue kernel: for the small GEMMs of a recurrent step (the
// seed loop's 256 x 256 x 256, an LSTM step at batch 32) cuBLAS's kernel plus the epilogue
// kernel are two graph nodes and a round trip of the result through memory, and either kernel
// fills a fraction of the GPU; here the step is one kernel (bench/results: gemm-tile). Sums use
// fma in float (double for f64) as in the dot layout: cuBLAS's accumulation, not TF32.
void Emitter::gemm_body() {
  const int T = v_.gemm_tile, TM = T / 16, BK = gemm_bk(k_, v_), PA = T + TM;
  const int C = std::max(1, v_.dot_cluster), r = pl_.rank;
  const int LA = T * BK / kBlock; // chunk elements per thread, of A and of B each
  const char* acc = gemm_f64(k_) ? "double" : "float";
  const int nd = static_cast<int>(k_.dots.size());
  line(1, fmt::format("__shared__ __align__(16) {} k_sm[{}];", acc, gemm_smem_elems(k_, v_)));
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, fmt::format("const idx_t M = (idx_t)p.sh{}, N = (idx_t)p.sh{};", r - 2, r - 1));
  line(1, fmt::format("const idx_t tm_n = (M + {0}) / {1}, tn_n = (N + {0}) / {1};", T - 1, T));
  line(1, "const idx_t tiles = n == 0 ? 0 : n / (M * N) * tm_n * tn_n;");
  line(1, "const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;");
  line(1, C > 1 ? "const unsigned k_rank = k_cluster_rank();" : "const unsigned k_rank = 0;");
  scalars(1);
  const std::string cluster_idx = C > 1 ? fmt::format("(blockIdx.x / {})", C) : "blockIdx.x";
  const std::string clusters = C > 1 ? fmt::format("(gridDim.x / {})", C) : "gridDim.x";
  line(1, fmt::format("for (idx_t t = {}; t < tiles; t += {}) {{", cluster_idx, clusters));
  line(2, "idx_t rest = t;");
  line(2, "const idx_t tn = rest % tn_n; rest /= tn_n;");
  line(2, "const idx_t tm = rest % tm_n; rest /= tm_n;");
  line(2, fmt::format("const idx_t m0 = tm * {0}, n0 = tn * {0};", T));
  line(2, fmt::format("const int mr = (int)min((idx_t){0}, M - m0), nr = (int)min((idx_t){0}, N - "
                      "n0);",
                      T));
  line(2, "const idx_t base = rest * M * N; // flat index of this matrix's element (0, 0)");
  // Each strided operand's offset at this matrix's (0, 0): the batch dims of `rest` unravelled.
  declare_offsets(2, "bi", nullptr, "bo");
  unravel(2, "rest", 0, r - 2, "bi", "bo");
  auto in_stride = [&](int j, int dim) -> std::string {
    const std::vector<int>& dims = pl_.in[j].dims;
    if (pl_.in[j].mode != M::strided || std::find(dims.begin(), dims.end(), dim) == dims.end())
      return "0";
    return cast_idx(fmt::format("in{}_s{}", j, dim));
  };
  auto in_base = [&](int j) {
    return pl_.in[j].mode == M::strided ? fmt::format("bi{}", j) : std::string("0");
  };
  line(2, "int buf = 0; // the shared buffer the next chunk goes to (alternates across dots)");
  for (int d = 0; d < nd; ++d) {
    const KernelDot& kd = k_.dots[d];
    const char* ta = cg::st_name(k_.inputs[kd.a].dtype);
    const char* tb = cg::st_name(k_.inputs[kd.b].dtype);
    line(2, fmt::format("{} acc{}[{}][{}];", acc, d, TM, TM));
    line(2, "{");
    line(3, "#pragma unroll");
    line(3, fmt::format("for (int i = 0; i < {0}; ++i) for (int j = 0; j < {0}; ++j) acc{1}[i][j] "
                        "= 0;",
                        TM, d));
    line(3, fmt::format("const {0}* A = p.in{1} + {2} + m0 * {3};", ta, kd.a, in_base(kd.a),
                        in_stride(kd.a, r - 2)));
    line(3, fmt::format("const {0}* B = p.in{1} + {2} + n0 * {3};", tb, kd.b, in_base(kd.b),
                        in_stride(kd.b, r - 1)));
    line(3, fmt::format("const idx_t am = {}, bn = {};", in_stride(kd.a, r - 2),
                        in_stride(kd.b, r - 1)));
    line(3, fmt::format("const idx_t ak = (idx_t)p.d{0}_ak, bk = (idx_t)p.d{0}_bk, K = "
                        "(idx_t)p.d{0}_K;",
                        d));
    // This block's K range: C ranges of whole chunks.
    line(3, fmt::format("const idx_t kspan = (K + {0} - 1) / {0} * {1};", C * BK, BK));
    line(3, "const idx_t kb = (idx_t)k_rank * kspan, ke = min(K, kb + kspan);");
    line(3, fmt::format("{0} ra[{1}], rb[{1}];", acc, LA));
    // Loads of the chunk at k0 into ra, rb (zero past the tile's edges and K).
    auto load_chunk = [&](int ind) {
      line(ind, "#pragma unroll");
      line(ind, fmt::format("for (int q = 0; q < {}; ++q) {{", LA));
      line(ind + 1, fmt::format("const int e = tid + q * {};", kBlock));
      line(ind + 1, fmt::format("const int ka = e % {0}, ma = e / {0};", BK));
      line(ind + 1, fmt::format("const int nb = e % {0}, kq = e / {0};", T));
      line(ind + 1,
           fmt::format("ra[q] = ma < mr && k0 + ka < ke ? ({}){} : ({})0;", acc,
                       cg::load_cvt(k_.inputs[kd.a].dtype, "A[ma * am + (k0 + ka) * ak]"), acc));
      line(ind + 1,
           fmt::format("rb[q] = nb < nr && k0 + kq < ke ? ({}){} : ({})0;", acc,
                       cg::load_cvt(k_.inputs[kd.b].dtype, "B[(k0 + kq) * bk + nb * bn]"), acc));
      line(ind, "}");
    };
    line(3, "if (kb < ke) {");
    line(4, "const idx_t k0 = kb;");
    load_chunk(4);
    line(3, "}");
    line(3, fmt::format("for (idx_t k0 = kb; k0 < ke; k0 += {}) {{", BK));
    line(4, fmt::format("{0}* As = k_sm + buf * {1}; {0}* Bs = As + {2};", acc, BK * (PA + T),
                        BK * PA));
    line(4, "#pragma unroll");
    line(4, fmt::format("for (int q = 0; q < {}; ++q) {{", LA));
    line(5, fmt::format("const int e = tid + q * {};", kBlock));
    line(5, fmt::format("As[(e % {0}) * {1} + e / {0}] = ra[q];", BK, PA));
    line(5, fmt::format("Bs[(e / {0}) * {0} + e % {0}] = rb[q];", T));
    line(4, "}");
    line(4, "__syncthreads();");
    line(4, fmt::format("if (k0 + {} < ke) {{ // the next chunk's loads fly while this one is "
                        "multiplied",
                        BK));
    line(5, fmt::format("const idx_t k0n = k0 + {};", BK));
    line(5, "{");
    line(6, "const idx_t k0 = k0n;");
    load_chunk(6);
    line(5, "}");
    line(4, "}");
    line(4, "#pragma unroll");
    line(4, fmt::format("for (int kk = 0; kk < {}; ++kk) {{", BK));
    line(5, fmt::format("{} a[{}], b[{}];", acc, TM, TM));
    line(5, "#pragma unroll");
    line(5, fmt::format("for (int i = 0; i < {0}; ++i) {{ a[i] = As[kk * {1} + ty * {0} + i]; b[i] "
                        "= Bs[kk * {2} + tx * {0} + i]; }}",
                        TM, PA, T));
    line(5, "#pragma unroll");
    line(5, fmt::format("for (int i = 0; i < {0}; ++i) for (int j = 0; j < {0}; ++j) acc{1}[i][j] "
                        "= {2}(a[i], b[j], acc{1}[i][j]);",
                        TM, d, gemm_f64(k_) ? "fma" : "fmaf"));
    line(4, "}");
    line(4, "buf ^= 1;");
    line(3, "}");
    line(2, "}");
  }
  // Epilogue: park the sums (every thread is past its last read of the chunk buffers first).
  line(2, "__syncthreads();");
  line(2, "#pragma unroll");
  line(2, fmt::format("for (int i = 0; i < {0}; ++i) for (int j = 0; j < {0}; ++j) {{", TM));
  line(3, fmt::format("const int e = (ty * {0} + i) * {1} + tx * {0} + j;", TM, T));
  for (int d = 0; d < nd; ++d) line(3, fmt::format("k_sm[{} + e] = acc{}[i][j];", d * T * T, d));
  line(2, "}");
  line(2, C > 1 ? "k_cluster_sync(); // every block's sums are in its shared memory"
                : "__syncthreads();");
  const int share = T * T / C;
  line(2,
       fmt::format("for (int e = (int)k_rank * {0} + tid; e < ((int)k_rank + 1) * {0}; e += {1}) "
                   "{{",
                   share, kBlock));
  line(3, fmt::format("const int mm = e / {0}, nn = e % {0};", T));
  line(3, "if (mm >= mr || nn >= nr) continue;");
  line(3, "const idx_t m = m0 + mm, nc = n0 + nn;");
  line(3, "const idx_t i = base + m * N + nc;");
  for (size_t j = 0; j < pl_.in.size(); ++j)
    if (pl_.in[j].mode == M::strided)
      line(3, fmt::format("const idx_t oi{0} = bi{0} + m * {1} + nc * {2};", j,
                          in_stride(static_cast<int>(j), r - 2),
                          in_stride(static_cast<int>(j), r - 1)));
  for (size_t j = 0; j < pl_.out.size(); ++j)
    if (pl_.out[j].mode == M::strided)
      line(3, fmt::format("const idx_t oo{0} = bo{0} + m * {1} + nc * {2};", j,
                          cast_idx(fmt::format("out{}_s{}", j, r - 2)),
                          cast_idx(fmt::format("out{}_s{}", j, r - 1))));
  for (int d = 0; d < nd; ++d) {
    if (C > 1) {
      line(3, fmt::format("{} k_dot{} = 0;", acc, d));
      line(3, fmt::format("for (unsigned q = 0; q < {}; ++q) k_dot{} += k_cluster_ld(&k_sm[{} + "
                          "e], q);",
                          C, d, d * T * T));
    } else {
      line(3, fmt::format("const {} k_dot{} = k_sm[{} + e];", acc, d, d * T * T));
    }
  }
  tape(3, [&](int j) { return element_load(j); });
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(3, fmt::format("p.out{}[{}] = {};", j,
                        pl_.out[j].mode == M::strided ? fmt::format("oo{}", j) : "i", stored(j)));
  line(2, "}");
  line(2, C > 1 ? "k_cluster_sync(); // the others have read this block's sums: free to reuse"
                : "__syncthreads(); // k_sm is written again for the next tile");
  line(1, "}");
}

} // namespace kiln::detail::cg

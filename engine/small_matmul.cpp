// The planner's rule for which matmuls are computed inside a kernel (see below).
#include "engine/planner_impl.h"

#include "engine/graph.h"

namespace kiln::detail {

// Small matmuls: a floating matmul with at most kDotRows output rows (batch x M: a matrix
// times a vector, an RNN cell at batch 1), K <= kDotMaxK and at most kDotMaxMacs
// multiply-adds is not a BLAS call but a value of the kernel that reads it, each element one
// dot product (FusedKernel::dots). Such a GEMM is too small to fill the GPU either way, and as
// a separate cuBLAS call it costs a launch (a graph node), a written result, and a staged
// operand whenever its input moves; fused, `x @ wx + h @ wh + b` and the gates that follow are
// one kernel. Past these bounds cuBLAS's GEMV is faster than the generated dot layout, which
// reads B once per row and leaves each element's K to one block, or one cluster of at most 8
// on sm_90 (bench/cuda/matmul_gpu on the H100, before clusters: 1 x 256 x 1024 f32 3.6 us
// fused vs 4.1 through cuBLAS; 1 x 1024 x 4096 8.7 vs 6.0; 1 x 4096 x 256 bf16 10.0 vs 6.5;
// 4 x 4096 x 4096 bf16 55 vs 9.8; bench/results/2026-11-22-h100-small-matmul.md).
//
// A few columns (at most kDotRows: a read-out head's Linear(hidden, 1) at batch 32) with more
// rows are dots as well, up to kDotMaxMacs: each element's K is a row of A, read by threads
// side by side; alone, such a dot kernel beat cuBLAS's GEMV at every size measured up to 2^20.
// Read through a view (a slice, a reshape), such a matmul gets a kernel of its own, as a tiled
// one does: the dot layout splits each element's K by the reading kernel's size, so a reader of
// another size would sum it in another order than eager mode's kernel of its own. As a
// cuBLAS GEMV the head of an LSTM trained at batch 32 was a graph node and a staging copy per time
// step (bench/results/2026-11-26-h100-session21.md).
//
// More rows (tiled matmuls): with more than kDotRows columns too, K <= kDotMaxK and at most
// kTileMaxMacs multiply-adds, an f32 or f64 matmul read at its own (row, column) by an
// elementwise kernel is computed there, tile by tile (the GEMM-tile layout,
// codegen/layouts/gemm_tile.cpp): the seed loop's 256 x 256 x 256 step is one kernel. Read any
// other way (through a view such as the LSTM's chunk of its gates, by a reduction, transposed) the
// value the view reads gets a GEMM-tile kernel of its own (never a cuBLAS call, whose rounding
// differs: the choice must not depend on the reader, or lazy and eager would differ). Measured
// on the H100, an LSTM step at batch 32 as one kernel of eight tiled dots was slower than
// cuBLAS's two GEMMs and a kernel (21.6 vs 19.7 us per step), f16/bf16 GEMMs run on cuBLAS's tensor
// cores at about half the generated tiles' time (bf16 256 x 256 x 256: 4.1 vs 7.9 us), and larger
// GEMMs fill the GPU, where cuBLAS's kernels are faster than the generated tiles
// (bench/results/2026-11-22-h100-gemm-tile.md).
constexpr int64_t kDotRows = 4;
constexpr int64_t kDotMaxK = 1024;
constexpr int64_t kDotMaxMacs = int64_t(1) << 20;
constexpr int64_t kTileMaxMacs = int64_t(1) << 24;

// While cuBLAS sets itself up: a matmul for cuBLAS of at most kSetUpMaxMacs multiply-adds, of a
// type whose cuBLAS set-up has not finished in this process, is computed as without cuBLAS (GEMM
// tiles or dots, as KILN_CUBLAS=0 would), and its set-up runs on a thread meanwhile
// (runtime/cuda/cublas_set_up.h): the RNN sample's first training step took 36-47 ms so, against
// 117-156 ms waiting for cuBLAS, whose set-up is 80-135 ms of host time for f32
// (bench/results/2026-11-28-h200-session45.md). Up to 2^28 multiply-adds kiln's tiles took at
// most 3x cuBLAS's time (microseconds); larger GEMMs wait, as they would take longer in tiles
// that the stand-in interpreter runs until compiled than cuBLAS takes to set up.
constexpr int64_t kSetUpMaxMacs = int64_t(1) << 28;

namespace {

bool while_cublas_sets_up(const Node* n, int64_t K) {
  if (!n->device.is_cuda()) return false;
  if (n->shape().numel() * K > kSetUpMaxMacs) return false;
  const int kind = cublas_kind(n->dtype);
  if (kind < 0 || (engine().cublas_ready >> kind & 1)) return false;
  return compute_while_cublas_sets_up(n->device, kind);
}

// The rule below without the set-up: whether a kernel computes `n` even where cuBLAS is ready.
bool small_by_size(const Node* n, int64_t K) {
  const Shape& s = n->shape();
  if (K > kDotMaxK) return false;
  if (!tiled_matmul(n)) return s.numel() * K <= kDotMaxMacs;
  // Many matrices of at most kDotRows rows each: cuBLAS's batched GEMM (the GEMM-tile layout
  // wants more rows per matrix, choose_gemm_tile). f16/bf16: cuBLAS's tensor-core kernels,
  // even with the epilogue as a kernel of its own.
  if (s[s.size() - 2] <= kDotRows) return false;
  return s.numel() * K <= kTileMaxMacs && (n->dtype == DType::f32 || n->dtype == DType::f64);
}

} // namespace

bool small_matmul(const Node* n) {
  if (n->op != OpCode::matmul || !is_floating(n->dtype)) return false;
  // Reproducible mode: every floating matmul, of any size and on every device, so that no BLAS
  // library's summation order reaches a result.
  // Without cuBLAS (KILN_CUBLAS=0) likewise on CUDA, in the fast layouts.
  if (engine().reproducible || (!cublas_enabled() && n->device.is_cuda()))
    return n->shape().size() > 0 && n->shape().back() > 0;
  const int mode = engine().small_matmul;
  if (mode == 0 || (mode == 1 && !n->device.is_cuda())) return false;
  const Shape& s = n->shape();
  const int64_t N = s[s.size() - 1], K = n->inputs[0]->shape()[s.size() - 1];
  if (N <= 0) return false;
  return small_by_size(n, K) || while_cublas_sets_up(n, K);
}

bool few_column_matmul(const Node* n) {
  const Shape& s = n->shape();
  const int64_t N = s.size() > 0 ? s[s.size() - 1] : 1;
  return N > 0 && N <= kDotRows && s.numel() / N > kDotRows;
}

bool tiled_matmul(const Node* n) {
  const Shape& s = n->shape();
  const int64_t N = s.size() > 0 ? s[s.size() - 1] : 1;
  return N > kDotRows && s.numel() / N > kDotRows;
}

} // namespace kiln::detail

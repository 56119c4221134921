// CPU GEMM: OpenBLAS for f32/f64 (f16/bf16 widened to f32 and rounded back). Integer matmul
// never gets here: the planner turns it into a reduction kernel. Operands with a unit stride in
// either matrix dim go to BLAS as they are (a transposed view is a CblasTrans flag, not a copy);
// other layouts are packed first.
#include "runtime/cpu/gemm.h"

#include "ir/host_convert.h"
#include "runtime/cpu/thread_pool.h"

#include <cblas.h>

#include <vector>

namespace kiln::detail::cpu {

namespace {

struct Mat {
  const char* data;           // first element of this batch's matrix
  int64_t rows, cols, rs, cs; // strides in elements
};

// A matrix as a BLAS operand: row-major with leading dim ld, possibly transposed.
template <class T> struct BlasOperand {
  const T* p;
  CBLAS_TRANSPOSE trans;
  int64_t ld;
  std::vector<T> packed;
};

template <class T> BlasOperand<T> prepare(const Mat& m) {
  BlasOperand<T> op;
  const T* p = reinterpret_cast<const T*>(m.data);
  int64_t rs = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.rs;
  int64_t cs = m.cols == 1 ? 1 : m.cs;
  if (cs == 1 && rs >= std::max<int64_t>(m.cols, 1)) return {p, CblasNoTrans, rs, {}};
  int64_t cs2 = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.cs;
  int64_t rs2 = m.rows == 1 ? 1 : m.rs;
  if (rs2 == 1 && cs2 >= std::max<int64_t>(m.rows, 1)) return {p, CblasTrans, cs2, {}};
  op.packed.resize(static_cast<size_t>(m.rows * m.cols));
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) op.packed[i * m.cols + j] = p[i * m.rs + j * m.cs];
  op.p = op.packed.data();
  op.trans = CblasNoTrans;
  op.ld = std::max<int64_t>(m.cols, 1);
  return op;
}

template <class T>
void blas_call(const BlasOperand<T>& A, const T* a, const BlasOperand<T>& B, const T* b, T* c,
               int64_t ldc, int64_t M, int64_t N, int64_t K) {
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, A.trans, B.trans, M, N, K, 1.0f, a, A.ld, b, B.ld, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, A.trans, B.trans, M, N, K, 1.0, a, A.ld, b, B.ld, 0.0, c, ldc);
}

// Products below this many multiply-adds run on the calling thread, and no block is smaller.
constexpr int64_t kSplitWork = int64_t(1) << 18;

int64_t block_extent(int64_t n, int64_t work_per_unit) {
  const int64_t per_thread = (n + num_threads() - 1) / num_threads();
  return std::max(per_thread,
                  (kSplitWork + work_per_unit - 1) / std::max<int64_t>(work_per_unit, 1));
}

// OpenBLAS runs single-threaded (its idle workers spin in sched_yield after each call, taking
// the cores kiln's pool needs for the elementwise kernels between GEMMs). A large product is
// split on kiln's pool into one block per thread, each one BLAS call with the whole K (so every
// element is summed in the order of one call): blocks of columns when there are fewer rows than
// columns (each call packs all of A, the smaller operand), else blocks of rows.
template <class T>
void blas_gemm(const Mat& a, const Mat& b, T* c, int64_t M, int64_t N, int64_t K) {
  auto A = prepare<T>(a);
  auto B = prepare<T>(b);
  const int64_t ldc = std::max<int64_t>(N, 1);
  if (M * N * K < 2 * kSplitWork || num_threads() <= 1)
    return blas_call(A, A.p, B, B.p, c, ldc, M, N, K);
  if (M < N) {
    parallel_for(N, block_extent(N, M * K), [&](int64_t n0, int64_t n1) {
      const T* b0 = B.trans == CblasNoTrans ? B.p + n0 : B.p + n0 * B.ld;
      blas_call(A, A.p, B, b0, c + n0, ldc, M, n1 - n0, K);
    });
    return;
  }
  parallel_for(M, block_extent(M, N * K), [&](int64_t m0, int64_t m1) {
    const T* a0 = A.trans == CblasNoTrans ? A.p + m0 * A.ld : A.p + m0;
    blas_call(A, a0, B, B.p, c + m0 * ldc, ldc, m1 - m0, N, K);
  });
}

} // namespace

int blas_threads() {
  return openblas_get_num_threads();
}

void run_gemm(const GemmStep& g, const char* a_base, const char* b_base, char* out) {
  static const bool threads_set = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)threads_set;
  const int rank = g.out_shape.size();
  const int64_t M = g.out_shape[rank - 2], N = g.out_shape[rank - 1], K = g.a.shape[rank - 1];
  const int64_t isz = itemsize(g.dtype);
  Shape batch(g.out_shape.begin(), g.out_shape.end() - 2);
  const int64_t batches = batch.numel();
  std::vector<float> wa, wb, wc;
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t ra = bi, offa = g.a.offset, offb = g.b.offset;
    for (int d = batch.size() - 1; d >= 0; --d) {
      int64_t idx = ra % batch[d];
      ra /= batch[d];
      offa += idx * g.a.strides[d];
      offb += idx * g.b.strides[d];
    }
    Mat a{a_base + offa * isz, M, K, g.a.strides[rank - 2], g.a.strides[rank - 1]};
    Mat b{b_base + offb * isz, K, N, g.b.strides[rank - 2], g.b.strides[rank - 1]};
    char* c = out + bi * M * N * isz;
    if (M == 0 || N == 0) continue;
    if (K == 0) {
      std::vector<double> z(static_cast<size_t>(M * N), 0.0);
      convert_elements(z.data(), DType::f64, c, g.dtype, z.size());
      continue;
    }
    switch (g.dtype) {
    case DType::f32:
      blas_gemm<float>(a, b, reinterpret_cast<float*>(c), M, N, K);
      break;
    case DType::f64:
      blas_gemm<double>(a, b, reinterpret_cast<double*>(c), M, N, K);
      break;
    default: { // f16 / bf16
      wa.resize(M * K);
      wb.resize(K * N);
      wc.resize(M * N);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k)
          wa[i * K + k] = static_cast<float>(load_as_double(a.data, g.dtype, i * a.rs + k * a.cs));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j)
          wb[k * N + j] = static_cast<float>(load_as_double(b.data, g.dtype, k * b.rs + j * b.cs));
      Mat fa{reinterpret_cast<const char*>(wa.data()), M, K, K, 1};
      Mat fb{reinterpret_cast<const char*>(wb.data()), K, N, N, 1};
      blas_gemm<float>(fa, fb, wc.data(), M, N, K);
      convert_elements(wc.data(), DType::f32, c, g.dtype, wc.size());
    }
    }
  }
}

} // namespace kiln::detail::cpu

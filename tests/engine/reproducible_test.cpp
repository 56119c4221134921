// Reproducible mode (kiln::set_reproducible): sums and dot products whose rounded results do
// not depend on the order of their terms, and every matmul inside kiln's kernels. Runs on the
// test device; tests/cuda/reproducible_gpu_test.cpp checks the GPU's bits against the CPU's.
#include "../test_device.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using namespace kiln;

namespace {

struct Reproducible : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_reproducible(true);
  }
  void TearDown() override { set_reproducible(false); }
};

// Terms whose double sum depends on the order: pairs of +-2^40 that cancel, and many terms of
// 2^-20 or so that a double next to 2^40 loses (their exponents span 60 bits; double-double
// holds 106).
std::vector<float> cancelling_terms(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> small(0.5f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    v[i] = i % 64 == 0 ? 0x1p40f : i % 64 == 1 ? -0x1p40f : std::ldexp(small(rng), -20 + i % 7);
  return v;
}

std::vector<int64_t> permutation(int n, uint32_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), std::mt19937(seed));
  return p;
}

template <class T> std::vector<T> permuted(const std::vector<T>& v, const std::vector<int64_t>& p) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = v[p[i]];
  return out;
}

template <class T> bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Sums of 16 orders of the same terms, as one [16, n] row reduction; and the same rows
// transposed, summed down the columns (another layout, another order on the GPU).
std::vector<float> sums_of_orders(const std::vector<float>& terms, int orders) {
  const int n = static_cast<int>(terms.size());
  std::vector<float> rows;
  for (int o = 0; o < orders; ++o) {
    std::vector<float> p = o == 0 ? terms : permuted(terms, permutation(n, 100 + o));
    rows.insert(rows.end(), p.begin(), p.end());
  }
  Tensor x = from_vector(rows, {orders, n});
  Tensor by_rows = sum(x, {1});
  Tensor by_columns = sum(contiguous(transpose(x, 0, 1)), {0});
  std::vector<float> out = by_rows.to_vector<float>(), cols = by_columns.to_vector<float>();
  out.insert(out.end(), cols.begin(), cols.end());
  return out;
}

bool all_equal(const std::vector<float>& v) {
  for (float x : v)
    if (std::memcmp(&x, &v[0], sizeof x) != 0) return false;
  return true;
}

TEST_F(Reproducible, SumsDoNotDependOnTheOrderOfTheirTerms) {
  const std::vector<float> terms = cancelling_terms(4096, 1);
  const std::vector<float> sums = sums_of_orders(terms, 16);
  EXPECT_TRUE(all_equal(sums)) << "first " << sums[0] << ", last " << sums.back();
  // The exact total: 64 cancelling pairs and the small terms, which a double holds exactly.
  double exact = 0;
  for (float t : terms)
    if (std::fabs(t) < 1) exact += t;
  EXPECT_EQ(sums[0], static_cast<float>(exact));
  // The check can fail: accumulated in plain double, the orders disagree.
  set_reproducible(false);
  EXPECT_FALSE(all_equal(sums_of_orders(terms, 16)));
}

TEST_F(Reproducible, MeansOfF64AndHalfTermsDoNotDependOnTheOrder) {
  const std::vector<float> terms = cancelling_terms(2048, 2);
  for (DType t : {DType::f64, DType::f16}) {
    std::vector<float> src = t == DType::f16 ? std::vector<float>(2048) : terms;
    if (t == DType::f16) // f16 spans 2^-24..2^15: cancelling 2^15 terms and small ones
      for (size_t i = 0; i < src.size(); ++i)
        src[i] = i % 64 == 0 ? 32768.0f : i % 64 == 1 ? -32768.0f : std::ldexp(1.0f, -14 + i % 5);
    std::vector<float> rows;
    for (int o = 0; o < 8; ++o) {
      std::vector<float> p = permuted(src, permutation(2048, 7 + o));
      rows.insert(rows.end(), p.begin(), p.end());
    }
    Tensor x = cast(from_vector(rows, {8, 2048}), t);
    std::vector<double> m = mean(x, {1}).to_vector<double>();
    for (double v : m) EXPECT_EQ(v, m[0]) << dtype_name(t);
  }
}

// A @ B with K's terms in the order p: A's columns and B's rows permuted alike.
std::vector<float> matmul_in_order(const std::vector<float>& a, const std::vector<float>& b, int M,
                                   int K, int N, const std::vector<int64_t>& p) {
  std::vector<float> pa(a.size()), pb(b.size());
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) pa[m * K + k] = a[m * K + p[k]];
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) pb[k * N + n] = b[p[k] * N + n];
  return matmul(from_vector(pa, {M, K}), from_vector(pb, {K, N})).to_vector<float>();
}

struct MatmulCase {
  int M, K, N;
};

// Operands whose products cancel: A's rows are cancelling_terms, B's columns near 1.
void operands(const MatmulCase& c, std::vector<float>& a, std::vector<float>& b) {
  a.clear();
  for (int m = 0; m < c.M; ++m) {
    std::vector<float> row = cancelling_terms(c.K, 10 + m);
    a.insert(a.end(), row.begin(), row.end());
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(0.75f, 1.25f);
  b.resize(static_cast<size_t>(c.K) * c.N);
  for (float& x : b) x = d(rng);
  for (int k = 0; k < c.K; ++k) // the +-2^40 terms of A meet 1s: their products cancel exactly
    if (k % 64 < 2) std::fill(b.begin() + int64_t(k) * c.N, b.begin() + int64_t(k + 1) * c.N, 1.0f);
}

TEST_F(Reproducible, DotProductsDoNotDependOnTheOrderOfK) {
  // A row times a matrix (the dot layout), a tile-sized matmul, and one larger than any BLAS
  // threshold (cuBLAS or OpenBLAS by default).
  for (MatmulCase c :
       {MatmulCase{2, 512, 64}, MatmulCase{64, 256, 64}, MatmulCase{96, 1536, 160}}) {
    std::vector<float> a, b;
    operands(c, a, b);
    std::vector<int64_t> id(static_cast<size_t>(c.K));
    std::iota(id.begin(), id.end(), 0);
    reset_stats();
    const std::vector<float> first = matmul_in_order(a, b, c.M, c.K, c.N, id);
    EXPECT_EQ(stats().gemms_run, 0) << c.M << "x" << c.K << "x" << c.N;
    for (uint32_t s = 0; s < 3; ++s)
      EXPECT_TRUE(same_bits(first, matmul_in_order(a, b, c.M, c.K, c.N, permutation(c.K, s))))
          << c.M << "x" << c.K << "x" << c.N << " order " << s;
    // Each element is the exact dot product rounded (to double, then float): the products of
    // two floats are exact in double and their exponents here span less than double-double.
    for (int m = 0; m < c.M; m += 7)
      for (int n = 0; n < c.N; n += 5) {
        long double big = 0, rest = 0; // the +-2^40 products apart: they cancel exactly
        for (int k = 0; k < c.K; ++k) {
          const double prod = double(a[m * c.K + k]) * double(b[k * c.N + n]);
          (std::fabs(prod) > 0x1p30 ? big : rest) += prod;
        }
        EXPECT_EQ(first[m * c.N + n], static_cast<float>(static_cast<double>(big + rest)))
            << m << "," << n;
      }
    set_reproducible(false); // the check can fail: BLAS or a plain double sum disagree
    bool differs = false;
    for (uint32_t s = 0; s < 3 && !differs; ++s)
      differs = !same_bits(first, matmul_in_order(a, b, c.M, c.K, c.N, permutation(c.K, s)));
    EXPECT_TRUE(differs) << c.M << "x" << c.K << "x" << c.N;
    set_reproducible(true);
  }
}

// Columns normalized three times over: six means, one kernel of seven passes in the default
// mode. In double-double the CUDA column layout's partial sums take 8 KB each, so a kernel
// computes at most four of them and the rest split off.
Tensor normalized_thrice(Tensor x) {
  for (int i = 0; i < 3; ++i) {
    Tensor y = x - mean(x, {0}, true);
    x = y * rsqrt(mean(y * y, {0}, true) + 1e-5f);
  }
  return x;
}

TEST_F(Reproducible, DoubleDoubleSumsTakeTwiceTheirShareOfAKernel) {
  Tensor x = randn({512, 256});
  eval(x);
  reset_stats();
  eval(normalized_thrice(x));
  EXPECT_EQ(stats().kernels_run, 2);
  set_reproducible(false);
  reset_stats();
  eval(normalized_thrice(x));
  EXPECT_EQ(stats().kernels_run, 1);
}

TEST_F(Reproducible, TheModeIsPartOfThePlan) {
  Tensor a = randn({8, 300}), b = randn({300, 40});
  eval(a, b);
  Tensor r1 = matmul(a, b) * 2.0f;
  eval(r1);
  set_reproducible(false);
  reset_stats();
  Tensor r2 = matmul(a, b) * 2.0f;
  eval(r2);
  EXPECT_EQ(stats().plan_hits, 0) << "a plan of the other mode was reused";
  EXPECT_EQ(stats().plan_misses, 1);
}

} // namespace

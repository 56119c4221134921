// matmul with torch.matmul semantics: 2-D, 1-D operands (promoted and squeezed), batched with
// broadcast batch dims, transposed / strided / pending operands; every numeric dtype.
#include "reference.h"

namespace {

using namespace kt;

/// torch.matmul on the host in double.
Vals ref_matmul(const Vals& a, std::vector<int64_t> ad, const Vals& b, std::vector<int64_t> bd,
                std::vector<int64_t>* out_shape) {
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad = {1, ad[0]};
  if (b1) bd = {bd[0], 1};
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
  std::vector<int64_t> batch = bshape(abatch, bbatch);
  auto ast = row_major_strides(ad), bst = row_major_strides(bd);
  int64_t nb = numel(batch);
  Vals out(static_cast<size_t>(nb * m * n));
  for (int64_t bi = 0; bi < nb; ++bi) {
    auto idx = unravel(bi, batch);
    int64_t aoff = 0, boff = 0;
    for (size_t q = 0; q < abatch.size(); ++q)
      aoff += (abatch[q] == 1 ? 0 : idx[q + batch.size() - abatch.size()]) * ast[q];
    for (size_t q = 0; q < bbatch.size(); ++q)
      boff += (bbatch[q] == 1 ? 0 : idx[q + batch.size() - bbatch.size()]) * bst[q];
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[aoff + i * k + p] * b[boff + p * n + j];
        out[(bi * m + i) * n + j] = s;
      }
  }
  *out_shape = batch;
  if (!a1) out_shape->push_back(m);
  if (!b1) out_shape->push_back(n);
  return out;
}

Tol mm_tol(DType t) {
  switch (t) {
  case DType::f32:
    return {1e-5, 1e-4};
  case DType::f64:
    return {1e-12, 1e-12};
  case DType::f16:
  case DType::bf16:
    return {1e-2, 3e-2};
  default:
    return {0, 0};
  }
}

Vals mm_inputs(Rng& rng, int64_t n, DType t) {
  return is_float(t) ? rng.uniform(n, t, -1, 1) : rng.uniform(n, t, -10, 10);
}

struct MMCase {
  const char* name;
  Shape a, b;
};

const std::vector<MMCase>& mm_cases() {
  static const std::vector<MMCase> cs{
      {"mat_mat", {4, 6}, {6, 5}},
      {"mat_mat_odd", {7, 13}, {13, 3}},
      {"row_times_col", {1, 8}, {8, 1}},
      {"col_times_row", {5, 1}, {1, 4}},
      {"vec_dot_vec", {9}, {9}},
      {"vec_mat", {6}, {6, 4}},
      {"mat_vec", {3, 6}, {6}},
      {"batch_mat", {3, 4, 6}, {6, 5}},
      {"mat_batch", {4, 6}, {2, 6, 5}},
      {"batch_batch", {3, 4, 6}, {3, 6, 5}},
      {"batch_broadcast", {2, 1, 4, 6}, {3, 6, 5}},
      {"batch_broadcast_ones", {1, 3, 2, 5}, {4, 1, 5, 3}},
      {"vec_batch", {6}, {3, 6, 5}},
      {"batch_vec", {3, 4, 6}, {6}},
      // past the CPU backend's split threshold (runtime/cpu/gemm.cpp): blocks of rows on its
      // pool, blocks of columns when there are fewer rows than threads, per batch
      {"split_rows", {300, 40}, {40, 60}},
      {"split_cols", {1, 4096}, {4096, 256}},
      {"split_batched", {2, 64, 200}, {200, 100}},
  };
  return cs;
}

struct MMParam {
  size_t c;
  DType dtype;
};
std::vector<MMParam> mm_params() {
  std::vector<MMParam> ps;
  for (size_t i = 0; i < mm_cases().size(); ++i)
    for (DType t : numeric_dtypes()) ps.push_back({i, t});
  return ps;
}

class Matmul : public OpsTestP<MMParam> {};

TEST_P(Matmul, MatchesTorchSemantics) {
  const MMCase& c = mm_cases()[GetParam().c];
  DType t = GetParam().dtype;
  Rng rng;
  Vals a = mm_inputs(rng, c.a.numel(), t), b = mm_inputs(rng, c.b.numel(), t);
  std::vector<int64_t> od;
  Vals e = ref_matmul(a, dims(c.a), b, dims(c.b), &od);
  Tensor r = kiln::matmul(make(a, c.a, t), make(b, c.b, t));
  EXPECT_TRUE(matches(r, to_shape(od), t, e, mm_tol(t))) << c.name << " " << name(t);
}

class MatmulT : public OpsTestP<MMParam> {};

TEST_P(MatmulT, TransposedOperands) {
  // Same product with each operand stored transposed and passed through transpose().
  const MMCase& c = mm_cases()[GetParam().c];
  DType t = GetParam().dtype;
  Rng rng;
  Vals a = mm_inputs(rng, c.a.numel(), t), b = mm_inputs(rng, c.b.numel(), t);
  std::vector<int64_t> od;
  Vals e = ref_matmul(a, dims(c.a), b, dims(c.b), &od);
  // Store a^T and b^T contiguously, then transpose back as views.
  auto store_t = [&](const Vals& v, const Shape& s) {
    auto d = dims(s);
    std::vector<int64_t> td = d;
    std::swap(td[td.size() - 1], td[td.size() - 2]);
    Vals out(v.size());
    for (int64_t i = 0; i < numel(d); ++i) {
      auto idx = unravel(i, d);
      std::swap(idx[idx.size() - 1], idx[idx.size() - 2]);
      auto st = row_major_strides(td);
      int64_t o = 0;
      for (size_t q = 0; q < idx.size(); ++q) o += idx[q] * st[q];
      out[o] = v[i];
    }
    return kiln::transpose(make(out, to_shape(td), t), -1, -2);
  };
  Tensor at = store_t(a, c.a), bt = store_t(b, c.b);
  if (c.a[c.a.size() - 1] > 1 && c.a[c.a.size() - 2] > 1) {
    EXPECT_FALSE(at.is_contiguous());
  }
  Tensor ac = make(a, c.a, t), bc = make(b, c.b, t);
  EXPECT_TRUE(matches(kiln::matmul(at, bc), to_shape(od), t, e, mm_tol(t))) << "a^T^T @ b";
  EXPECT_TRUE(matches(kiln::matmul(ac, bt), to_shape(od), t, e, mm_tol(t))) << "a @ b^T^T";
  EXPECT_TRUE(matches(kiln::matmul(at, bt), to_shape(od), t, e, mm_tol(t))) << "both";
}

void PrintTo(const MMParam& p, std::ostream* os) {
  *os << mm_cases()[p.c].name << "/" << name(p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, Matmul, ::testing::ValuesIn(mm_params()), [](const auto& info) {
  return std::string(mm_cases()[info.param.c].name) + "_" + name(info.param.dtype);
});
std::vector<MMParam> mm_params_2d() {
  std::vector<MMParam> ps;
  for (const auto& p : mm_params())
    if (mm_cases()[p.c].a.size() >= 2 && mm_cases()[p.c].b.size() >= 2) ps.push_back(p);
  return ps;
}
INSTANTIATE_TEST_SUITE_P(Ops, MatmulT, ::testing::ValuesIn(mm_params_2d()), [](const auto& info) {
  return std::string(mm_cases()[info.param.c].name) + "_" + name(info.param.dtype);
});

class MatmulMisc : public OpsTest {};

TEST_F(MatmulMisc, Square64) {
  for (DType t : {DType::f32, DType::f64}) {
    Rng rng;
    Vals a = rng.uniform(64 * 64, t, -1, 1), b = rng.uniform(64 * 64, t, -1, 1);
    std::vector<int64_t> od;
    Vals e = ref_matmul(a, {64, 64}, b, {64, 64}, &od);
    Tol tol = t == DType::f32 ? Tol{1e-5, 2e-4} : Tol{1e-12, 1e-12};
    EXPECT_TRUE(
        matches(kiln::matmul(make(a, {64, 64}, t), make(b, {64, 64}, t)), Shape{64, 64}, t, e, tol))
        << name(t);
  }
}

TEST_F(MatmulMisc, SlicedAndPermutedOperands) {
  Rng rng;
  Vals a = rng.uniform(8 * 10, DType::f64, -1, 1);    // (8, 10)
  Vals b = rng.uniform(2 * 5 * 4, DType::f64, -1, 1); // (2, 5, 4)
  Tensor x = make(a, Shape{8, 10}, DType::f64);
  Tensor y = make(b, Shape{2, 5, 4}, DType::f64);
  Tensor xs = kiln::slice(kiln::slice(x, 1, 0, 10, 2), 0, 1, 8, 2); // (4, 5): x[2i+1][2j]
  Tensor yp = kiln::permute(y, {1, 0, 2});                          // (5, 2, 4)
  Tensor yr = kiln::reshape(yp, {5, 8});                            // copy: (5, 8)
  Vals xsv(20), yrv(40);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) xsv[i * 5 + j] = a[(2 * i + 1) * 10 + 2 * j];
  for (int p = 0; p < 5; ++p)
    for (int q = 0; q < 2; ++q)
      for (int r = 0; r < 4; ++r) yrv[p * 8 + q * 4 + r] = b[q * 20 + p * 4 + r];
  std::vector<int64_t> od;
  Vals e = ref_matmul(xsv, {4, 5}, yrv, {5, 8}, &od);
  EXPECT_TRUE(matches(kiln::matmul(xs, yr), Shape{4, 8}, DType::f64, e));
  // Batched with an expanded (stride-0 batch) strided operand: (2, 4, 5) @ (2, 5, 4).
  Tensor xb = kiln::expand(kiln::unsqueeze(xs, 0), {2, 4, 5});
  Vals xbv;
  for (int q = 0; q < 2; ++q) xbv.insert(xbv.end(), xsv.begin(), xsv.end());
  Vals e2 = ref_matmul(xbv, {2, 4, 5}, b, {2, 5, 4}, &od);
  EXPECT_TRUE(matches(kiln::matmul(xb, y), Shape{2, 4, 4}, DType::f64, e2));
}

TEST_F(MatmulMisc, PendingOperandsAndChains) {
  Rng rng;
  Vals a = rng.uniform(12, DType::f32, -1, 1), b = rng.uniform(20, DType::f32, -1, 1),
       c = rng.uniform(10, DType::f32, -1, 1);
  Tensor x = make(a, Shape{3, 4}, DType::f32), y = make(b, Shape{4, 5}, DType::f32),
         z = make(c, Shape{5, 2}, DType::f32);
  std::vector<int64_t> od;
  Vals a2 = ref_unary(a, [](double v) { return v * 2 + 1; });
  Vals xy = ref_matmul(a2, {3, 4}, b, {4, 5}, &od);
  Tensor r = kiln::relu(kiln::matmul(x * 2 + 1, y) - 0.5);
  EXPECT_TRUE(matches(r, Shape{3, 5}, DType::f32,
                      ref_unary(xy, [](double v) { return std::max(v - 0.5, 0.0); }),
                      Tol{1e-5, 1e-5}));
  Vals xyz = ref_matmul(xy, {3, 5}, c, {5, 2}, &od);
  Tensor r2 = kiln::matmul(kiln::matmul(x * 2 + 1, y), z);
  EXPECT_TRUE(matches(r2, Shape{3, 2}, DType::f32, xyz, Tol{1e-5, 1e-5}));
  // The matmul result feeds a reduction.
  Reduced rs = ref_reduce(xy, {3, 5}, {1}, fold_sum);
  EXPECT_TRUE(matches(kiln::sum(kiln::matmul(x * 2 + 1, y), {1}), Shape{3}, DType::f32, rs.vals,
                      Tol{1e-5, 1e-5}));
}

TEST_F(MatmulMisc, IdentityAndKnownValues) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::f32);
  Tensor b = make({7, 8, 9, 10, 11, 12}, Shape{3, 2}, DType::f32);
  EXPECT_TRUE(matches(kiln::matmul(a, b), Shape{2, 2}, DType::f32, {58, 64, 139, 154}));
  Tensor v = make({1, 0, -1}, Shape{3}, DType::i64);
  Tensor w = make({4, 5, 6}, Shape{3}, DType::i64);
  Tensor d = kiln::matmul(v, w);
  EXPECT_EQ(d.ndim(), 0);
  EXPECT_EQ(d.dtype(), DType::i64);
  EXPECT_EQ(d.item<int64_t>(), -2);
  Vals eye(16, 0.0);
  for (int i = 0; i < 4; ++i) eye[i * 5] = 1;
  Rng rng;
  Vals m = rng.uniform(16, DType::f64, -5, 5);
  EXPECT_TRUE(matches(kiln::matmul(make(m, {4, 4}, DType::f64), make(eye, {4, 4}, DType::f64)),
                      Shape{4, 4}, DType::f64, m));
}

TEST_F(MatmulMisc, EmptyOperands) {
  // K = 0 is a sum of nothing: zeros (cuBLAS rejected the leading dimension 0 with status 7;
  // the fuzzer's seeds 2000347, 4000827, 5000016 on CUDA). No rows, columns or matrices: empty.
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(name(dt));
    kiln::set_small_matmul(kiln::SmallMatmul::blas); // the GEMM path, not in-kernel dots
    EXPECT_TRUE(matches(kiln::matmul(kiln::ones({3, 0}, dt), kiln::ones({0, 4}, dt)), Shape{3, 4},
                        dt, Vals(12, 0.0)));
    EXPECT_TRUE(matches(kiln::matmul(kiln::ones({2, 3, 0}, dt), kiln::ones({0, 5}, dt)),
                        Shape{2, 3, 5}, dt, Vals(30, 0.0)));
    EXPECT_TRUE(
        matches(kiln::matmul(kiln::ones({0}, dt), kiln::ones({0}, dt)), Shape{}, dt, Vals{0.0}));
    EXPECT_EQ(
        kiln::matmul(kiln::ones({0, 3}, dt), kiln::ones({3, 4}, dt)).to_vector<float>().size(), 0u);
    EXPECT_EQ(kiln::matmul(kiln::ones({0, 2, 3}, dt), kiln::ones({3, 4}, dt)).shape(),
              (Shape{0, 2, 4}));
    kiln::set_small_matmul(kiln::SmallMatmul::on_gpu);
  }
}

TEST_F(MatmulMisc, Errors) {
  Tensor a = kiln::ones({3, 4}), b = kiln::ones({5, 6});
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(a, b));
  EXPECT_KILN_ERROR("(3, 4)", kiln::matmul(a, b));
  EXPECT_KILN_ERROR("(5, 6)", kiln::matmul(a, b));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(kiln::ones({4}), kiln::ones({5})));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(kiln::ones({3, 4}), kiln::ones({3})));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(kiln::ones({2, 3, 4}), kiln::ones({3, 4, 5})));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(kiln::ones(Shape{}), kiln::ones({3})));
  EXPECT_KILN_ERROR("[matmul]", kiln::matmul(kiln::ones({3}), kiln::ones(Shape{})));
}

} // namespace

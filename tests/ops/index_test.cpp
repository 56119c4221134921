// index_select, gather, scatter_add against hand-written references: every dim, negative
// dims, i32 and i64 indices, duplicates, non-contiguous operands, pending operands, the plan
// cache, and the errors (shapes and dtypes when recorded, indices out of range when run).
#include "reference.h"

namespace {

using namespace kt;
using Dims = std::vector<int64_t>;

int64_t ravel(const Dims& c, const Dims& d) {
  int64_t o = 0;
  for (size_t k = 0; k < d.size(); ++k) o = o * d[k] + c[k];
  return o;
}

Vals ref_gather(const Vals& x, const Dims& xd, int dim, const Vals& idx, const Dims& id) {
  Vals out(static_cast<size_t>(numel(id)));
  for (int64_t i = 0; i < numel(id); ++i) {
    Dims c = unravel(i, id);
    c[dim] = static_cast<int64_t>(idx[i]);
    out[i] = x[ravel(c, xd)];
  }
  return out;
}

Vals ref_scatter_add(Vals x, const Dims& xd, int dim, const Vals& idx, const Dims& id,
                     const Vals& src, const Dims& sd) {
  for (int64_t i = 0; i < numel(id); ++i) {
    Dims c = unravel(i, id);
    const double v = src[ravel(c, sd)];
    c[dim] = static_cast<int64_t>(idx[i]);
    x[ravel(c, xd)] += v;
  }
  return x;
}

Vals ref_index_select(const Vals& x, const Dims& xd, int dim, const Vals& idx) {
  Dims od = xd;
  od[dim] = static_cast<int64_t>(idx.size());
  Vals out(static_cast<size_t>(numel(od)));
  for (int64_t i = 0; i < numel(od); ++i) {
    Dims c = unravel(i, od);
    c[dim] = static_cast<int64_t>(idx[c[dim]]);
    out[i] = x[ravel(c, xd)];
  }
  return out;
}

Vals counting(int64_t n) { // 1, 2, 3, ...: every element distinct and exact in every dtype
  Vals v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return v;
}

Vals random_indices(Rng& rng, int64_t n, int64_t below) {
  std::uniform_int_distribution<int64_t> d(0, below - 1);
  Vals v(static_cast<size_t>(n));
  for (double& x : v) x = static_cast<double>(d(rng.gen));
  return v;
}

class Index : public OpsTest {};

const DType kIndexTypes[] = {DType::i32, DType::i64};

TEST_F(Index, IndexSelectEveryDimBothIndexTypes) {
  const Dims xd{2, 3, 4};
  const Vals xv = counting(24);
  const Tensor x = make(xv, Shape{2, 3, 4}, DType::f32);
  for (DType it : kIndexTypes)
    for (int dim = -3; dim < 3; ++dim) {
      const int d = dim < 0 ? dim + 3 : dim;
      const Vals iv{static_cast<double>(xd[d] - 1), 0, static_cast<double>(xd[d] - 1)}; // repeats
      Shape out{2, 3, 4};
      out[d] = 3;
      EXPECT_TRUE(matches(kiln::index_select(x, dim, make(iv, Shape{3}, it)), out, DType::f32,
                          ref_index_select(xv, xd, d, iv)))
          << "dim " << dim << " index " << name(it);
    }
}

TEST_F(Index, IndexSelectScalarIndexKeepsTheDim) {
  const Tensor x = make(counting(6), Shape{2, 3}, DType::f64);
  EXPECT_TRUE(matches(kiln::index_select(x, 1, make({2}, Shape{}, DType::i64)), Shape{2, 1},
                      DType::f64, {3, 6}));
  EXPECT_TRUE(matches(kiln::index_select(x, 0, make({}, Shape{0}, DType::i32)), Shape{0, 3},
                      DType::f64, {}));
}

TEST_F(Index, GatherEveryDimAndNegativeDims) {
  Rng rng;
  const Dims xd{3, 4, 5};
  const Vals xv = counting(60);
  const Tensor x = make(xv, Shape{3, 4, 5}, DType::f32);
  for (DType it : kIndexTypes)
    for (int dim = -3; dim < 3; ++dim) {
      const int d = dim < 0 ? dim + 3 : dim;
      const Dims id{2, 3, 4}; // smaller than x in every dim: gather reads a corner
      const Vals iv = random_indices(rng, numel(id), xd[d]);
      EXPECT_TRUE(matches(kiln::gather(x, dim, make(iv, Shape{2, 3, 4}, it)), Shape{2, 3, 4},
                          DType::f32, ref_gather(xv, xd, d, iv, id)))
          << "dim " << dim << " index " << name(it);
    }
}

TEST_F(Index, GatherMovesEveryDtype) {
  const Vals xv{1, 0, 3, 4, 0, 6};
  const Vals iv{1, 1, 0, 0, 0, 1};
  for (DType t : all_dtypes()) {
    Vals want = ref_gather(xv, {2, 3}, 0, iv, {2, 3});
    if (t == DType::boolean)
      for (double& v : want) v = v != 0;
    EXPECT_TRUE(
        matches(kiln::gather(make(xv, Shape{2, 3}, t), 0, make(iv, Shape{2, 3}, DType::i64)),
                Shape{2, 3}, t, want))
        << name(t);
  }
}

TEST_F(Index, ScatterAddEveryDimWithDuplicates) {
  Rng rng;
  const Dims xd{3, 4, 5};
  const Vals xv = counting(60);
  for (DType it : kIndexTypes)
    for (int dim = -3; dim < 3; ++dim) {
      const int d = dim < 0 ? dim + 3 : dim;
      Dims id{2, 3, 4};
      id[d] = 6;              // more entries than x has positions along dim: duplicates for sure
      const Dims sd{6, 6, 7}; // src larger than the index: only the covered part is added
      const Vals iv = random_indices(rng, numel(id), xd[d]);
      const Vals sv = rng.uniform(numel(sd), DType::f64, -2, 2);
      const Tensor r = kiln::scatter_add(make(xv, Shape{3, 4, 5}, DType::f64), dim,
                                         make(iv, Shape(id.begin(), id.end()), it),
                                         make(sv, Shape{6, 6, 7}, DType::f64));
      EXPECT_TRUE(
          matches(r, Shape{3, 4, 5}, DType::f64, ref_scatter_add(xv, xd, d, iv, id, sv, sd)))
          << "dim " << dim << " index " << name(it);
    }
}

TEST_F(Index, ScatterAddNumericDtypes) {
  const Vals xv{1, 2, 3, 4};
  const Vals iv{0, 0, 3, 0};
  const Vals sv{1, 2, 3, 4};
  for (DType t : numeric_dtypes())
    EXPECT_TRUE(matches(kiln::scatter_add(make(xv, Shape{4}, t), 0, make(iv, Shape{4}, DType::i32),
                                          make(sv, Shape{4}, t)),
                        Shape{4}, t, {1 + 1 + 2 + 4, 2, 3, 4 + 3}))
        << name(t);
}

TEST_F(Index, NonContiguousOperands) {
  const Vals base = counting(24);
  const Tensor m = make(base, Shape{4, 6}, DType::f32);
  const Tensor xt = kiln::transpose(m, 0, 1);   // [6, 4], strides (1, 6)
  const Tensor xs = kiln::slice(m, 1, 1, 6, 2); // [4, 3], columns 1, 3, 5
  Vals xtv(24), xsv(12);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 4; ++j) xtv[i * 4 + j] = base[j * 6 + i];
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) xsv[i * 3 + j] = base[i * 6 + 1 + 2 * j];
  const Vals iv{3, 0, 5, 5};
  const Tensor idx = make(iv, Shape{4}, DType::i64);
  EXPECT_TRUE(matches(kiln::index_select(xt, 0, idx), Shape{4, 4}, DType::f32,
                      ref_index_select(xtv, {6, 4}, 0, iv)));
  const Vals jv{2, 0, 1, 2};
  EXPECT_TRUE(matches(kiln::index_select(xs, 1, make(jv, Shape{4}, DType::i32)), Shape{4, 4},
                      DType::f32, ref_index_select(xsv, {4, 3}, 1, jv)));
  // A transposed index and a broadcast src.
  const Vals gv{0, 1, 2, 3, 2, 1};
  const Tensor gi = kiln::transpose(make(gv, Shape{2, 3}, DType::i64), 0, 1); // [3, 2]
  const Vals giv{0, 3, 1, 2, 2, 1};
  EXPECT_TRUE(matches(kiln::gather(xs, 0, gi), Shape{3, 2}, DType::f32,
                      ref_gather(xsv, {4, 3}, 0, giv, {3, 2})));
  const Tensor src = kiln::expand(make({10, 20}, Shape{1, 2}, DType::f32), {3, 2});
  EXPECT_TRUE(
      matches(kiln::scatter_add(xs, 0, gi, src), Shape{4, 3}, DType::f32,
              ref_scatter_add(xsv, {4, 3}, 0, giv, {3, 2}, {10, 20, 10, 20, 10, 20}, {3, 2})));
}

TEST_F(Index, PendingOperandsAndConsumersLazyAndEager) {
  for (bool eager : {false, true}) {
    EagerGuard g(eager);
    const Tensor x = make(counting(6), Shape{2, 3}, DType::f32);
    const Tensor i = make({2, 0}, Shape{2}, DType::i64);
    Tensor y = kiln::index_select(x * 2, 1, i + 0) + 1; // pending x and index, fused consumer
    EXPECT_TRUE(matches(y, Shape{2, 2}, DType::f32, {7, 3, 13, 9})) << "eager " << eager;
    Tensor s = kiln::scatter_add(x - 1, 0, kiln::zeros({1, 3}, DType::i32), x * 10) * 2;
    EXPECT_TRUE(matches(s, Shape{2, 3}, DType::f32, {20, 42, 64, 6, 8, 10})) << "eager " << eager;
  }
}

TEST_F(Index, ZeroDimensionalOperands) {
  const Tensor x = make({5}, Shape{}, DType::f32);
  const Tensor i = make({0}, Shape{}, DType::i64);
  EXPECT_TRUE(matches(kiln::gather(x, 0, i), Shape{}, DType::f32, {5}));
  EXPECT_TRUE(matches(kiln::scatter_add(x, -1, i, x), Shape{}, DType::f32, {10}));
  EXPECT_TRUE(matches(kiln::index_select(x, 0, i), Shape{}, DType::f32, {5}));
}

TEST_F(Index, ALoopReusesOnePlanAndShowsTheStepInTheDump) {
  const Tensor table = make(counting(12), Shape{4, 3}, DType::f32);
  kiln::eval(table);
  Tensor acc = kiln::zeros({2, 3});
  kiln::eval(acc);
  kiln::reset_stats();
  for (int step = 0; step < 4; ++step) {
    const Tensor i = make({static_cast<double>(step), 3.0}, Shape{2}, DType::i64);
    acc = acc + kiln::index_select(table, 0, i);
    kiln::eval(acc);
  }
  EXPECT_EQ(kiln::stats().plan_hits, 3);
  EXPECT_NE(kiln::last_plan().find("index_select f32 dim 0"), std::string::npos)
      << kiln::last_plan();
  EXPECT_TRUE(matches(acc, Shape{2, 3}, DType::f32, {22, 26, 30, 40, 44, 48}));
}

// x's last reference dies with the evaluation: an elementwise kernel may take its buffer in
// place only when no later step reads it, and the index step reads it.
TEST_F(Index, BufferReuseNeverOverwritesAnIndexOperand) {
  Tensor x = make(counting(6), Shape{2, 3}, DType::f32);
  kiln::eval(x);
  Tensor doubled = x * 2;
  Tensor picked = kiln::index_select(x, 1, make({2, 2, 0}, Shape{3}, DType::i64));
  Tensor added = kiln::scatter_add(x, 0, make({1, 0, 1}, Shape{1, 3}, DType::i32), x * 10);
  x = Tensor();
  kiln::eval(doubled, picked, added);
  EXPECT_TRUE(matches(doubled, Shape{2, 3}, DType::f32, {2, 4, 6, 8, 10, 12}));
  EXPECT_TRUE(matches(picked, Shape{2, 3}, DType::f32, {3, 3, 1, 6, 6, 4}));
  EXPECT_TRUE(matches(added, Shape{2, 3}, DType::f32, {1, 22, 3, 14, 5, 36}));
}

TEST_F(Index, ShapeAndDtypeErrorsNameTheOpAndRecordNothing) {
  const Tensor x = kiln::ones({3, 4});
  const Tensor i = make({0, 1}, Shape{2}, DType::i64);
  EXPECT_KILN_ERROR("[index_select] index must be i32 or i64, got f32",
                    kiln::index_select(x, 0, kiln::ones({2})));
  EXPECT_KILN_ERROR("[gather] index must be i32 or i64, got bool",
                    kiln::gather(x, 0, kiln::ones({3, 4}, DType::boolean)));
  EXPECT_KILN_ERROR("[index_select] index must be 0-d or 1-d, got shape (2, 1)",
                    kiln::index_select(x, 0, kiln::reshape(i, {2, 1})));
  EXPECT_KILN_ERROR("[index_select] dim 2 is out of range", kiln::index_select(x, 2, i));
  EXPECT_KILN_ERROR("[gather] dim -3 is out of range",
                    kiln::gather(x, -3, kiln::reshape(i, {1, 2})));
  EXPECT_KILN_ERROR("[gather] index must have as many dims as the input: shapes (2,) and (3, 4)",
                    kiln::gather(x, 0, i));
  EXPECT_KILN_ERROR("[gather] index shape (2, 5) is larger than input shape (3, 4) at dim 1",
                    kiln::gather(x, 0, kiln::zeros({2, 5}, DType::i64)));
  EXPECT_KILN_ERROR(
      "[scatter_add] src must have the input's dtype: f64 and f32",
      kiln::scatter_add(x, 0, kiln::zeros({1, 1}, DType::i64), kiln::ones({1, 1}, DType::f64)));
  EXPECT_KILN_ERROR("[scatter_add] index shape (2, 2) is larger than src shape (1, 2) at dim 0",
                    kiln::scatter_add(x, 0, kiln::zeros({2, 2}, DType::i64), kiln::ones({1, 2})));
  EXPECT_KILN_ERROR("[scatter_add] boolean tensors are not supported",
                    kiln::scatter_add(kiln::ones({2}, DType::boolean), 0,
                                      kiln::zeros({1}, DType::i64),
                                      kiln::ones({1}, DType::boolean)));
}

TEST_F(Index, OutOfRangeIndicesThrowWhenRunAndLeaveTheEngineUsable) {
  const Tensor x = make(counting(12), Shape{3, 4}, DType::f32);
  kiln::eval(x);
  const Tensor before = x * 1;
  EXPECT_KILN_ERROR("[index_select] index 3 is out of range [0, 3) for dim 0",
                    values(kiln::index_select(x, 0, make({0, 3}, Shape{2}, DType::i64))));
  EXPECT_KILN_ERROR("[gather] index -1 is out of range [0, 4) for dim 1",
                    values(kiln::gather(x, 1, make({0, -1}, Shape{1, 2}, DType::i32))));
  EXPECT_KILN_ERROR("[scatter_add] index 7 is out of range [0, 3) for dim 0",
                    values(kiln::scatter_add(x, 0, make({7}, Shape{1, 1}, DType::i64), x)));
  // Pending work recorded before the error still runs, and x is intact.
  EXPECT_TRUE(matches(before, Shape{3, 4}, DType::f32, counting(12)));
  EXPECT_TRUE(matches(kiln::index_select(x, 0, make({2}, Shape{1}, DType::i64)), Shape{1, 4},
                      DType::f32, {9, 10, 11, 12}));
}

} // namespace

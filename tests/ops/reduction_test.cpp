// Reductions: sum mean max min over single/multiple/all axes, negative axes, keepdim; argmax;
// softmax and log_softmax; integer sums give i64.
#include "reference.h"

namespace {

using namespace kt;

struct RedOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const std::vector<int>&, bool);
  double (*fold)(const Vals&);
  bool ints_ok;
};

const std::vector<RedOp>& red_ops() {
  static const std::vector<RedOp> ops{
      {"sum",
       [](const Tensor& a, const std::vector<int>& ax, bool k) { return kiln::sum(a, ax, k); },
       fold_sum, true},
      {"mean",
       [](const Tensor& a, const std::vector<int>& ax, bool k) { return kiln::mean(a, ax, k); },
       fold_mean, false},
      {"max",
       [](const Tensor& a, const std::vector<int>& ax, bool k) { return kiln::max(a, ax, k); },
       fold_max, true},
      {"min",
       [](const Tensor& a, const std::vector<int>& ax, bool k) { return kiln::min(a, ax, k); },
       fold_min, true},
  };
  return ops;
}

const std::vector<std::vector<int>>& axes_cases() {
  static const std::vector<std::vector<int>> cs{{},     {0},     {1},    {2},      {-1},     {-3},
                                                {0, 2}, {1, -1}, {2, 0}, {-3, -2}, {0, 1, 2}};
  return cs;
}

std::string axes_str(const std::vector<int>& ax) {
  std::string s = "{";
  for (size_t i = 0; i < ax.size(); ++i) s += (i ? "," : "") + std::to_string(ax[i]);
  return s + "}";
}

struct RedParam {
  size_t op;
  DType dtype;
};
std::vector<RedParam> red_params() {
  std::vector<RedParam> ps;
  for (size_t i = 0; i < red_ops().size(); ++i)
    for (DType t : numeric_dtypes())
      if (is_float(t) || red_ops()[i].ints_ok) ps.push_back({i, t});
  return ps;
}

Tol red_tol(const RedOp& op, DType t) {
  std::string n = op.name;
  if (n == "max" || n == "min") return Tol{0, 0}; // selection is exact
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

class Reduce : public OpsTestP<RedParam> {};

TEST_P(Reduce, AllAxisCombinations) {
  const RedOp& op = red_ops()[GetParam().op];
  DType t = GetParam().dtype;
  Rng rng;
  std::vector<int64_t> d{4, 5, 6};
  Vals a = is_float(t) ? rng.uniform(120, t, -1, 1) : rng.uniform(120, t, -1000, 1000);
  Tensor x = make(a, to_shape(d), t);
  // sum of integers gives i64; everything else keeps the dtype.
  DType out = (std::string(op.name) == "sum" && !is_float(t)) ? DType::i64 : t;
  for (const auto& axes : axes_cases()) {
    Reduced r = ref_reduce(a, d, axes, op.fold);
    for (bool keep : {false, true}) {
      SCOPED_TRACE(std::string(op.name) + " axes " + axes_str(axes) + (keep ? " keepdim" : ""));
      Tensor y = op.fn(x, axes, keep);
      EXPECT_TRUE(
          matches(y, to_shape(keep ? r.shape_keep : r.shape_drop), out, r.vals, red_tol(op, t)));
    }
  }
}

TEST_P(Reduce, NonContiguousAndPendingInputs) {
  const RedOp& op = red_ops()[GetParam().op];
  DType t = GetParam().dtype;
  Rng rng;
  Vals a = is_float(t) ? rng.uniform(48, t, -1, 1) : rng.uniform(48, t, -100, 100);
  Tensor x = make(a, Shape{6, 8}, t);
  DType out = (std::string(op.name) == "sum" && !is_float(t)) ? DType::i64 : t;
  // Transposed (8, 6) view.
  Vals at(48);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 6; ++j) at[i * 6 + j] = a[j * 8 + i];
  Tensor xt = kiln::transpose(x, 0, 1);
  for (int ax : {0, 1}) {
    Reduced r = ref_reduce(at, {8, 6}, {ax}, op.fold);
    EXPECT_TRUE(
        matches(op.fn(xt, {ax}, false), to_shape(r.shape_drop), out, r.vals, red_tol(op, t)))
        << op.name << " of transpose, axis " << ax;
  }
  // Strided slice (6, 4): every other column.
  Vals as(24);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) as[i * 4 + j] = a[i * 8 + 2 * j];
  Reduced rs = ref_reduce(as, {6, 4}, {1}, op.fold);
  EXPECT_TRUE(matches(op.fn(kiln::slice(x, 1, 0, 8, 2), {1}, true), to_shape(rs.shape_keep), out,
                      rs.vals, red_tol(op, t)))
      << op.name << " of strided slice";
  // A pending input: x * 2 (exact in every dtype for these magnitudes).
  Vals a2 = ref_unary(a, [](double v) { return v * 2; });
  Reduced rp = ref_reduce(a2, {6, 8}, {0}, op.fold);
  EXPECT_TRUE(
      matches(op.fn(x * 2, {0}, false), to_shape(rp.shape_drop), out, rp.vals, red_tol(op, t)))
      << op.name << " of pending x * 2";
}

void PrintTo(const RedParam& p, std::ostream* os) {
  *os << red_ops()[p.op].name << "/" << name(p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, Reduce, ::testing::ValuesIn(red_params()), [](const auto& info) {
  return std::string(red_ops()[info.param.op].name) + "_" + name(info.param.dtype);
});

class Reductions : public OpsTest {};

TEST_F(Reductions, IntegerAndBoolSumsGiveI64) {
  Rng rng;
  Vals a = rng.uniform(30, DType::i32, -1000000, 1000000);
  Tensor x = make(a, Shape{5, 6}, DType::i32);
  EXPECT_EQ(kiln::sum(x).dtype(), DType::i64);
  EXPECT_EQ(kiln::sum(x).item<int64_t>(), static_cast<int64_t>(fold_sum(a)));
  // i32 values whose sum overflows i32 must not wrap: the accumulation is i64.
  Tensor big = make(Vals(8, 2000000000.0), Shape{8}, DType::i32);
  EXPECT_EQ(kiln::sum(big).item<int64_t>(), 16000000000LL);
  Vals b = rng.pick(40, {0, 1});
  Tensor bx = make(b, Shape{8, 5}, DType::boolean);
  Tensor bs = kiln::sum(bx, {1});
  Reduced r = ref_reduce(b, {8, 5}, {1}, fold_sum);
  EXPECT_TRUE(matches(bs, Shape{8}, DType::i64, r.vals));
  EXPECT_EQ(kiln::sum(bx).item<int64_t>(), static_cast<int64_t>(fold_sum(b)));
  // max/min keep integer dtypes.
  EXPECT_EQ(kiln::max(x).dtype(), DType::i32);
  EXPECT_EQ(kiln::max(x).item<int32_t>(), static_cast<int32_t>(fold_max(a)));
  EXPECT_EQ(kiln::min(x, {0}).dtype(), DType::i32);
}

// A floating sum or mean over dims of extent 1 is x + 0 (engine/ops_reduce.cpp): the values a
// reduction from a zero start gives (-0.0 becomes +0.0, NaN and infinities stay), the same
// shapes with and without keepdim, gradients of one, and an elementwise op that fuses with its
// neighbours: one kernel where a reduction would be a kernel of its own.
TEST_F(Reductions, SumAndMeanOverDimsOfOneAreElementwise) {
  const double nan = std::nan(""), inf = INFINITY;
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    Tensor x = make(Vals{-0.0, 2.5, nan, -inf}, Shape{4, 1}, t);
    for (bool keepdim : {false, true}) {
      for (Tensor r : {kiln::sum(x, {1}, keepdim), kiln::mean(x, {1}, keepdim)}) {
        EXPECT_EQ(r.shape(), keepdim ? Shape({4, 1}) : Shape({4})) << name(t);
        const std::vector<double> v = r.astype(DType::f64).to_vector<double>();
        EXPECT_EQ(v[0], 0.0);
        EXPECT_FALSE(std::signbit(v[0])) << name(t) << ": a sum starts at +0";
        EXPECT_EQ(v[1], 2.5);
        EXPECT_TRUE(std::isnan(v[2]));
        EXPECT_EQ(v[3], -inf);
      }
    }
  }
  Tensor y = make(Vals{0.25, -1.5, 3.0}, Shape{1, 3, 1}, DType::f32);
  kiln::reset_stats();
  Tensor loss = kiln::mean(tanh(y * 2.0f), {0, 2}) * 3.0f;
  const std::vector<float> l = loss.to_vector<float>();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_NEAR(l[0], std::tanh(0.5f) * 3.0f, 1e-6);
  EXPECT_NEAR(l[1], std::tanh(-3.0f) * 3.0f, 1e-6);
  EXPECT_NEAR(l[2], std::tanh(6.0f) * 3.0f, 1e-6);
  EXPECT_EQ(kiln::stats().kernels_run, 1) << "the mean over dims of one fuses into one kernel";
  Tensor w = make(Vals{0.5, -2.0}, Shape{2, 1}, DType::f64).requires_grad_();
  std::vector<Tensor> g = kiln::grad(kiln::sum(kiln::sum(w * w, {1})), {w});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1.0, -4.0}));
}

// Reductions over leading dims with at least 256 kept columns take the CPU's column walk
// (runtime/cpu/interpreter.cpp), which folds each column in the same order as the row walk:
// the same values as the reference, NaN propagation included.
TEST_F(Reductions, LeadingAxesOverManyColumns) {
  Rng rng;
  for (DType dt : {DType::f32, DType::f64, DType::i32}) {
    Vals a = rng.uniform(37 * 300, dt, -100, 100);
    if (dt == DType::f32) a[5 * 300 + 7] = std::nan("");
    Tensor x = make(a, Shape{37, 300}, dt);
    EXPECT_TRUE(matches(kiln::sum(x, {0}), Shape{300}, dt == DType::i32 ? DType::i64 : dt,
                        ref_reduce(a, {37, 300}, {0}, fold_sum).vals))
        << name(dt);
    EXPECT_TRUE(
        matches(kiln::max(x, {0}), Shape{300}, dt, ref_reduce(a, {37, 300}, {0}, fold_max).vals))
        << name(dt);
    EXPECT_TRUE(
        matches(kiln::min(x, {0}), Shape{300}, dt, ref_reduce(a, {37, 300}, {0}, fold_min).vals))
        << name(dt);
    // The same bits as the row walk, which folds the transpose's rows in the same order.
    for (auto [col, row] : {std::pair{kiln::sum(x, {0}), kiln::sum(transpose(x, 0, 1), {1})},
                            std::pair{kiln::max(x, {0}), kiln::max(transpose(x, 0, 1), {1})}}) {
      const std::vector<double> c = col.astype(DType::f64).to_vector<double>(),
                                r = row.astype(DType::f64).to_vector<double>();
      ASSERT_EQ(c.size(), r.size());
      for (size_t i = 0; i < c.size(); ++i)
        ASSERT_TRUE(c[i] == r[i] || (c[i] != c[i] && r[i] != r[i])) << name(dt) << " " << i;
    }
  }
  Vals b = rng.uniform(3 * 5 * 260, DType::f32, -1, 1);
  Tensor y = make(b, Shape{3, 5, 260}, DType::f32);
  EXPECT_TRUE(matches(kiln::sum(y * 2.0f, {0, 1}), Shape{260}, DType::f32,
                      ref_reduce(Vals([&] {
                                   Vals d = b;
                                   for (double& v : d) v = double(float(v) * 2.0f);
                                   return d;
                                 }()),
                                 {3, 5, 260}, {0, 1}, fold_sum)
                          .vals));
}

// Axes as PyTorch's dim: one integer of any width, a braced list, a std::vector, or none (all
// axes); a bool does not compile, so that `sum(x, true)` is not read as axis 1.
static_assert(std::is_convertible_v<int, kiln::Axes> && std::is_convertible_v<int64_t, kiln::Axes>);
static_assert(std::is_convertible_v<size_t, kiln::Axes>);
static_assert(!std::is_constructible_v<kiln::Axes, bool>);

TEST_F(Reductions, AxesAreOneIntegerAListOrNone) {
  Rng rng;
  const Tensor x = make(rng.uniform(24, DType::f32), Shape{2, 3, 4}, DType::f32);
  auto same = [](const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  };
  same(kiln::sum(x, 1), kiln::sum(x, {1}));
  same(kiln::sum(x, int64_t{-1}, true), kiln::sum(x, {2}, true));
  same(kiln::mean(x, size_t{0}), kiln::mean(x, {0}));
  same(kiln::max(x, 2), kiln::max(x, {-1}));
  same(kiln::min(x, -3, true), kiln::min(x, {0}, true));
  same(kiln::var(x, 1, 0), kiln::var(x, {1}, 0));
  same(kiln::stddev(x, 0), kiln::stddev(x, {0}));
  const std::vector<int> axes{0, 2};
  same(kiln::sum(x, axes), kiln::sum(x, {0, 2}));
  same(kiln::sum(x, std::vector<int64_t>{-1, 0}), kiln::sum(x, {0, 2}));
  same(kiln::sum(x, {}), kiln::sum(x));
  EXPECT_EQ(kiln::sum(x, {}).shape(), Shape{});
  EXPECT_EQ(kiln::sum(x, 1).shape(), (Shape{2, 4}));
  EXPECT_KILN_ERROR("[sum]", kiln::sum(x, 3)); // out of range, named as before
  // A wide integer is kept whole: 2^32 and -2^40 would wrap to 0 as an int (a sum over dim 0).
  EXPECT_KILN_ERROR("dim 4294967296 is out of range", kiln::sum(x, int64_t{1} << 32));
  EXPECT_KILN_ERROR("[var] dim -1099511627776", kiln::var(x, -(int64_t{1} << 40)));
}

TEST_F(Reductions, MeanOfIntegersThrows) {
  Tensor x = make({1, 2, 3}, Shape{3}, DType::i32);
  EXPECT_KILN_ERROR("[mean]", kiln::mean(x));
  EXPECT_KILN_ERROR("[mean]", kiln::mean(make({1, 2}, Shape{2}, DType::i64), {0}));
  EXPECT_KILN_ERROR("[mean]", kiln::mean(make({1, 0}, Shape{2}, DType::boolean)));
  // After a cast it works.
  EXPECT_DOUBLE_EQ(kiln::mean(x.astype(DType::f64)).item<double>(), 2.0);
}

TEST_F(Reductions, Argmax) {
  Rng rng;
  std::vector<int64_t> d{4, 5, 6};
  Vals a = rng.uniform(120, DType::f32, -1, 1);
  Tensor x = make(a, to_shape(d), DType::f32);
  Tensor flat = kiln::argmax(x);
  EXPECT_EQ(flat.dtype(), DType::i64);
  EXPECT_EQ(flat.ndim(), 0);
  EXPECT_EQ(flat.item<int64_t>(), static_cast<int64_t>(fold_argmax(a)));
  for (int ax : {0, 1, 2, -1, -3}) {
    Reduced r = ref_reduce(a, d, {ax}, fold_argmax);
    SCOPED_TRACE("axis " + std::to_string(ax));
    EXPECT_TRUE(matches(kiln::argmax(x, ax), to_shape(r.shape_drop), DType::i64, r.vals));
    EXPECT_TRUE(matches(kiln::argmax(x, ax, true), to_shape(r.shape_keep), DType::i64, r.vals));
  }
}

TEST_F(Reductions, ArgmaxTiesPickFirstAndInts) {
  Tensor v = make({1, 3, 3, 2, 3}, Shape{5}, DType::f32);
  EXPECT_EQ(kiln::argmax(v).item<int64_t>(), 1);
  Tensor m = make({5, 5, 1, 2, 7, 7, 0, 0, 0}, Shape{3, 3}, DType::i32);
  EXPECT_TRUE(matches(kiln::argmax(m, 1), Shape{3}, DType::i64, {0, 1, 0}));
  EXPECT_TRUE(matches(kiln::argmax(m, 0), Shape{3}, DType::i64, {0, 1, 1}));
  EXPECT_EQ(kiln::argmax(m).item<int64_t>(), 4);
  Tensor neg = make({-5, -2, -9}, Shape{3}, DType::i64);
  EXPECT_EQ(kiln::argmax(neg).item<int64_t>(), 1);
}

TEST_F(Reductions, KeepdimResultBroadcastsBack) {
  Rng rng;
  Vals a = rng.uniform(35, DType::f64, -3, 3);
  Tensor x = make(a, Shape{5, 7}, DType::f64);
  Tensor centered = x - kiln::mean(x, {1}, true);
  Tensor row_sums = kiln::sum(centered, {-1});
  EXPECT_TRUE(matches(row_sums, Shape{5}, DType::f64, Vals(5, 0.0), Tol{0, 1e-12}));
  Tensor normalized = x / kiln::max(kiln::abs(x), {0}, true);
  Reduced mx =
      ref_reduce(ref_unary(a, [](double v) { return std::fabs(v); }), {5, 7}, {0}, fold_max);
  Vals e(35);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) e[i * 7 + j] = a[i * 7 + j] / mx.vals[j];
  EXPECT_TRUE(matches(normalized, Shape{5, 7}, DType::f64, e));
}

TEST_F(Reductions, LargeSumAndMean) {
  Rng rng;
  Vals a = rng.uniform(100000, DType::f32, 0, 1);
  Tensor x = make(a, Shape{100000}, DType::f32);
  double s = fold_sum(a);
  EXPECT_NEAR(kiln::sum(x).item<double>(), s, 1e-4 * s);
  EXPECT_NEAR(kiln::mean(x).item<double>(), s / 1e5, 1e-4);
  Tensor m = kiln::reshape(x, {250, 400});
  Reduced r = ref_reduce(a, {250, 400}, {0}, fold_sum);
  EXPECT_TRUE(matches(kiln::sum(m, {0}), Shape{400}, DType::f32, r.vals, Tol{1e-5, 1e-4}));
  Reduced r1 = ref_reduce(a, {250, 400}, {1}, fold_max);
  EXPECT_TRUE(matches(kiln::max(m, {1}), Shape{250}, DType::f32, r1.vals, Tol{0, 0}));
}

// ---- softmax / log_softmax -----------------------------------------------------------------
Vals ref_softmax(const Vals& a, const std::vector<int64_t>& d, int axis, bool log) {
  int ax = axis < 0 ? axis + static_cast<int>(d.size()) : axis;
  auto st = row_major_strides(d);
  Vals out(a.size());
  for (int64_t i = 0; i < numel(d); ++i) {
    auto idx = unravel(i, d);
    if (idx[ax] != 0) continue;
    double m = -kInf;
    for (int64_t k = 0; k < d[ax]; ++k) m = std::max(m, a[i + k * st[ax]]);
    double s = 0;
    for (int64_t k = 0; k < d[ax]; ++k) s += std::exp(a[i + k * st[ax]] - m);
    for (int64_t k = 0; k < d[ax]; ++k) {
      double v = a[i + k * st[ax]] - m;
      out[i + k * st[ax]] = log ? v - std::log(s) : std::exp(v) / s;
    }
  }
  return out;
}

class Softmax : public OpsTestP<DType> {};

TEST_P(Softmax, MatchesReferenceAndSumsToOne) {
  DType t = GetParam();
  Rng rng;
  std::vector<int64_t> d{3, 4, 7};
  Vals a = rng.uniform(84, t, -4, 4);
  Tensor x = make(a, to_shape(d), t);
  for (int axis : {-1, 0, 1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Tensor sm = kiln::softmax(x, axis);
    EXPECT_TRUE(matches(sm, to_shape(d), t, ref_softmax(a, d, axis, false)));
    Tensor ls = kiln::log_softmax(x, axis);
    Tol lt = tol_for(t);
    if (t == DType::f16 || t == DType::bf16) lt = {2e-2, 3e-2};
    EXPECT_TRUE(matches(ls, to_shape(d), t, ref_softmax(a, d, axis, true), lt));
    // Each slice along the axis sums to 1.
    Tensor sums = kiln::sum(sm.astype(DType::f64), {axis});
    Vals ones(static_cast<size_t>(sums.numel()), 1.0);
    Tol st = t == DType::f64   ? Tol{1e-12, 1e-12}
             : t == DType::f32 ? Tol{1e-5, 1e-5}
                               : Tol{2e-2, 2e-2};
    EXPECT_TRUE(all_close(values(sums), ones, st));
  }
  // Default axis is the last.
  EXPECT_TRUE(matches(kiln::softmax(x), to_shape(d), t, ref_softmax(a, d, -1, false)));
}

TEST_P(Softmax, ExpOfLogSoftmaxIsSoftmax) {
  DType t = GetParam();
  Rng rng;
  Vals a = rng.uniform(40, t, -3, 3);
  Tensor x = make(a, Shape{5, 8}, t);
  Vals s1 = values(kiln::exp(kiln::log_softmax(x, 1)));
  Vals s2 = values(kiln::softmax(x, 1));
  Tol tol = t == DType::f64   ? Tol{1e-12, 1e-12}
            : t == DType::f32 ? Tol{1e-5, 1e-6}
                              : Tol{2e-2, 1e-2};
  EXPECT_TRUE(all_close(s1, s2, tol));
}

TEST_P(Softmax, NonContiguousInput) {
  DType t = GetParam();
  Rng rng;
  Vals a = rng.uniform(30, t, -3, 3);
  Tensor x = make(a, Shape{5, 6}, t);
  Vals at(30);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) at[i * 5 + j] = a[j * 6 + i];
  EXPECT_TRUE(matches(kiln::softmax(kiln::transpose(x, 0, 1), -1), Shape{6, 5}, t,
                      ref_softmax(at, {6, 5}, -1, false)));
}

INSTANTIATE_TEST_SUITE_P(Ops, Softmax, ::testing::ValuesIn(float_dtypes()),
                         [](const auto& info) { return name(info.param); });

} // namespace

// Reductions fused with their consumers (issue 4): softmax, log_softmax, layer_norm and
// `x - mean(x)` each run as one kernel, checked by kernel and buffer counts and against the
// same computation in eager mode (one kernel per op) on fresh random inputs.
#include "../test_device.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct ReductionFusion : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    manual_seed(7);
  }
  void TearDown() override { set_eager(false); }
};

// Runs f lazily and eagerly on the same inputs; returns the lazy result's stats and checks
// that both agree (bit for bit on the CPU, where both fold rows in the same order).
struct Result {
  Stats lazy;
  std::string plan;
};

std::vector<double> values(const Tensor& t) {
  Tensor d = t.to(Device::cpu()).astype(DType::f64);
  return d.to_vector<double>();
}

Result compare_with_eager(const std::function<std::vector<Tensor>()>& f, double tol = 0) {
  set_eager(true);
  std::vector<Tensor> eager = f();
  set_eager(false);
  kiln::sync();
  reset_stats();
  std::vector<Tensor> lazy = f();
  eval(lazy);
  Result r{stats(), last_plan()};
  const bool cpu = lazy[0].device() == Device::cpu();
  for (size_t i = 0; i < lazy.size(); ++i) {
    std::vector<double> a = values(lazy[i]), b = values(eager[i]);
    EXPECT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size() && j < b.size(); ++j) {
      if (std::isnan(b[j])) {
        EXPECT_TRUE(std::isnan(a[j])) << "output " << i << " element " << j;
        continue;
      }
      double t = cpu ? tol : std::max(tol, 1e-6 * (1 + std::abs(b[j])));
      EXPECT_NEAR(a[j], b[j], t) << "output " << i << " element " << j << "\n" << r.plan;
    }
  }
  return r;
}

TEST_F(ReductionFusion, SoftmaxIsOneKernel) {
  Tensor x = randn({33, 70}) * 4;
  eval(x);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{softmax(x, 1)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 1) << r.plan;
  EXPECT_NE(r.plan.find("3 pass(es) over each row"), std::string::npos) << r.plan;
}

TEST_F(ReductionFusion, SoftmaxOverTheFirstAxisIsOneKernel) {
  Tensor x = randn({50, 24}) * 3;
  eval(x);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{softmax(x, 0)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 1) << r.plan;
}

TEST_F(ReductionFusion, SoftmaxOverAMiddleAxisOfAView) {
  Tensor x = randn({6, 20, 5});
  eval(x);
  Result r =
      compare_with_eager([&] { return std::vector<Tensor>{softmax(transpose(x, 0, 2), 1)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
}

TEST_F(ReductionFusion, LogSoftmaxIsOneKernel) {
  Tensor x = randn({17, 300});
  eval(x);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{log_softmax(x, -1)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 1) << r.plan;
}

TEST_F(ReductionFusion, SoftmaxInHalfPrecisionMatchesEager) {
  for (DType dt : {DType::f16, DType::bf16}) {
    Tensor x = (randn({9, 130}) * 2).astype(dt);
    eval(x);
    Result r = compare_with_eager([&] { return std::vector<Tensor>{softmax(x, 1)}; });
    EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  }
}

TEST_F(ReductionFusion, LayerNormIsOneKernel) {
  Tensor x = randn({21, 96}) * 2 + 0.5, w = randn({96}), b = randn({96});
  eval(x, w, b);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{layer_norm(x, w, b, 1e-5)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 1) << r.plan;
  EXPECT_NE(r.plan.find("3 pass(es) over each row"), std::string::npos) << r.plan;
}

TEST_F(ReductionFusion, LayerNormAgainstAHandComputation) {
  const int rows = 5, cols = 40;
  Tensor x = randn({rows, cols}), w = randn({cols}), b = randn({cols});
  Tensor y = layer_norm(x, w, b, 1e-3);
  std::vector<double> xv = values(x), wv = values(w), bv = values(b), yv = values(y);
  for (int i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int j = 0; j < cols; ++j) m += xv[i * cols + j];
    m /= cols;
    for (int j = 0; j < cols; ++j) v += (xv[i * cols + j] - m) * (xv[i * cols + j] - m);
    v /= cols;
    for (int j = 0; j < cols; ++j) {
      double want = (xv[i * cols + j] - m) / std::sqrt(v + 1e-3) * wv[j] + bv[j];
      ASSERT_NEAR(yv[i * cols + j], want, 1e-4 * (1 + std::abs(want))) << i << "," << j;
    }
  }
}

TEST_F(ReductionFusion, LayerNormWithoutAffineAndErrors) {
  Tensor x = randn({4, 16});
  Result r = compare_with_eager([&] { return std::vector<Tensor>{layer_norm(x)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  try {
    layer_norm(x, randn({15}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer_norm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(16,)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(layer_norm(arange(0, 8, 1, DType::i32)), Error);
}

TEST_F(ReductionFusion, CenteringIsOneKernel) {
  Tensor x = randn({40, 64});
  eval(x);
  Result r = compare_with_eager([&] {
    return std::vector<Tensor>{x - mean(x, {1}, true), x - mean(x, {0}, true)};
  });
  EXPECT_EQ(r.lazy.kernels_run, 2) << r.plan; // two reduction spaces: two kernels
  EXPECT_EQ(r.lazy.buffers_materialized, 2) << r.plan;
}

TEST_F(ReductionFusion, HeldReductionIsAPerRowOutputOfTheSameKernel) {
  Tensor x = randn({12, 50});
  eval(x);
  Result r = compare_with_eager([&] {
    Tensor m = max(x, {1}, true);
    return std::vector<Tensor>{exp(x - m), m};
  });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 2) << r.plan;
  EXPECT_NE(r.plan.find("(one per row)"), std::string::npos) << r.plan;
}

TEST_F(ReductionFusion, HeldInputOfAReductionIsAnExtraOutput) {
  // Values of two shapes in one kernel: h over the whole space, its row sums per row.
  Tensor x = randn({30, 40});
  eval(x);
  Result r = compare_with_eager([&] {
    Tensor h = exp(x) * 0.5;
    return std::vector<Tensor>{h, sum(h, {1})};
  });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 2) << r.plan;
}

TEST_F(ReductionFusion, ReductionReadAcrossRowsIsNotFused) {
  // s[j] is added along rows: element (i, j) needs row j's sum, which another block owns.
  Tensor x = randn({24, 24});
  eval(x);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{x + sum(x, {1})}; });
  EXPECT_EQ(r.lazy.kernels_run, 2) << r.plan;
}

TEST_F(ReductionFusion, IntegerAndArgmaxEpilogues) {
  Tensor x = (randn({10, 33}) * 100).astype(DType::i32);
  eval(x);
  Result r = compare_with_eager([&] {
    return std::vector<Tensor>{x - max(x, {1}, true), maximum(x * 3 + sum(x, {1}, true), x),
                               argmax(x, 1, true) + x};
  });
  EXPECT_EQ(r.lazy.kernels_run, 3) << r.plan;
  EXPECT_EQ(r.lazy.buffers_materialized, 3) << r.plan;
}

TEST_F(ReductionFusion, NaNRowsPropagate) {
  Tensor x = randn({4, 8});
  eval(x);
  Tensor bad = where(arange(0, 32, 1).reshape({4, 8}) == 10, full({4, 8}, NAN), x);
  eval(bad);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{softmax(bad, 1)}; });
  EXPECT_EQ(r.lazy.kernels_run, 1) << r.plan;
  std::vector<double> v = values(softmax(bad, 1));
  EXPECT_TRUE(std::isnan(v[8]) && std::isnan(v[15])); // row 1 holds the NaN
  EXPECT_FALSE(std::isnan(v[0]) || std::isnan(v[16]));
}

TEST_F(ReductionFusion, EmptyAndSingleElementRows) {
  Tensor x = randn({5, 1}), e = randn({0, 7});
  eval(x, e);
  Result r = compare_with_eager([&] { return std::vector<Tensor>{softmax(x, 1), layer_norm(x)}; });
  EXPECT_EQ(r.lazy.kernels_run, 2) << r.plan;
  Tensor se = softmax(e, 1);
  EXPECT_EQ(se.shape(), (Shape{0, 7}));
  EXPECT_EQ(values(se).size(), 0u);
}

TEST_F(ReductionFusion, LargeRowsAndManyRows) {
  Tensor a = randn({3, 20000}), b = randn({5000, 3});
  eval(a, b);
  Result r = compare_with_eager([&] {
    return std::vector<Tensor>{softmax(a, 1), layer_norm(b), softmax(b, 0)};
  });
  EXPECT_EQ(r.lazy.kernels_run, 3) << r.plan;
}

} // namespace

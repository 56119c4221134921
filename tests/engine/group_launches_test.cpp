// Grouped launches (engine/horizontal_fusion.cpp): the elementwise kernels whose results an
// evaluation does not read run as one segmented kernel. Asserted through the plan and stats(),
// and against the same program with grouping off, bit for bit, on fresh random inputs.
#include "../test_device.h"

#include <kiln/kiln.h>
#include <kiln/optim.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct GroupLaunches : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    set_group_launches(true);
  }
  void TearDown() override { set_group_launches(true); }
};

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void expect_bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << i << ": " << a[i] << " vs " << b[i];
}

const std::vector<Shape> kShapes = {{3, 5}, {7}, {2, 2, 2}, {1}, {33, 17}};

// Adam over parameters of several shapes for `steps` steps with gradients drawn from `seed`;
// the parameters after it, the last step's plan and its stats.
struct AdamRun {
  std::vector<std::vector<float>> params;
  std::string plan;
  Stats last_step;
};

AdamRun run_adam(int steps, uint64_t seed) {
  manual_seed(seed);
  std::vector<Tensor> w;
  for (const Shape& s : kShapes) w.push_back(randn(s).requires_grad_());
  nn::ParamList list;
  for (size_t i = 0; i < w.size(); ++i) list.push_back({"w" + std::to_string(i), &w[i]});
  optim::Adam opt(list, 0.01);
  AdamRun r;
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensor> grads;
    for (const Shape& sh : kShapes) grads.push_back(randn(sh));
    eval(grads);
    reset_stats();
    opt.step(grads);
    kiln::sync();
    r.last_step = stats();
  }
  r.plan = last_plan();
  for (Tensor& t : w) r.params.push_back(t.to_vector<float>());
  return r;
}

TEST_F(GroupLaunches, AnOptimizerStepIsOneKernelWithASegmentPerParameter) {
  const uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed() + 17;
  set_group_launches(false);
  const AdamRun apart = run_adam(4, seed);
  set_group_launches(true);
  const AdamRun grouped = run_adam(4, seed);

  // Same bits: the constants (bias corrections change every step) reach the right segments.
  ASSERT_EQ(grouped.params.size(), apart.params.size());
  for (size_t i = 0; i < grouped.params.size(); ++i)
    expect_bits_equal(grouped.params[i], apart.params[i]);

  EXPECT_EQ(apart.last_step.kernels_run, static_cast<int64_t>(kShapes.size())) << apart.plan;
  EXPECT_EQ(grouped.last_step.kernels_run, 1) << grouped.plan;
  EXPECT_EQ(count(grouped.plan, "5 segments launched together"), 1) << grouped.plan;
  EXPECT_EQ(grouped.last_step.plan_hits, 1) << grouped.last_step;
  // Each parameter and moment is updated in place, as without grouping.
  EXPECT_EQ(grouped.last_step.buffers_reused, apart.last_step.buffers_reused);
  EXPECT_EQ(grouped.last_step.buffers_reused, 3 * static_cast<int64_t>(kShapes.size()))
      << grouped.plan;
}

TEST_F(GroupLaunches, AnInputOneSegmentReadsIsNotOverwrittenByAnother) {
  // x's new value may not take x's buffer: the segment computing y reads it at the same time.
  Tensor x = randn({4096});
  eval(x);
  const std::vector<float> old = x.to_vector<float>();
  Tensor y = x * 2.0f;
  x = x + 1.0f;
  eval(y, x);
  const std::string plan = last_plan();
  EXPECT_EQ(count(plan, "2 segments launched together"), 1) << plan;
  EXPECT_EQ(count(plan, "in place"), 0) << plan;
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (size_t i = 0; i < old.size(); ++i) {
    ASSERT_EQ(xv[i], old[i] + 1.0f) << i;
    ASSERT_EQ(yv[i], old[i] * 2.0f) << i;
  }
}

TEST_F(GroupLaunches, OnlyKernelsWhoseResultsNothingLaterReadsAreGrouped) {
  Tensor a = randn({64}), b = randn({8, 8});
  eval(a, b);
  Tensor c = exp(a);   // read by s below: not a sink
  Tensor s = sum(c);   // a reduction: never grouped
  Tensor d = b * 3.0f; // a sink
  Tensor e = a - 1.0f; // a sink
  eval(c, s, d, e);
  const std::string plan = last_plan();
  EXPECT_EQ(count(plan, "2 segments launched together"), 1) << plan;
  EXPECT_EQ(count(plan, "segment 0 over (8, 8)"), 1) << plan;
  EXPECT_EQ(count(plan, "segment 1 over (64,)"), 1) << plan;
  set_group_launches(false);
  Tensor d2 = b * 3.0f, e2 = a - 1.0f;
  eval(d2, e2);
  EXPECT_EQ(count(last_plan(), "segments launched together"), 0) << last_plan();
  expect_bits_equal(d.to_vector<float>(), d2.to_vector<float>());
  expect_bits_equal(e.to_vector<float>(), e2.to_vector<float>());
}

// A grouped step's outputs stay within what a step in a CUDA graph may write (16 MB): two
// 12 MB updates are two launches, as each could be graphed; two small ones one.
TEST_F(GroupLaunches, AGroupStaysSmallEnoughForACudaGraph) {
  Tensor a = randn({3 << 20}), b = randn({3 << 20}), c = randn({1000}), d = randn({1000});
  eval(a, b, c, d);
  Tensor a2 = a * 2.0f, b2 = b * 3.0f;
  reset_stats();
  eval(a2, b2);
  EXPECT_EQ(stats().kernels_run, 2) << last_plan();
  EXPECT_EQ(count(last_plan(), "segments launched together"), 0) << last_plan();
  Tensor c2 = c * 2.0f, d2 = d * 3.0f;
  reset_stats();
  eval(c2, d2);
  EXPECT_EQ(stats().kernels_run, 1) << last_plan();
}

} // namespace

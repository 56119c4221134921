// Concat pieces written by their own kernels into their slices of the concat's buffer
// (concat_slices.cpp, plan_slices), and readers of a shared value that run first merging into
// one kernel (grouping.cpp, merge_first_readers): asserted through stats() and against the same
// program run eagerly, bit for bit, on fresh random inputs.
#include "../test_device.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

using namespace kiln;

namespace {

struct ConcatSlices : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    manual_seed(4321);
  }
  void TearDown() override { set_eager(false); }
};

Tensor realized_randn(const Shape& s) {
  Tensor t = randn(s);
  eval(t);
  return t;
}

// The program's result computed lazily (stats from that evaluation) and eagerly.
struct Both {
  std::vector<float> lazy, eager;
  Stats stats;
};

Both run_both(const std::function<Tensor()>& program) {
  Both r;
  {
    Tensor out = program();
    reset_stats();
    eval(out);
    r.stats = stats();
    r.lazy = out.to_vector<float>();
  }
  set_eager(true);
  r.eager = program().to_vector<float>();
  set_eager(false);
  return r;
}

void expect_bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << i << ": " << a[i] << " vs " << b[i];
}

} // namespace

TEST_F(ConcatSlices, PiecesFromOneKernelNeedNoCopies) {
  Tensor a = realized_randn({3, 5}), b = realized_randn({3, 5});
  Both r = run_both([&] { return concat({tanh(a) * b, a + b, sigmoid(a - b)}, 1); });
  EXPECT_EQ(r.stats.copies_run, 0);
  EXPECT_EQ(r.stats.kernels_run, 1);
  EXPECT_EQ(r.stats.buffers_materialized, 1) << "only the concat is written";
  expect_bits_equal(r.lazy, r.eager);
}

TEST_F(ConcatSlices, PiecesOfDifferentShapesAlongEveryDim) {
  for (int dim = 0; dim < 3; ++dim) {
    Shape sa{2, 3, 4}, sb{2, 3, 4};
    sb[dim] = 5;
    Tensor a = realized_randn(sa), b = realized_randn(sb);
    Both r = run_both([&] { return concat({exp(a) * 0.5f, b * b - 1.0f}, dim); });
    EXPECT_EQ(r.stats.copies_run, 0) << "dim " << dim;
    expect_bits_equal(r.lazy, r.eager);
  }
}

TEST_F(ConcatSlices, APieceHeldByAHandleIsWrittenTwiceByItsKernel) {
  Tensor a = realized_randn({4, 6}), b = realized_randn({4, 6});
  Tensor held = a * b;
  Tensor out = concat({held, a - b}, 0);
  reset_stats();
  eval(out);
  EXPECT_EQ(stats().copies_run, 0) << "the held piece: a buffer of its own and its slice";
  EXPECT_EQ(stats().kernels_run, 1) << last_plan();
  std::vector<float> hv = held.to_vector<float>(), ov = out.to_vector<float>();
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    EXPECT_EQ(hv[i], av[i] * bv[i]);
    EXPECT_EQ(ov[i], av[i] * bv[i]);
    EXPECT_EQ(ov[av.size() + i], av[i] - bv[i]);
  }
}

// An RNN's hidden state: read by the next step's kernel, and stacked for a weight gradient.
TEST_F(ConcatSlices, APieceOtherKernelsReadIsWrittenIntoItsSliceToo) {
  Tensor a = realized_randn({3, 5}), w = realized_randn({3, 5});
  auto program = [&] {
    std::vector<Tensor> hs;
    Tensor h = a;
    for (int t = 0; t < 4; ++t) {
      h = tanh(h * w + 0.5f);
      hs.push_back(h);
    }
    return std::make_pair(concat(hs, 0), sum(h));
  };
  auto [out, total] = program();
  reset_stats();
  eval(out, total);
  EXPECT_EQ(stats().copies_run, 0) << last_plan();
  const std::vector<float> lazy = out.to_vector<float>();
  set_eager(true);
  const std::vector<float> eager = program().first.to_vector<float>();
  set_eager(false);
  expect_bits_equal(lazy, eager);
}

// A backward step's gate gradients, concatenated per step, and the steps stacked again.
TEST_F(ConcatSlices, AConcatOfConcatsIsWrittenByThePiecesKernels) {
  Tensor a = realized_randn({1, 4}), b = realized_randn({1, 4});
  auto program = [&] {
    std::vector<Tensor> steps, sums;
    for (int t = 0; t < 3; ++t) {
      Tensor c = concat({exp(a) * float(t), b * b - float(t)}, 1); // [1, 8]
      sums.push_back(sum(c));                                      // read by another kernel too
      steps.push_back(c);
    }
    return std::make_pair(concat(steps, 0), sums);
  };
  auto [out, sums] = program();
  reset_stats();
  eval(out, sums[0], sums[1], sums[2]);
  // On a GPU the pieces' kernels write the outer concat too; on the CPU one kernel copies the
  // three step concats into it (a strided store costs the interpreter more than a copy).
  EXPECT_EQ(stats().copies_run, default_device().is_cuda() ? 0 : 1) << last_plan();
  const std::vector<float> lazy = out.to_vector<float>();
  const float s1 = sums[1].item<float>();
  set_eager(true);
  auto [eager_out, eager_sums] = program();
  const std::vector<float> eager = eager_out.to_vector<float>();
  const float es1 = eager_sums[1].item<float>();
  set_eager(false);
  expect_bits_equal(lazy, eager);
  EXPECT_EQ(s1, es1);
}

TEST_F(ConcatSlices, RealizedPiecesAndComputedPiecesMix) {
  Tensor a = realized_randn({2, 3}), b = realized_randn({2, 7});
  Both r = run_both([&] { return concat({a, b * 2.0f, a, relu(b)}, 1); });
  EXPECT_EQ(r.stats.copies_run, 1) << "the realized pieces are copied, by one kernel";
  EXPECT_EQ(r.stats.kernels_run, 1) << "the computed ones by theirs";
  expect_bits_equal(r.lazy, r.eager);
}

TEST_F(ConcatSlices, APieceAlsoReadElsewhereIsNotASlice) {
  Tensor a = realized_randn({8}), b = realized_randn({8});
  Both r = run_both([&] {
    Tensor p = a * b; // read by the concat and by the sum
    return concat({p, a, p * 3.0f}, 0) + sum(p);
  });
  expect_bits_equal(r.lazy, r.eager);
}

TEST_F(ConcatSlices, ACastPieceKeepsItsOwnBuffer) {
  Tensor a = realized_randn({4}), b = realized_randn({4});
  // concat promotes: the f32 piece becomes a cast node, computed into the slice like any other
  Both r = run_both([&] {
    return concat({(a * b).astype(DType::f64), b.astype(DType::f64)}, 0).astype(DType::f32);
  });
  expect_bits_equal(r.lazy, r.eager);
}

TEST_F(ConcatSlices, NestedConcatsAndAConcatReadByAGemm) {
  Tensor a = realized_randn({4, 3}), b = realized_randn({4, 3}), w = realized_randn({9, 2});
  Both r = run_both([&] {
    Tensor inner = concat({a * b, a - b}, 1);   // (4, 6)
    Tensor outer = concat({inner, tanh(a)}, 1); // (4, 9)
    return matmul(outer, w);                    // the GEMM reads the concat's buffer
  });
  EXPECT_LE(r.stats.copies_run, 1) << "the inner concat is copied into the outer one at most";
  expect_bits_equal(r.lazy, r.eager);
}

// An LSTM cell's backward step: the cell-state gradient is read by this step's gate gradients
// and by the next (earlier) step. The gate gradients and the cell-state gradient are one kernel,
// which writes the gates straight into the concat the GEMMs read.
TEST_F(ConcatSlices, RecurrentGateGradientsAreOneKernelPerStep) {
  const int64_t hidden = 8;
  const int steps = 5;
  Tensor w = realized_randn({4 * hidden, hidden}).requires_grad_();
  Tensor x = realized_randn({1, 4 * hidden});
  Both r = run_both([&] {
    Tensor h = zeros({1, hidden}), c = zeros({1, hidden});
    for (int t = 0; t < steps; ++t) {
      auto gates = chunk(matmul(h, transpose(w, 0, 1)) + x, 4, 1);
      Tensor i = sigmoid(gates[0]), f = sigmoid(gates[1]), g = tanh(gates[2]);
      c = f * c + i * g;
      h = sigmoid(gates[3]) * tanh(c);
    }
    return grad(sum(h * h), {w})[0];
  });
  // No copies for the gates' concat; the zero state the first GEMM reads is one copy, and the
  // weight gradient's product over the stacked steps (autograd.cpp, StackedProducts) copies each
  // step's gate gradients and state into its operands.
  EXPECT_LE(r.stats.copies_run, 2 * steps + 1);
  // forward: one kernel per step; backward: the gate gradients of a step are one kernel (it
  // was 3 kernels and 4 copies per step); then the weight gradient's sum over the steps
  EXPECT_LE(r.stats.kernels_run, 2 * steps + 4);
  expect_bits_equal(r.lazy, r.eager);
}

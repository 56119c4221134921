// CUDA results against the CPU backend on fresh random inputs. scripts/gpu-check runs this
// binary with KILN_POISON_ALLOCATIONS=1, so device buffers start as NaN/-1 bytes and a kernel
// that skipped elements cannot pass on recycled memory.
#include "../scoped_env.h"
#include "../test_device.h"

#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

bool have_gpu() {
  return is_available(Device::cuda(0));
}

struct GpuVsCpu : ::testing::Test {
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
  }
};

std::vector<double> random_values(size_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

Tensor host_tensor(const std::vector<double>& v, const Shape& s, DType t) {
  return cast(from_vector(v, s, Device::cpu()), t);
}

double tolerance(DType t) {
  switch (t) {
  case DType::f64:
    return 1e-12;
  case DType::f32:
    return 2e-5;
  case DType::f16:
    return 2e-2;
  case DType::bf16:
    return 3e-2;
  default:
    return 0;
  }
}

using Fn = std::function<Tensor(std::vector<Tensor>&)>;

// Runs f on CPU inputs and on the same inputs copied to the GPU; compares elementwise.
void expect_same(const std::string& what, const Fn& f, std::vector<Tensor> cpu_inputs,
                 double tol_scale = 1) {
  std::vector<Tensor> gpu_inputs;
  for (Tensor& t : cpu_inputs) gpu_inputs.push_back(t.to(Device::cuda(0)));
  Tensor c = f(cpu_inputs), g = f(gpu_inputs);
  ASSERT_EQ(g.device(), Device::cuda(0)) << what;
  ASSERT_EQ(c.shape(), g.shape()) << what;
  ASSERT_EQ(c.dtype(), g.dtype()) << what;
  std::vector<double> cv = c.to_vector<double>(), gv = g.to_vector<double>();
  double tol = tolerance(c.dtype()) * tol_scale;
  for (size_t i = 0; i < cv.size(); ++i) {
    if (std::isnan(cv[i])) {
      ASSERT_TRUE(std::isnan(gv[i])) << what << " element " << i;
      continue;
    }
    ASSERT_NEAR(gv[i], cv[i], tol * (1 + std::fabs(cv[i]))) << what << " element " << i;
  }
}

const DType kFloat[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

} // namespace

TEST_F(GpuVsCpu, ElementwiseChainsEveryFloatDtype) {
  for (DType t : kFloat) {
    auto x = host_tensor(random_values(3001, 1, -2, 2), {3001}, t);
    auto y = host_tensor(random_values(3001, 2, 0.5, 2), {3001}, t);
    expect_same(std::string("chain ") + dtype_name(t),
                [](std::vector<Tensor>& in) {
                  Tensor t1 = tanh(in[0] * in[1] + 1);
                  Tensor s = sigmoid(t1);
                  return relu(s * in[0] + (1 - s) * in[1]);
                },
                {x, y});
    expect_same(
        std::string("math ") + dtype_name(t),
        [](std::vector<Tensor>& in) {
          return exp(in[0]) + log(in[1]) + log1p(in[1]) + sqrt(in[1]) * rsqrt(in[1]) +
                 sin(in[0]) * cos(in[0]) + gelu(in[0]) + abs(in[0]) / in[1] + pow(in[1], in[0]) +
                 maximum(in[0], in[1]) - minimum(in[0], -in[1]) + clamp(in[0], -0.5, 0.5);
        },
        {x, y}, 4);
  }
}

TEST_F(GpuVsCpu, IntegersBoolsCastsAndWhere) {
  auto a = host_tensor(random_values(999, 3, -50, 50), {999}, DType::i32);
  auto b = host_tensor(random_values(999, 4, 1, 9), {999}, DType::i64);
  auto x = host_tensor(random_values(999, 5, -3, 3), {999}, DType::f32);
  expect_same("ints",
              [](std::vector<Tensor>& in) {
                return (in[0] * 3 + in[1]) - abs(in[0]) + pow(in[1], 2) + maximum(in[0], in[1]);
              },
              {a, b});
  expect_same("where",
              [](std::vector<Tensor>& in) {
                return where(logical_and(in[0] > 0, logical_not(in[2] < -1)), in[2], in[2] * 2)
                    .astype(DType::f16);
              },
              {a, b, x});
  expect_same("casts",
              [](std::vector<Tensor>& in) {
                return (in[2] * 10).astype(DType::i32).astype(DType::bf16) +
                       (in[2] > 0).astype(DType::f32);
              },
              {a, b, x});
}

TEST_F(GpuVsCpu, BroadcastAndViews) {
  for (DType t : {DType::f32, DType::bf16}) {
    auto m = host_tensor(random_values(37 * 53, 6, -1, 1), {37, 53}, t);
    auto row = host_tensor(random_values(53, 7, -1, 1), {53}, t);
    auto col = host_tensor(random_values(37, 8, -1, 1), {37, 1}, t);
    expect_same("broadcast", [](std::vector<Tensor>& in) { return in[0] * in[1] + in[2]; },
                {m, row, col});
    expect_same("views",
                [](std::vector<Tensor>& in) {
                  Tensor tr = transpose(in[0], 0, 1); // (53, 37)
                  Tensor sl = slice(tr, 0, 1, 50, 3); // strided rows
                  return exp(sl) + reshape(in[2], {1, 37});
                },
                {m, row, col});
    expect_same("contiguous",
                [](std::vector<Tensor>& in) { return contiguous(transpose(in[0], 0, 1)); },
                {m, row, col});
  }
}

// Elementwise kernels read a row broadcast over a matrix as vectors and a column once per
// vector when the last dim is a multiple of the vector; odd offsets and strides fall back.
TEST_F(GpuVsCpu, BroadcastRowsAndColumnsPerVector) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    const std::string dt = dtype_name(t);
    auto m = host_tensor(random_values(37 * 64, 20, -1, 1), {37, 64}, t);
    auto row = host_tensor(random_values(65, 21, -1, 1), {65}, t);
    auto col = host_tensor(random_values(37, 22, -1, 1), {37, 1}, t);
    auto cube = host_tensor(random_values(5 * 7 * 32, 23, -1, 1), {5, 7, 32}, t);
    auto plane = host_tensor(random_values(7 * 32, 24, -1, 1), {7, 32}, t);
    auto per5 = host_tensor(random_values(5, 25, 0.5, 2), {5, 1, 1}, t);
    expect_same(
        "row and column " + dt,
        [](std::vector<Tensor>& in) { return (in[0] + slice(in[1], 0, 0, 64)) * in[2] - 0.5f; },
        {m, row, col});
    expect_same("row at an odd offset " + dt,
                [](std::vector<Tensor>& in) { return in[0] * slice(in[1], 0, 1, 65) + in[2]; },
                {m, row, col});
    expect_same("plane and per-matrix scale " + dt,
                [](std::vector<Tensor>& in) { return tanh(in[0] - in[1]) / in[2]; },
                {cube, plane, per5});
    expect_same("transposed plane " + dt,
                [](std::vector<Tensor>& in) {
                  return in[0] + transpose(reshape(in[1], {32, 7}), 0, 1);
                },
                {cube, plane, per5});
  }
}

// Every elementwise grid (KILN_ELEMENTWISE_GRID: the default, a block per 256 x N vectors with N
// vectors a thread) gives the bits of the capped one, and the CPU backend's. Outputs above 16 MB
// are launched directly, so each evaluation chooses its variant with the setting of the moment.
// Sizes leave a partial group and a tail of single elements.
TEST_F(GpuVsCpu, ElementwiseGridsGiveTheCappedGridsBits) {
  const int64_t n = (int64_t(1) << 22) + 4 * 300 + 3, rows = 4099, cols = 1024;
  auto x = host_tensor(random_values(n, 40, -2, 2), {n}, DType::f32);
  auto y = host_tensor(random_values(n, 41, 0.5, 2), {n}, DType::f32);
  auto m = host_tensor(random_values(rows * cols, 42, -1, 1), {rows, cols}, DType::f32);
  auto row = host_tensor(random_values(cols, 43, -1, 1), {cols}, DType::f32);
  auto col = host_tensor(random_values(rows, 44, -1, 1), {rows, 1}, DType::f32);
  const Fn chain = [](std::vector<Tensor>& in) {
    Tensor s = sigmoid(tanh(in[0] * in[1] + 1));
    return relu(s * in[0] + (1 - s) * in[1]);
  };
  const Fn bcast = [](std::vector<Tensor>& in) { return tanh(in[2] + in[3]) * in[4]; };
  std::vector<Tensor> gpu;
  for (const Tensor& t : {x, y, m, row, col}) gpu.push_back(t.to(Device::cuda(0)));
  expect_same("chain", chain, {x, y, m, row, col});
  expect_same("broadcast", bcast, {x, y, m, row, col});
  // bf16: 8 elements a vector (an output of 16 MB needs twice the elements).
  const int64_t nh = 2 * n;
  std::vector<Tensor> half = {host_tensor(random_values(nh, 45, -2, 2), {nh}, DType::bf16),
                              host_tensor(random_values(nh, 46, 0.5, 2), {nh}, DType::bf16)};
  for (Tensor& t : half) t = t.to(Device::cuda(0));
  std::vector<float> want_chain, want_bcast, want_half;
  {
    kt::ScopedEnv grid("KILN_ELEMENTWISE_GRID", "capped");
    want_chain = chain(gpu).to_vector<float>();
    want_bcast = bcast(gpu).to_vector<float>();
    want_half = chain(half).astype(DType::f32).to_vector<float>();
  }
  for (const char* group : {"auto", "1", "2", "4"}) {
    kt::ScopedEnv grid("KILN_ELEMENTWISE_GRID", group);
    EXPECT_EQ(chain(gpu).to_vector<float>(), want_chain) << "chain, groups of " << group;
    EXPECT_EQ(bcast(gpu).to_vector<float>(), want_bcast) << "broadcast, groups of " << group;
    EXPECT_EQ(chain(half).astype(DType::f32).to_vector<float>(), want_half)
        << "bf16 chain, groups of " << group;
  }
}

TEST_F(GpuVsCpu, Reductions) {
  for (DType t : kFloat) {
    auto x = host_tensor(random_values(6 * 70 * 9, 9, -3, 3), {6, 70, 9}, t);
    for (std::vector<int> axes : {std::vector<int>{2}, {0}, {1}, {0, 2}, {}}) {
      std::string tag = std::string(dtype_name(t)) + " axes " + std::to_string(axes.size());
      expect_same(
          "sum " + tag, [&](std::vector<Tensor>& in) { return sum(in[0] * 2, axes); }, {x}, 4);
      expect_same(
          "mean " + tag, [&](std::vector<Tensor>& in) { return mean(exp(in[0]), axes, true); }, {x},
          4);
      expect_same("max " + tag, [&](std::vector<Tensor>& in) { return max(in[0], axes); }, {x});
      expect_same("min " + tag, [&](std::vector<Tensor>& in) { return min(in[0], axes); }, {x});
    }
    expect_same(std::string("argmax ") + dtype_name(t),
                [](std::vector<Tensor>& in) { return argmax(in[0], 1); }, {x});
    expect_same(std::string("argmax all ") + dtype_name(t),
                [](std::vector<Tensor>& in) { return argmax(in[0]); }, {x});
  }
  auto i = host_tensor(random_values(5000, 10, -100, 100), {50, 100}, DType::i32);
  expect_same("int sum", [](std::vector<Tensor>& in) { return sum(in[0], {1}); }, {i});
}

TEST_F(GpuVsCpu, SoftmaxAndLogSoftmax) {
  for (DType t : kFloat) {
    auto x = host_tensor(random_values(64 * 1000, 11, -8, 8), {64, 1000}, t);
    expect_same(std::string("softmax ") + dtype_name(t),
                [](std::vector<Tensor>& in) { return softmax(in[0], 1); }, {x});
    expect_same(
        std::string("log_softmax ") + dtype_name(t),
        [](std::vector<Tensor>& in) { return log_softmax(in[0], 0); }, {x}, 4);
  }
}

TEST_F(GpuVsCpu, FusedNormalizationsRowsColumnsAndVectorRows) {
  for (DType t : kFloat) {
    const std::string dt = dtype_name(t);
    // 1024 columns: whole 16-byte vectors per row; 1001: scalar path; 3: tiny rows; 8192 and
    // 6400: f32 layer_norm rows in registers, 8 and 6-7 vectors per thread; 4096: f64 ones.
    for (int64_t cols : {1024, 1001, 3, 8192, 6400, 4096}) {
      auto x = host_tensor(random_values(37 * cols, 21, -4, 4), {37, cols}, t);
      auto w = host_tensor(random_values(cols, 22, -2, 2), {cols}, t);
      auto b = host_tensor(random_values(cols, 23, -1, 1), {cols}, t);
      std::string tag = dt + " cols " + std::to_string(cols);
      expect_same(
          "layer_norm " + tag,
          [](std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b}, 8);
      expect_same(
          "softmax rows " + tag, [](std::vector<Tensor>& in) { return softmax(in[0]); }, {x}, 4);
      expect_same(
          "softmax cols " + tag, [](std::vector<Tensor>& in) { return softmax(in[0], 0); }, {x}, 4);
      expect_same(
          "center cols " + tag,
          [](std::vector<Tensor>& in) { return in[0] - mean(in[0], {0}, true); }, {x}, 4);
      // A row slice starting at an odd element: misaligned rows take the scalar path.
      expect_same(
          "softmax of a slice " + tag,
          [](std::vector<Tensor>& in) { return softmax(slice(in[0], 1, 1, in[0].shape()[1])); },
          {x}, 4);
    }
  }
  auto i = host_tensor(random_values(40 * 64, 24, -1000, 1000), {40, 64}, DType::i32);
  expect_same("int epilogue",
              [](std::vector<Tensor>& in) {
                return in[0] - max(in[0], {1}, true) + argmax(in[0], 1, true);
              },
              {i});
  expect_same("int column epilogue",
              [](std::vector<Tensor>& in) { return in[0] * 2 - sum(in[0], {0}, true); }, {i});
}

// The column layout (reductions over outer axes, codegen's column_body): V columns per thread
// as 16-byte vectors where every operand is aligned, bx threads wide, U rows per step and a
// one-row loop for the rest. Shapes that fit none of it: 1-4 columns, odd column counts,
// row counts that are not a multiple of anything, no rows; views that misalign the columns
// (a column slice from element 1), move the rows (a row slice), broadcast a weight along the
// columns, or reduce a middle axis.
TEST_F(GpuVsCpu, ColumnReductionsOddShapesAndViews) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 64}, {7, 3},    {37, 33},   {1000, 64},
                                                {37, 8}, {5, 4},    {2, 2},     {129, 1024},
                                                {0, 16}, {300, 96}, {4099, 40}, {3, 1}};
  for (DType t : kFloat) {
    const std::string dt = dtype_name(t);
    for (auto [r, c] : shapes) {
      auto x = host_tensor(random_values(r * c, 31, -4, 4), {r, c}, t);
      std::string tag = dt + " " + std::to_string(r) + "x" + std::to_string(c);
      expect_same(
          "column sum " + tag, [](std::vector<Tensor>& in) { return sum(in[0], {0}); }, {x}, 4);
      expect_same(
          "center columns " + tag,
          [](std::vector<Tensor>& in) { return in[0] - mean(in[0], {0}, true); }, {x}, 4);
      if (r == 0) continue;
      expect_same(
          "column softmax " + tag, [](std::vector<Tensor>& in) { return softmax(in[0], 0); }, {x},
          4);
      expect_same("column argmax " + tag, [](std::vector<Tensor>& in) { return argmax(in[0], 0); },
                  {x});
      expect_same("column max epilogue " + tag,
                  [](std::vector<Tensor>& in) { return max(in[0], {0}, true) - in[0]; }, {x});
      expect_same("column min " + tag, [](std::vector<Tensor>& in) { return min(in[0], {0}); },
                  {x});
    }
    auto y = host_tensor(random_values(41 * 65, 32, -4, 4), {41, 65}, t);
    expect_same(
        "misaligned columns " + dt,
        [](std::vector<Tensor>& in) { return sum(slice(in[0], 1, 1, 65), {0}); }, {y}, 4);
    expect_same(
        "row slice " + dt,
        [](std::vector<Tensor>& in) {
          Tensor v = slice(slice(in[0], 1, 0, 64), 0, 1, 41);
          return v - mean(v, {0}, true);
        },
        {y}, 4);
    expect_same(
        "weight along rows " + dt,
        [](std::vector<Tensor>& in) {
          Tensor v = slice(in[0], 1, 0, 64), w = slice(in[0], 1, 64, 65); // w: (41, 1)
          return sum(v * w, {0}, true) + w;
        },
        {y}, 4);
    auto z = host_tensor(random_values(6 * 50 * 16, 33, -4, 4), {6, 50, 16}, t);
    expect_same(
        "middle axis " + dt, [](std::vector<Tensor>& in) { return sum(in[0], {1}); }, {z}, 4);
    expect_same(
        "two outer axes " + dt,
        [](std::vector<Tensor>& in) {
          return in[0] - mean(in[0], {0, 1}, true);
        },
        {z}, 4);
    expect_same("middle argmax " + dt, [](std::vector<Tensor>& in) { return argmax(in[0], 1); },
                {z});
  }
  for (DType t : {DType::i32, DType::i64, DType::boolean}) {
    for (auto [r, c] : shapes) {
      auto x = host_tensor(random_values(r * c, 34, -100, 100), {r, c}, t);
      std::string tag =
          std::string(dtype_name(t)) + " " + std::to_string(r) + "x" + std::to_string(c);
      expect_same("int column sum " + tag, [](std::vector<Tensor>& in) { return sum(in[0], {0}); },
                  {x});
      if (r == 0) continue;
      expect_same("int column argmax " + tag,
                  [](std::vector<Tensor>& in) { return argmax(in[0], 0); }, {x});
    }
  }
}

TEST_F(GpuVsCpu, HeldReductionsAndMultiOutputRows) {
  auto x = host_tensor(random_values(33 * 512, 25, -3, 3), {33, 512}, DType::f32);
  for (int axis : {0, 1}) {
    std::vector<Tensor> cpu{x}, gpu{x.to(Device::cuda(0))};
    auto run = [&](std::vector<Tensor>& in) {
      Tensor h = exp(in[0]) * 0.5;
      Tensor s = sum(h, {axis}, true);
      Tensor y = h / s;
      eval(h, s, y);
      return std::vector<Tensor>{h, s, y};
    };
    std::vector<Tensor> c = run(cpu), g = run(gpu);
    for (size_t k = 0; k < c.size(); ++k) {
      std::vector<double> cv = c[k].to_vector<double>(), gv = g[k].to_vector<double>();
      ASSERT_EQ(cv.size(), gv.size());
      for (size_t e = 0; e < cv.size(); ++e)
        ASSERT_NEAR(gv[e], cv[e], 2e-5 * (1 + std::fabs(cv[e]))) << axis << " " << k << " " << e;
    }
  }
}

TEST_F(GpuVsCpu, TiledTransposes) {
  for (DType t : {DType::f32, DType::f16, DType::f64, DType::i64, DType::boolean}) {
    const std::string dt = dtype_name(t);
    for (auto [r, c] : {std::pair<int64_t, int64_t>{256, 128}, {100, 67}, {33, 1000}, {8, 200}}) {
      auto x = host_tensor(random_values(r * c, 26, -50, 50), {r, c}, t);
      auto y = host_tensor(random_values(r * c, 27, -50, 50), {c, r}, t);
      std::string tag = dt + " " + std::to_string(r) + "x" + std::to_string(c);
      expect_same("contiguous(transpose) " + tag,
                  [](std::vector<Tensor>& in) { return contiguous(transpose(in[0], 0, 1)); }, {x});
      if (t != DType::boolean)
        expect_same("transpose + other " + tag,
                    [](std::vector<Tensor>& in) { return transpose(in[0], 0, 1) * 2 + in[1]; },
                    {x, y});
    }
  }
  auto z = host_tensor(random_values(6 * 40 * 50, 28, -5, 5), {6, 40, 50}, DType::f32);
  expect_same("batched permute",
              [](std::vector<Tensor>& in) {
                return contiguous(permute(in[0], {0, 2, 1}));
              },
              {z});
  expect_same("outer permute",
              [](std::vector<Tensor>& in) {
                return contiguous(permute(in[0], {2, 0, 1}));
              },
              {z});
  expect_same("transposed slice",
              [](std::vector<Tensor>& in) {
                return contiguous(transpose(slice(in[0], 2, 3, 47), 1, 2)) + 1;
              },
              {z});
}

TEST_F(GpuVsCpu, MatmulSquareSkinnyBatchedTransposed) {
  for (DType t : kFloat) {
    auto a = host_tensor(random_values(3 * 64 * 48, 12, -1, 1), {3, 64, 48}, t);
    auto b = host_tensor(random_values(48 * 33, 13, -1, 1), {48, 33}, t);
    auto v = host_tensor(random_values(48, 14, -1, 1), {48}, t);
    double scale = t == DType::f64 ? 1 : 8; // accumulation orders differ
    expect_same(
        std::string("batched ") + dtype_name(t),
        [](std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {a, b, v}, scale);
    expect_same(
        std::string("transposed ") + dtype_name(t),
        [](std::vector<Tensor>& in) {
          return matmul(transpose(in[1], 0, 1), transpose(in[0], 1, 2));
        },
        {a, b, v}, scale);
    expect_same(
        std::string("mat-vec ") + dtype_name(t),
        [](std::vector<Tensor>& in) { return matmul(in[0], in[2]); }, {a, b, v}, scale);
  }
}

TEST_F(GpuVsCpu, RandomNumbersMatchTheCpu) {
  for (DType t : kFloat) {
    manual_seed(123);
    Tensor c = rand({4097}, t, Device::cpu()) + randn({4097}, t, Device::cpu());
    manual_seed(123);
    Tensor g = rand({4097}, t, Device::cuda(0)) + randn({4097}, t, Device::cuda(0));
    auto cv = c.to_vector<double>(), gv = g.to_vector<double>();
    for (size_t i = 0; i < cv.size(); ++i)
      ASSERT_NEAR(gv[i], cv[i], 4 * tolerance(t) * (1 + std::fabs(cv[i]))) << i;
  }
}

TEST_F(GpuVsCpu, ConcatArangeAndEmpty) {
  auto a = host_tensor(random_values(12, 15, -1, 1), {3, 4}, DType::f32);
  auto b = host_tensor(random_values(8, 16, -1, 1), {2, 4}, DType::f32);
  expect_same("concat",
              [](std::vector<Tensor>& in) {
                return concat({in[0], exp(in[1])}, 0);
              },
              {a, b});
  Tensor r = arange(0, 10, 0.5, DType::f32, Device::cuda(0));
  EXPECT_FLOAT_EQ(r.to_vector<float>()[7], 3.5f);
  Tensor e = zeros({0, 5}, DType::f32, Device::cuda(0)) + 1;
  EXPECT_EQ(e.to_vector<float>().size(), 0u);
  EXPECT_EQ(sum(e).item<float>(), 0.0f);
}

TEST_F(GpuVsCpu, OutOfMemoryIsAClearErrorAndTheEngineStaysUsable) {
  Tensor x = ones({1000}, DType::f32, Device::cuda(0));
  try {
    Tensor huge = zeros({int64_t(1) << 45}, DType::f32, Device::cuda(0)) + 1;
    eval(huge);
    FAIL() << "allocating 128 TiB should fail";
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("requested"), std::string::npos) << w;
    EXPECT_NE(w.find("free"), std::string::npos) << w;
  }
  EXPECT_FLOAT_EQ(sum(x * 2).item<float>(), 2000.0f);
}

TEST_F(GpuVsCpu, LoopHoldsDeviceMemoryFlat) {
  Tensor w = randn({4096}, DType::f32, Device::cuda(0));
  Tensor g = randn({4096}, DType::f32, Device::cuda(0));
  eval(w, g);
  for (int i = 0; i < 20; ++i) eval(w = w * 0.9f + g);
  int64_t in_use = stats().bytes_in_use;
  for (int i = 0; i < 2000; ++i) eval(w = w * 0.9f + g);
  EXPECT_EQ(stats().bytes_in_use, in_use);
}

// Runs in CI (no GPU): CUDA devices are reported unavailable and using one is a clear error.
TEST(CudaAvailability, WithoutAGpuCudaOpsThrowAndTheCpuIsTheDefault) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present";
  if (!std::getenv("KILN_DEVICE")) EXPECT_EQ(default_device(), Device::cpu());
  try {
    zeros({2}, DType::f32, Device::cuda(0));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[zeros] cuda:0 is not available"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ones({2}).to(Device::cuda(0)), Error);
  EXPECT_FLOAT_EQ(sum(ones({4})).item<float>(), 4.0f);
}

namespace {

Tensor host_indices(size_t n, uint32_t seed, int64_t below, const Shape& s, DType t) {
  std::vector<double> v = random_values(n, seed, 0, static_cast<double>(below));
  for (double& x : v) x = std::floor(x);
  return cast(from_vector(v, s, Device::cpu()), t);
}

// Exact equality: the index kernels add in the CPU's order (one thread per fiber along dim).
void expect_bits(const std::string& what, const Fn& f, std::vector<Tensor> cpu_inputs) {
  expect_same(what, f, cpu_inputs, 0);
}

} // namespace

TEST_F(GpuVsCpu, GatherAndIndexSelectEveryDimAndDtype) {
  const DType all[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};
  for (DType t : all)
    for (int dim : {0, 1, -1}) {
      auto x = host_tensor(random_values(40 * 33 * 7, 11, -4, 4), {40, 33, 7}, t);
      const int d = dim < 0 ? 2 : dim;
      const int64_t size = Shape{40, 33, 7}[d];
      auto g = host_indices(20 * 30 * 7, 12, size, {20, 30, 7}, DType::i64);
      auto s = host_indices(5000, 13, size, {5000}, DType::i32);
      const std::string name = std::string(dtype_name(t)) + " dim " + std::to_string(dim);
      expect_bits("gather " + name,
                  [dim](std::vector<Tensor>& in) { return gather(in[0], dim, in[1]); }, {x, g});
      expect_bits("index_select " + name,
                  [dim](std::vector<Tensor>& in) { return index_select(in[0], dim, in[1]) * 2; },
                  {x, s});
    }
}

TEST_F(GpuVsCpu, ScatterAddWithDuplicatesIsBitIdenticalAndDeterministic) {
  for (DType t : kFloat)
    for (int dim : {0, 1}) {
      auto x = host_tensor(random_values(300 * 64, 21, -1, 1), {300, 64}, t);
      auto src = host_tensor(random_values(4000 * 64, 22, -1, 1), {4000, 64}, t);
      auto idx = host_indices(4000 * 64, 23, dim == 0 ? 300 : 64, {4000, 64}, DType::i64);
      if (dim == 1) { // along the rows: index [300, 200] into 64 columns
        src = host_tensor(random_values(300 * 200, 24, -1, 1), {300, 200}, t);
        idx = host_indices(300 * 200, 25, 64, {300, 200}, DType::i32);
      }
      const std::string name = std::string(dtype_name(t)) + " dim " + std::to_string(dim);
      expect_bits("scatter_add " + name,
                  [dim](std::vector<Tensor>& in) { return scatter_add(in[0], dim, in[1], in[2]); },
                  {x, idx, src});
      Tensor gx = x.to(Device::cuda(0)), gi = idx.to(Device::cuda(0)), gs = src.to(Device::cuda(0));
      EXPECT_EQ(scatter_add(gx, dim, gi, gs).to_vector<double>(),
                scatter_add(gx, dim, gi, gs).to_vector<double>())
          << name << ": two runs differ";
    }
}

TEST_F(GpuVsCpu, EmbeddingGradientAndTransposedOperands) {
  auto w = host_tensor(random_values(1000 * 48, 31, -1, 1), {1000, 48}, DType::f32);
  auto tokens = host_indices(2048, 32, 1000, {2048}, DType::i64);
  expect_same(
      "embedding backward",
      [](std::vector<Tensor>& in) { // tanh: libdevice vs the CPU's
        Tensor p = in[0].detach().requires_grad_();
        Tensor y = tanh(index_select(p, 0, in[1]));
        return grad(sum(y * y), {p})[0];
      },
      {w, tokens}, 4);
  auto x = host_tensor(random_values(48 * 1000, 33, -1, 1), {48, 1000}, DType::f32);
  auto g = host_indices(48 * 20, 34, 48, {20, 48}, DType::i32);
  expect_bits("gather of a transpose",
              [](std::vector<Tensor>& in) { return gather(transpose(in[0], 0, 1), 1, in[1]); },
              {x, g});
}

TEST_F(GpuVsCpu, OutOfRangeIndexIsReportedAtTheNextSyncAndTheEngineGoesOn) {
  set_default_device(Device::cuda(0));
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor bad = index_select(x, 0, from_vector<int64_t>({0, 3}));
  try {
    (void)bad.to_vector<float>();
    ADD_FAILURE() << "no error for index 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[index_select] index 3 is out of range [0, 3) for dim 0"),
              std::string::npos)
        << e.what();
  }
  // The flag was cleared: later work runs and reads normally.
  Tensor ok =
      scatter_add(x, 0, from_vector<int32_t>({2}, {1, 1}), from_vector<float>({10}, {1, 1}));
  EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 15, 6}));
  Tensor worse = scatter_add(x, 1, from_vector<int64_t>({-5}, {1, 1}), x);
  EXPECT_THROW(kiln::sync(), Error);
  EXPECT_EQ(worse.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6})); // skipped
  set_default_device(Device::cpu());
}

TEST_F(GpuVsCpu, IndexStepsInALoopWithGraphs) {
  set_default_device(Device::cuda(0));
  Tensor table = randn({64, 16});
  Tensor acc = zeros({8, 16});
  eval(table, acc);
  Tensor cpu_acc = zeros({8, 16}, DType::f32, Device::cpu());
  Tensor cpu_table = table.to(Device::cpu());
  for (int step = 0; step < 6; ++step) {
    std::vector<int64_t> ids(8);
    for (int i = 0; i < 8; ++i) ids[i] = (step * 7 + i * 5) % 64;
    Tensor t = from_vector(ids, {8});
    acc = acc * 0.5f + index_select(table, 0, t); // exact on both devices: same bits
    eval(acc);
    cpu_acc = cpu_acc * 0.5f + index_select(cpu_table, 0, t.to(Device::cpu()));
  }
  EXPECT_EQ(acc.to_vector<float>(), cpu_acc.to_vector<float>());
  set_default_device(Device::cpu());
}

// A training step (the RNN sample's shapes: LSTM hidden 256, batch 32, Adam, clipping) replays
// every batch as a CUDA graph once warm: each GEMM's capture must be able to sit in a graph as a
// child (cuBLAS given its own workspace pool allocates inside a capture, which a child graph may
// not hold).
TEST_F(GpuVsCpu, TrainingStepReplaysEveryBatchAsAGraph) {
  const Device gpu = Device::cuda(0);
  manual_seed(3);
  nn::LSTMCell cell(1, 256, {DType::f32, gpu});
  nn::Linear head(256, 1, true, {DType::f32, gpu});
  nn::ParamList params = nn::join({cell.parameters("lstm."), head.parameters("head.")});
  optim::Adam opt(params, 1e-3);
  const int64_t batch = 32, window = 8;
  Tensor seq = randn({window + 1, batch, 1}, DType::f32, gpu);
  auto step = [&] {
    auto state = cell.zero_state(batch);
    Tensor loss;
    for (int t = 0; t < window; ++t) {
      state = cell(reshape(slice(seq, 0, t, t + 1), {batch, 1}), state);
      Tensor err = nn::mse_loss(head(state.h), reshape(slice(seq, 0, t + 1, t + 2), {batch, 1}));
      loss = loss.defined() ? loss + err : err;
    }
    std::vector<Tensor> grads = grad(loss, optim::tensors(params));
    optim::clip_grad_norm(grads, 1.0);
    opt.step(grads);
    return loss;
  };
  for (int i = 0; i < 3; ++i) step();
  kiln::sync();
  reset_stats();
  Tensor loss;
  for (int i = 0; i < 3; ++i) loss = step();
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
  EXPECT_EQ(stats().graph_misses, 0);
  EXPECT_GE(stats().graph_replays, 3);
}

// Replayed CUDA graphs order kernels by their data dependencies only (independent ones run side
// by side) and launch a chain's next kernel while the one before it ends (programmatic
// dependent launch on sm_90+): every kernel must still see its predecessors' writes and never
// overwrite what a kernel not yet done reads. A step of every layout (elementwise, row and
// column reductions, a dot beside GEMM tiles, a cuBLAS GEMM between them, a buffer replaced in
// place), replayed, matches the CPU step for step (launch_order_test.cpp tests the edges).
TEST_F(GpuVsCpu, ReplayedGraphsOfDependentKernelsMatchTheCpu) {
  auto step = [](Tensor& x, const Tensor& w, const Tensor& big) {
    Tensor r = tanh(x * 0.9f + 0.1f);                              // elementwise
    Tensor m = r - mean(r, {1}, true);                             // row reduction
    Tensor c = m / (sum(abs(m), {0}, true) + 1.0f);                // column reduction
    Tensor d = matmul(slice(c, 0, 0, 1), w);                       // a dot (one row)
    Tensor t = matmul(c, w) * 0.5f + d;                            // GEMM tiles
    Tensor g = matmul(big, expand(sum(t, {0}, true), {1024, 64})); // cuBLAS
    x = sigmoid(t + slice(g, 0, 0, 64) * 1e-3f) - 0.5f;            // x replaced: in place
    eval(x);
  };
  const Device gpu = Device::cuda(0);
  Tensor x = host_tensor(random_values(64 * 64, 1, -1, 1), {64, 64}, DType::f32);
  Tensor w = host_tensor(random_values(64 * 64, 2, -0.2, 0.2), {64, 64}, DType::f32);
  Tensor big = host_tensor(random_values(1024 * 1024, 3, -0.03, 0.03), {1024, 1024}, DType::f32);
  Tensor gx = x.to(gpu), gw = w.to(gpu), gbig = big.to(gpu);
  reset_stats();
  for (int i = 0; i < 12; ++i) {
    step(x, w, big);
    step(gx, gw, gbig);
    std::vector<float> want = x.to_vector<float>(), got = gx.to_vector<float>();
    for (size_t j = 0; j < want.size(); ++j)
      ASSERT_NEAR(got[j], want[j], 1e-4) << "step " << i << " element " << j;
  }
  EXPECT_GE(stats().graph_replays, 8);
}

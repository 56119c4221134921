// Small matmuls as dot products inside the kernel that reads them (set_small_matmul): every
// case is computed with `everywhere` on the test device (the CPU interpreter in CI, generated
// CUDA kernels with KILN_TEST_DEVICE=cuda) and checked against BLAS on the CPU backend, on
// fresh random inputs; the Stats show that no GEMM ran and how many kernels did.
#include "../test_device.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct SmallMatmul_ : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE();
    set_eager(false);
    set_small_matmul(SmallMatmul::everywhere);
    manual_seed(1234);
  }
  void TearDown() override { set_small_matmul(SmallMatmul::on_gpu); }
};
using SmallMatmulTest = SmallMatmul_;

// Random values on the CPU (the same numbers for every device), then copied to `dev`.
Tensor rnd(const Shape& s, DType dt, Device dev, uint64_t seed, float scale = 1.0f) {
  manual_seed(seed);
  Tensor t = (randn(s, DType::f32, Device::cpu()) * scale).astype(dt).to(dev);
  eval(t);
  return t;
}

double tolerance(DType dt) {
  return dt == DType::f64 ? 1e-12 : dt == DType::f32 ? 2e-5 : dt == DType::f16 ? 2e-2 : 3e-2;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = got.astype(DType::f64).to_vector<double>();
  std::vector<double> w = want.astype(DType::f64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << what << " at " << i;
    worst = std::max(worst, std::fabs(g[i] - w[i]) / std::max(1.0, std::fabs(w[i])));
  }
  EXPECT_LE(worst, tol) << what;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs f on random inputs of the given shapes: on the test device with small matmuls fused and
// on the CPU with BLAS. Returns the Stats of the fused run (inputs made before it).
Stats check(const std::vector<Shape>& shapes, DType dt, const Fn& f, double tol, const char* what) {
  auto inputs = [&](Device d) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < shapes.size(); ++i)
      in.push_back(rnd(shapes[i], dt, d, 100 + i, i == 0 ? 1.0f : 0.3f));
    return in;
  };
  set_small_matmul(SmallMatmul::blas);
  Tensor want = f(inputs(Device::cpu()));
  eval(want);
  set_small_matmul(SmallMatmul::everywhere);
  std::vector<Tensor> in = inputs(default_device());
  reset_stats();
  Tensor got = f(in);
  eval(got);
  Stats s = stats();
  expect_close(got, want, tol, what);
  return s;
}

TEST_F(SmallMatmulTest, VectorTimesMatrixIsOneKernel) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Stats s = check(
        {{300}, {300, 77}}, dt,
        [](const std::vector<Tensor>& t) { return tanh(matmul(t[0], t[1]) + 0.5f); }, tolerance(dt),
        dtype_name(dt));
    EXPECT_EQ(s.gemms_run, 0) << dtype_name(dt);
    EXPECT_EQ(s.kernels_run, 1) << dtype_name(dt);
  }
}

TEST_F(SmallMatmulTest, LayoutsOfTheOperands) {
  // Transposed A and B, a slice at an offset, rows 1..4, batched, K not a multiple of 4 and
  // shorter than the threads of an element.
  struct Case {
    const char* name;
    std::vector<Shape> shapes;
    Fn f;
  };
  const Case cases[] = {
      {"B transposed",
       {{2, 64}, {40, 64}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], transpose(t[1], 0, 1)); }},
      {"A transposed",
       {{33, 3}, {33, 50}},
       [](const std::vector<Tensor>& t) { return matmul(transpose(t[0], 0, 1), t[1]); }},
      {"A a slice at an offset",
       {{10, 129}, {129, 31}},
       [](const std::vector<Tensor>& t) { return matmul(slice(t[0], 0, 7, 8), t[1]) * 2.0f; }},
      {"four rows",
       {{4, 5}, {5, 300}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }},
      {"batched 2 x 2 rows",
       {{2, 2, 70}, {2, 70, 9}},
       [](const std::vector<Tensor>& t) { return sigmoid(matmul(t[0], t[1])); }},
      {"batch broadcast",
       {{3, 1, 16}, {16, 24}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }},
      {"matrix times vector",
       {{3, 500}, {500}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }},
      {"dot of two vectors",
       {{1000}, {1000}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }},
      {"the longest K",
       {{1, 1024}, {1024, 40}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }},
      {"one column, many rows (a read-out head at batch 32)",
       {{32, 256}, {256, 1}},
       [](const std::vector<Tensor>& t) { return tanh(matmul(t[0], t[1]) + 0.5f); }},
      {"four columns, A transposed",
       {{70, 100}, {70, 4}},
       [](const std::vector<Tensor>& t) { return matmul(transpose(t[0], 0, 1), t[1]); }},
      {"matrix times vector, many rows",
       {{64, 300}, {300}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) - 1.0f; }},
  };
  for (const Case& c : cases) {
    Stats s = check(c.shapes, DType::f32, c.f, 2e-5, c.name);
    EXPECT_EQ(s.gemms_run, 0) << c.name;
    EXPECT_EQ(s.kernels_run, 1) << c.name;
  }
}

// PyTorch's LSTMCell math, one step or several with the input a new slice each step: both
// GEMVs, the bias and the gates read through chunk views are one kernel writing h and c.
// Over the steps h and c are read and replaced: h's buffer must not be written in place while
// other elements' dot products still read it.
Tensor lstm(const std::vector<Tensor>& t, int steps) {
  const Tensor &seq = t[0], &wx = t[1], &wh = t[2], &b = t[3];
  Tensor h = t[4], c = t[5];
  for (int i = 0; i < steps; ++i) {
    Tensor x = slice(seq, 0, i, i + 1);
    std::vector<Tensor> g = chunk(matmul(x, wx) + matmul(h, wh) + b, 4, 1);
    c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    h = sigmoid(g[3]) * tanh(c);
    g.clear();
    eval(h, c);
  }
  return concat({h, c}, 1);
}

TEST_F(SmallMatmulTest, LstmCellStepIsOneKernel) {
  const int64_t in = 48, hidden = 40;
  const std::vector<Shape> shapes = {{12, in},     {in, 4 * hidden}, {hidden, 4 * hidden},
                                     {4 * hidden}, {1, hidden},      {1, hidden}};
  Stats one = check(
      shapes, DType::f32, [](const std::vector<Tensor>& t) { return lstm(t, 1); }, 2e-5,
      "one step");
  EXPECT_EQ(one.gemms_run, 0);
  EXPECT_EQ(one.kernels_run, 1); // the cell (concat runs copies)
  Stats twelve = check(
      shapes, DType::f32, [](const std::vector<Tensor>& t) { return lstm(t, 12); }, 1e-4,
      "twelve steps");
  EXPECT_EQ(twelve.gemms_run, 0);
  EXPECT_EQ(twelve.kernels_run, 12);
}

TEST_F(SmallMatmulTest, RecurrenceRecordedWithoutEvalReadsEachStepFromMemory) {
  // h = tanh(h @ w + b) with h and the matmul of one shape, ten steps pending at once: step t's
  // h is the operand of step t+1's dots, read at other elements' indices, so it must be written
  // by a kernel before the next one starts, never an extra output of the kernel that reads it.
  auto steps = [](const std::vector<Tensor>& t) {
    Tensor h = t[0];
    for (int i = 0; i < 10; ++i) h = tanh(matmul(h, t[1]) + t[2]);
    return h;
  };
  Stats s = check({{4, 16}, {16, 16}, {16}}, DType::f32, steps, 1e-5, "recurrence");
  EXPECT_EQ(s.gemms_run, 0);
  EXPECT_EQ(s.kernels_run, 10);
}

TEST_F(SmallMatmulTest, ReadThroughABroadcastIsWrittenOnce) {
  // (x @ w) broadcast over 5 rows: the dots would be redone per row, so the planner writes the
  // matmul (a kernel of its own) and the sum reads it.
  Stats s = check(
      {{1, 64}, {64, 48}, {5, 48}}, DType::f32,
      [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) + t[2]; }, 2e-5, "broadcast");
  EXPECT_EQ(s.gemms_run, 0);
  EXPECT_EQ(s.kernels_run, 2);
}

TEST_F(SmallMatmulTest, ReadByAReduction) {
  // softmax(x @ w): the reduction kernel reads the matmul, written by a dot kernel of its own.
  Stats s = check(
      {{2, 80}, {80, 100}}, DType::f32,
      [](const std::vector<Tensor>& t) { return softmax(matmul(t[0], t[1]), 1); }, 2e-5, "softmax");
  EXPECT_EQ(s.gemms_run, 0);
  EXPECT_EQ(s.kernels_run, 2);
}

TEST_F(SmallMatmulTest, ResultReadTwiceAndHeld) {
  const Device dev = default_device();
  set_small_matmul(SmallMatmul::blas);
  Tensor xc = rnd({2, 100}, DType::f32, Device::cpu(), 40),
         wc = rnd({100, 60}, DType::f32, Device::cpu(), 41);
  Tensor yc = matmul(xc, wc), ac = exp(yc * 0.1f), bc = yc * yc;
  eval(yc, ac, bc);
  set_small_matmul(SmallMatmul::everywhere);
  Tensor x = xc.to(dev), w = wc.to(dev);
  Tensor y = matmul(x, w), a = exp(y * 0.1f), b = y * y;
  eval(y, a, b);
  expect_close(y, yc, 2e-5, "held");
  expect_close(a, ac, 2e-5, "exp");
  expect_close(b, bc, 2e-5, "square");
}

// Tiled matmuls (more than four rows and columns, up to 2^24 multiply-adds): the kernel that
// reads the matmul computes it tile by tile (on CUDA the GEMM-tile layout). The shapes pick
// every tile edge (16, 32, 64), clusters splitting K (1, 2, 4), f64's shorter chunks, edges
// that cut tiles and chunks, a last chunk shorter than the others, and the operands' layouts.
// f32 and f64 only: f16 and bf16 matmuls of these sizes are GEMMs.
TEST_F(SmallMatmulTest, TiledMatmulIsOneKernelWithItsEpilogue) {
  // f32 and f64; f16 and bf16 stay GEMMs (cuBLAS's tensor cores are faster at these sizes).
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Stats s = check(
        {{40, 70}, {70, 50}, {50}}, dt,
        [](const std::vector<Tensor>& t) { return tanh(matmul(t[0], t[1]) + t[2]); }, tolerance(dt),
        dtype_name(dt));
    const bool tiled = dt == DType::f32 || dt == DType::f64;
    EXPECT_EQ(s.gemms_run, tiled ? 0 : 1) << dtype_name(dt);
    EXPECT_EQ(s.kernels_run, 1) << dtype_name(dt);
  }
}

TEST_F(SmallMatmulTest, TiledMatmulLayoutsAndSizes) {
  struct Case {
    const char* name;
    std::vector<Shape> shapes;
    Fn f;
    DType dt = DType::f32;
  };
  auto mm = [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); };
  const Case cases[] = {
      {"edges cut tiles and chunks", {{33, 100}, {100, 47}}, mm},
      {"the seed step, 256 (tile 16: 16 groups of 16 threads split K)",
       {{256, 256}, {256, 256}, {256}},
       [](const std::vector<Tensor>& t) {
         return sigmoid(tanh(matmul(t[0], t[1]) + t[2]) * 0.5f + t[0]) - 0.5f;
       }},
      {"tile 64, K 16", {{1024, 16}, {16, 1024}}, mm},
      {"tile 32 (4 groups of 64 threads)", {{512, 128}, {128, 256}}, mm},
      {"clusters of 2, K 256", {{64, 256}, {256, 96}}, mm},
      {"clusters of 4, K 512", {{64, 512}, {512, 96}}, mm},
      {"clusters of 4, K 1024", {{32, 1024}, {1024, 32}}, mm},
      {"f64, tile 16", {{128, 128}, {128, 128}}, mm, DType::f64},
      {"f64, tile 32, a short last chunk", {{512, 40}, {40, 160}}, mm, DType::f64},
      {"f64, tile 16, a short last chunk", {{96, 200}, {200, 160}}, mm, DType::f64},
      {"B transposed",
       {{20, 64}, {40, 64}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], transpose(t[1], 0, 1)); }},
      {"A transposed",
       {{33, 30}, {33, 50}},
       [](const std::vector<Tensor>& t) { return matmul(transpose(t[0], 0, 1), t[1]) * 2.0f; }},
      {"A a slice at an offset",
       {{40, 129}, {129, 31}},
       [](const std::vector<Tensor>& t) { return matmul(slice(t[0], 0, 7, 30), t[1]) + 1.0f; }},
      {"batched, B broadcast", {{3, 20, 30}, {30, 17}}, mm},
      {"batched, both", {{2, 9, 40}, {2, 40, 12}}, mm},
      {"K 1", {{50, 1}, {1, 60}}, mm},
      {"the longest K", {{8, 1024}, {1024, 40}}, mm},
      {"two dots, K 1024 and 10 (clusters of 4: three blocks have no K of the second)",
       {{32, 1024}, {1024, 32}, {32, 10}, {10, 32}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) + matmul(t[2], t[3]); }},
      {"a short dot (K 1) beside a long one, B transposed: an LSTM's gates",
       {{32, 1}, {1024, 1}, {32, 256}, {1024, 256}, {1024}},
       [](const std::vector<Tensor>& t) {
         return matmul(t[0], transpose(t[1], 0, 1)) + matmul(t[2], transpose(t[3], 0, 1)) + t[4];
       }},
      {"short dots (K 3 and 4) at tile 64, not prefetched",
       {{1024, 3}, {3, 1024}, {1024, 4}, {4, 1024}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) * matmul(t[2], t[3]); }},
      {"f64, a short dot (K 2) beside a long one in clusters",
       {{32, 2}, {2, 96}, {32, 512}, {512, 96}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) + matmul(t[2], t[3]); },
       DType::f64},
      {"K 5 (not short) beside K 100, A transposed",
       {{5, 64}, {5, 64}, {64, 100}, {100, 64}},
       [](const std::vector<Tensor>& t) {
         return matmul(transpose(t[0], 0, 1), t[1]) + matmul(t[2], t[3]);
       }},
      {"two long dots, B transposed in both (an input of 8 features): the second dot's K start",
       {{32, 8}, {1024, 8}, {32, 256}, {1024, 256}},
       [](const std::vector<Tensor>& t) {
         return matmul(t[0], transpose(t[1], 0, 1)) + matmul(t[2], transpose(t[3], 0, 1));
       }},
      {"two long dots in clusters of 4",
       {{64, 512}, {512, 96}, {64, 512}, {512, 96}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) - matmul(t[2], t[3]); }},
      {"a long dot, a short one, a long one (B transposed), at tile 64",
       {{1024, 16}, {16, 1024}, {1024, 2}, {2, 1024}, {1024, 12}, {1024, 12}},
       [](const std::vector<Tensor>& t) {
         return matmul(t[0], t[1]) + matmul(t[2], t[3]) * matmul(t[4], transpose(t[5], 0, 1));
       }},
      {"two dots at tile 64 (16 epilogue elements per thread, not prefetched)",
       {{1024, 16}, {16, 1024}, {1024, 16}, {16, 1024}},
       [](const std::vector<Tensor>& t) { return matmul(t[0], t[1]) - matmul(t[2], t[3]); }},
  };
  for (const Case& c : cases) {
    Stats s = check(c.shapes, c.dt, c.f, c.dt == DType::f32 ? 2e-5 : tolerance(c.dt), c.name);
    EXPECT_EQ(s.gemms_run, 0) << c.name;
    EXPECT_EQ(s.kernels_run, 1) << c.name;
  }
}

// Random tiled kernels of one to three dots: shapes, K (short, within a chunk, across chunks
// and clusters), transposed operands and dtypes drawn from a fixed seed, each against BLAS on
// the CPU. Every dot's K loop, the prefetch of the next dot's first chunk, the along-k loads and
// the short dots meet each other here in combinations no hand-written case lists.
TEST_F(SmallMatmulTest, RandomTiledKernelsMatchBlas) {
  std::mt19937 rng(22);
  auto pick = [&](std::initializer_list<int64_t> from) {
    return *(from.begin() + std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng));
  };
  for (int c = 0; c < 24; ++c) {
    const int64_t M = pick({5, 16, 33, 64, 100}), N = pick({5, 17, 48, 96, 130});
    const DType dt = c % 5 == 4 ? DType::f64 : DType::f32;
    const int dots = 1 + c % 3;
    std::vector<Shape> shapes;
    std::vector<bool> ta, tb;
    std::string what =
        std::to_string(M) + " x " + std::to_string(N) + (dt == DType::f64 ? " f64:" : ":");
    for (int d = 0; d < dots; ++d) {
      const int64_t K = pick({1, 2, 4, 5, 17, 64, 65, 130, 300});
      ta.push_back(rng() % 3 == 0);
      tb.push_back(rng() % 2 == 0);
      shapes.push_back(ta.back() ? Shape{K, M} : Shape{M, K});
      shapes.push_back(tb.back() ? Shape{N, K} : Shape{K, N});
      what += " K " + std::to_string(K) + (ta.back() ? " A^T" : "") + (tb.back() ? " B^T" : "");
    }
    auto f = [&](const std::vector<Tensor>& t) {
      Tensor y;
      for (int d = 0; d < dots; ++d) {
        Tensor a = ta[d] ? transpose(t[2 * d], 0, 1) : t[2 * d];
        Tensor b = tb[d] ? transpose(t[2 * d + 1], 0, 1) : t[2 * d + 1];
        Tensor p = matmul(a, b);
        y = !y.defined() ? p : d == 1 ? y + p : y * p;
      }
      return tanh(y);
    };
    SCOPED_TRACE(what);
    Stats st = check(shapes, dt, f, dt == DType::f32 ? 2e-5 : tolerance(dt), what.c_str());
    EXPECT_EQ(st.gemms_run, 0);
    EXPECT_EQ(st.kernels_run, 1);
  }
}

TEST_F(SmallMatmulTest, TiledMatmulReadOtherwiseGetsAKernelOfItsOwn) {
  // Read other than at its own (row, column) — transposed, by a reduction, through the chunk
  // views of an LSTM's gates — a tiled matmul is computed by a kernel of its own (tiled dots)
  // and its reader by another: never a GEMM, whose rounding would differ from the same
  // matmul's evaluated alone (eagerly). The LSTM's gates (two matmuls and the bias) are one
  // kernel, the cell another.
  Stats t = check(
      {{30, 20}, {20, 30}, {30, 30}}, DType::f32,
      [](const std::vector<Tensor>& x) { return transpose(matmul(x[0], x[1]), 0, 1) + x[2]; }, 2e-5,
      "transposed");
  EXPECT_EQ(t.gemms_run, 0);
  EXPECT_EQ(t.kernels_run, 2);
  Stats r = check(
      {{30, 20}, {20, 30}}, DType::f32,
      [](const std::vector<Tensor>& x) { return softmax(matmul(x[0], x[1]), 1); }, 2e-5, "softmax");
  EXPECT_EQ(r.gemms_run, 0);
  EXPECT_EQ(r.kernels_run, 2);
  // An LSTM step at batch 32, two steps: each step the gates' kernel and the cell's.
  const int64_t in = 48, hidden = 40;
  const std::vector<Shape> shapes = {{64, in},     {in, 4 * hidden}, {hidden, 4 * hidden},
                                     {4 * hidden}, {32, hidden},     {32, hidden}};
  auto steps = [](const std::vector<Tensor>& t) {
    const Tensor &seq = t[0], &wx = t[1], &wh = t[2], &b = t[3];
    Tensor h = t[4], c = t[5];
    for (int i = 0; i < 2; ++i) {
      Tensor x = slice(seq, 0, 32 * i, 32 * i + 32);
      std::vector<Tensor> g = chunk(matmul(x, wx) + matmul(h, wh) + b, 4, 1);
      c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      h = sigmoid(g[3]) * tanh(c);
      g.clear();
      eval(h, c);
    }
    return concat({h, c}, 1);
  };
  Stats l = check(shapes, DType::f32, steps, 1e-4, "LSTM batch 32");
  EXPECT_EQ(l.gemms_run, 0);
  EXPECT_EQ(l.kernels_run, 4);
}

TEST_F(SmallMatmulTest, ChainedTiledMatmulsEachGetAKernel) {
  // (x @ w1) @ w2 + b: the first product is the second's operand, read at other elements'
  // indices, so a kernel of its own computes it (in tiles, not as a GEMM) before the kernel
  // of the second product and the bias.
  Stats s = check(
      {{64, 64}, {64, 64}, {64, 64}, {64}}, DType::f32,
      [](const std::vector<Tensor>& t) { return matmul(matmul(t[0], t[1]), t[2]) + t[3]; }, 2e-5,
      "chained");
  EXPECT_EQ(s.gemms_run, 0);
  EXPECT_EQ(s.kernels_run, 2);
}

TEST_F(SmallMatmulTest, SeedLoopStepsMatchBlas) {
  // The seed loop of issue 5 at d = 64 and 96, ten steps each evaluated: x is the operand of
  // the next step's matmul and replaced every step (never written in place while other
  // elements' tiles still read it).
  for (int64_t d : {64, 96}) {
    auto steps = [](const std::vector<Tensor>& t) {
      Tensor x = t[0];
      for (int i = 0; i < 10; ++i) {
        Tensor y = tanh(matmul(x, t[1]) + t[2]) * 0.5f + x;
        x = sigmoid(y) - 0.5f;
        eval(x);
      }
      return x;
    };
    Stats s = check({{d, d}, {d, d}, {d}}, DType::f32, steps, 1e-5, "seed loop");
    EXPECT_EQ(s.gemms_run, 0) << d;
    EXPECT_EQ(s.kernels_run, 10) << d;
  }
}

TEST_F(SmallMatmulTest, LargerMatmulsStayBlas) {
  const Device dev = default_device();
  Tensor a = rnd({2048, 1024}, DType::f32, dev, 50), w = rnd({1024, 1}, DType::f32, dev, 51);
  reset_stats();
  eval(matmul(a, w) + 1.0f); // one column, over 2^20 multiply-adds: cuBLAS's GEMV
  EXPECT_EQ(stats().gemms_run, 1);
  Tensor x = rnd({1, 1025}, DType::f32, dev, 52), v = rnd({1025, 4}, DType::f32, dev, 53);
  reset_stats();
  eval(matmul(x, v)); // K over 1024
  EXPECT_EQ(stats().gemms_run, 1);
  Tensor y = rnd({2, 1024}, DType::f32, dev, 54), u = rnd({1024, 513}, DType::f32, dev, 55);
  reset_stats();
  eval(matmul(y, u)); // over 2^20 multiply-adds with four rows or fewer
  EXPECT_EQ(stats().gemms_run, 1);
  Tensor p = rnd({257, 256}, DType::f32, dev, 56), q = rnd({256, 256}, DType::f32, dev, 57);
  reset_stats();
  eval(matmul(p, q)); // tiled, over 2^24 multiply-adds
  EXPECT_EQ(stats().gemms_run, 1);
  Tensor bp = rnd({64, 4, 32}, DType::f32, dev, 58), bq = rnd({64, 32, 8}, DType::f32, dev, 59);
  reset_stats();
  eval(matmul(bp, bq) + 1.0f); // 256 rows, but 4 per matrix: a batched GEMM
  EXPECT_EQ(stats().gemms_run, 1);
  // Integer matmuls keep their own reduction kernel.
  reset_stats();
  eval(matmul(reshape(arange(6, DType::i32, dev), {2, 3}),
              reshape(arange(6, DType::i32, dev), {3, 2})));
  EXPECT_EQ(stats().gemms_run, 0);
}

TEST_F(SmallMatmulTest, DefaultFusesOnlyOnTheGpu) {
  set_small_matmul(SmallMatmul::on_gpu);
  const Device dev = default_device();
  Tensor x = rnd({1, 32}, DType::f32, dev, 60), w = rnd({32, 32}, DType::f32, dev, 61);
  reset_stats();
  eval(tanh(matmul(x, w)));
  EXPECT_EQ(stats().gemms_run, dev.is_cuda() ? 0 : 1);
}

} // namespace

namespace {

// The raw f32 bits of a value, evaluated.
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v = t.astype(DType::f32).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

} // namespace

TEST_F(SmallMatmulTest, AReductionJoiningTheDotsKernelIsSplitOff) {
  // Once "the planner did not converge (small matmul read by a reduction)": layer_norm's
  // reductions joined the kernel of the matmul's dot products, and the retry (materialize the
  // matmul) changed nothing, since the matmul already was that kernel's output.
  const Device dev = default_device();
  Tensor b = from_vector<bool>({true, false}, Shape{2, 1}, dev);
  Tensor x = from_vector<float>({0.5f, -1.5f}, Shape{2, 1}, dev);
  Tensor w = from_vector<float>({2.0f}, Shape{1}, dev);
  Tensor u = b - layer_norm(x);
  Tensor r = min(matmul(exp(b), w), {0});
  eval(r, u);
  EXPECT_FLOAT_EQ(r.item<float>(), 2.0f);                            // min(e * 2, 1 * 2)
  EXPECT_EQ(u.to_vector<float>(), (std::vector<float>{1.0f, 0.0f})); // layer_norm of one element
  // The fuzzer's case (seed 154275): softmax feeding a matmul that a later mean also reads.
  Tensor v0 = randn({1, 1, 4}, DType::f16, dev);
  Tensor v3 = softmax(v0, 2);
  Tensor v6 = randn({4, 4}, DType::f64, dev);
  Tensor v7 = matmul(v3, v6);
  eval(v7);
  Tensor v10 = logical_or(v3, v7);
  Tensor v11 = mean(v3, {1, 2});
  eval(v10, v11);
  EXPECT_EQ(v11.shape(), (Shape{1}));
}

// A few-column matmul read through a view that changes its shape (a slice, a reshape to other
// dims) is computed by a kernel of its own, as eager mode computes it: the dot layout splits
// each element's K by the reading kernel's size, so a reader of another size would round it
// otherwise on CUDA. Through a view that only drops a dim of one (matrix times vector) it stays
// in its reader's kernel.
TEST_F(SmallMatmulTest, AFewColumnMatmulReadThroughAViewGetsAKernelOfItsOwn) {
  Stats sliced = check(
      {{64, 32}, {32, 1}}, DType::f32,
      [](const std::vector<Tensor>& t) { return slice(matmul(t[0], t[1]), 0, 0, 10) + 1.0f; }, 2e-5,
      "sliced");
  EXPECT_EQ(sliced.gemms_run, 0);
  EXPECT_EQ(sliced.kernels_run, 2);
  Stats reshaped = check(
      {{512, 32}, {32, 1}, {64, 32}, {32, 8}}, DType::f32,
      [](const std::vector<Tensor>& t) {
        return reshape(matmul(t[0], t[1]), {64, 8}) + matmul(t[2], t[3]);
      },
      2e-5, "reshaped beside a tiled matmul");
  EXPECT_EQ(reshaped.gemms_run, 0);
  EXPECT_EQ(reshaped.kernels_run, 2);
  Stats vector = check(
      {{64, 32}, {32}}, DType::f32,
      [](const std::vector<Tensor>& t) { return tanh(matmul(t[0], t[1])); }, 2e-5, "vector");
  EXPECT_EQ(vector.kernels_run, 1);
}

TEST_F(SmallMatmulTest, ReadersOfAMatmulDoNotChangeItsBits) {
  // Lazy and eager agree bit for bit whoever reads the matmul: a reduction, a view, a
  // broadcast or an elementwise op in the same evaluation. (Read by a reduction, a tiled matmul
  // went to BLAS lazily and was tiled dots eagerly: ~3e-6 apart in 918 of 1,045 elements.)
  const Device dev = default_device();
  struct Case {
    Shape a, b;
  };
  for (const Case& c : {Case{{3, 16}, {16, 5}}, Case{{55, 19}, {19, 19}}, Case{{2, 33}, {33, 7}},
                        Case{{17, 64}, {64, 9}}, Case{{40, 64}, {64, 1}}, Case{{9, 20}, {20, 3}}}) {
    Tensor a = rnd(c.a, DType::f32, dev, 7), m = rnd(c.b, DType::f32, dev, 8);
    // The matmul is a temporary each time (nobody holds it), so each reader may absorb it.
    // Each reader in an evaluation of its own, so that it alone reads the matmul.
    auto program = [&] {
      Tensor s = sum(matmul(a, m), {1}, true); // a reduction
      eval(s);
      Tensor z = max(transpose(matmul(a, m), 0, 1), {1}); // through a view
      eval(z);
      Tensor e = exp(matmul(a, m)) * 0.5f; // elementwise
      eval(e);
      Tensor x = expand(unsqueeze(matmul(a, m), 0), {2, c.a[0], c.b[1]}) + 1.0f; // broadcast
      eval(x);
      return std::vector<std::vector<uint32_t>>{bits(s), bits(z), bits(e), bits(x)};
    };
    auto lazy = program();
    set_eager(true);
    auto eager = program();
    set_eager(false);
    for (size_t i = 0; i < lazy.size(); ++i)
      EXPECT_EQ(lazy[i], eager[i]) << "value " << i << " of a " << c.a << " x " << c.b << " matmul";
  }
}

TEST_F(SmallMatmulTest, ShortDotsSumInOrderFromZero) {
  // A tiled matmul's dots of K <= 4 are summed by each element itself (gemm_short_dots): along
  // k from +0 with fmas, then + 0 for the tile's other K groups' partial sums (16 groups at tile
  // 16, as here): the bits the tile gives, a product that underflows to -0 ending as +0. Beside
  // a long dot, in one kernel, both keep the bits each has alone (eager mode).
  if (default_device().is_cpu()) GTEST_SKIP() << "the CUDA kernels' sum order";
  const Device dev = default_device();
  auto bits_of = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (int64_t K : {1, 2, 3, 4, 5}) {
    std::vector<float> xv = rnd({48, K}, DType::f32, Device::cpu(), 3).to_vector<float>();
    std::vector<float> wv = rnd({K, 80}, DType::f32, Device::cpu(), 4).to_vector<float>();
    for (int64_t k = 0; k < K; ++k) { // row 0 times column 0 underflows to -0 in every product
      xv[size_t(k)] = -1e-30f;
      wv[size_t(k * 80)] = 1e-30f;
    }
    Tensor x = from_vector(xv, {48, K}, dev), w = from_vector(wv, {K, 80}, dev);
    Tensor h = rnd({48, 300}, DType::f32, dev, 5), u = rnd({80, 300}, DType::f32, dev, 6);
    eval(x, w);
    const std::vector<float> y = matmul(x, w).to_vector<float>();
    for (int64_t m = 0; m < 48; ++m)
      for (int64_t n = 0; n < 80; ++n) {
        float want = 0;
        for (int64_t k = 0; k < K; ++k) want = std::fmaf(xv[m * K + k], wv[k * 80 + n], want);
        want = want + 0.0f;
        if (K <= 4)
          ASSERT_EQ(bits_of(y[m * 80 + n]), bits_of(want))
              << "K " << K << " at " << m << ", " << n << ": " << y[m * 80 + n] << " vs " << want;
        else
          ASSERT_NEAR(y[m * 80 + n], want, 1e-5) << "K " << K << " at " << m << ", " << n;
      }
    EXPECT_EQ(bits_of(y[0]), 0u) << "K " << K << ": -0 (an underflow) plus the other groups' +0";
    auto program = [&] { return bits(matmul(x, w) + matmul(h, transpose(u, 0, 1))); };
    reset_stats();
    const auto lazy = program();
    EXPECT_EQ(stats().kernels_run, 1) << "K " << K;
    set_eager(true);
    const auto eager = program();
    set_eager(false);
    EXPECT_EQ(lazy, eager) << "K " << K;
  }
}

TEST_F(SmallMatmulTest, AMatmulBroadcastByItsReaderIsComputedOnce) {
  // The fuzzer's seed 5016966: an op's implicit broadcast of a small matmul (not a view op)
  // once sent the retry to the op's other operand, and planning never converged.
  const Device dev = default_device();
  Tensor a = rnd({1, 4}, DType::f32, dev, 3), w = rnd({4, 6}, DType::f32, dev, 4);
  Tensor col = rnd({8, 1}, DType::f32, dev, 5);
  Tensor m = matmul(a, w);
  set_small_matmul(SmallMatmul::blas);
  Tensor want = (col * matmul(a, w)).to(Device::cpu());
  eval(want);
  set_small_matmul(SmallMatmul::everywhere);
  Tensor got = col * m;
  m = Tensor();
  expect_close(got.to(Device::cpu()), want, 2e-5, "an (8, 1) column times a (1, 6) matmul");
}

namespace {

// A training step's weight gradient: the sum over time steps of outer products h_t^T @ g_t, one
// dot per step. A kernel takes at most 16 (their shared memory), so 40 are three kernels, each
// continuing from the partial sum of the one before (not a kernel per matmul).
TEST_F(SmallMatmulTest, ManyDotsInOneSumAreSplitIntoFewKernels) {
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<Shape> shapes(2, Shape{40, 24});
    Stats s = check(
        shapes, dt,
        [](const std::vector<Tensor>& in) {
          Tensor acc;
          for (int64_t t = 0; t < 40; ++t) {
            Tensor outer = matmul(transpose(slice(in[0], 0, t, t + 1), 0, 1),
                                  slice(in[1], 0, t, t + 1)); // [24, 1] @ [1, 24]
            acc = acc.defined() ? acc + outer : outer;
          }
          return acc;
        },
        tolerance(dt), "sum of 40 outer products");
    EXPECT_EQ(s.gemms_run, 0);
    EXPECT_EQ(s.kernels_run, 3) << dtype_name(dt);
  }
}

} // namespace

namespace {

// A training step of an LSTM (forward over 8 steps, kiln::grad, Adam): the gate activations
// are read by the forward step and by the backward, so they are written to memory; each is
// written by the first kernel that reads it, not by a kernel of its own (147 kernels before).
TEST_F(SmallMatmulTest, TrainingStepWritesSharedValuesFromTheirFirstReader) {
  const Device dev = default_device();
  manual_seed(3);
  Tensor wx = (randn({1, 64}) * 0.5f).to(dev).requires_grad_();
  Tensor wh = (randn({16, 64}) * 0.25f).to(dev).requires_grad_();
  Tensor seq = randn({8, 1, 1}).to(dev);
  eval(wx, wh, seq);
  auto step = [&] {
    Tensor h = zeros({1, 16}, DType::f32, dev), c = h, loss;
    for (int t = 0; t < 8; ++t) {
      auto g = chunk(matmul(reshape(slice(seq, 0, t, t + 1), {1, 1}), wx) + matmul(h, wh), 4, 1);
      c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      h = sigmoid(g[3]) * tanh(c);
      Tensor e = mean(h * h);
      loss = loss.defined() ? loss + e : e;
    }
    return grad(loss, {wx, wh});
  };
  auto g = step();
  reset_stats();
  eval(g);
  const Stats with = stats();
  EXPECT_EQ(with.gemms_run, 0);
  EXPECT_LE(with.kernels_run, 60) << with;
  // The same gradients as the CPU backend's BLAS plan.
  set_small_matmul(SmallMatmul::blas);
  auto want = step();
  for (int i = 0; i < 2; ++i) expect_close(g[i], want[i], 1e-5, "gradient");
}

} // namespace

namespace {

// nn::Linear's `x @ W^T` over `steps` time steps at batch 2, and W's gradient: the sum of the
// steps' products g_t^T x_t, formed as plain products (not transposes of x_t^T g_t, each a
// matmul read through a view: a replanning retry and a kernel of its own per step), so they sum
// as dot products, 16 to a kernel. Checked against the sum computed in double on the host.
Stats linear_weight_gradient_over_time(int64_t steps) {
  const Device dev = default_device();
  Tensor w = rnd({32, 16}, DType::f32, dev, 5).requires_grad_();
  Tensor xs = rnd({steps, 2, 16}, DType::f32, dev, 6);
  Tensor loss;
  for (int64_t t = 0; t < steps; ++t) {
    Tensor y = tanh(matmul(reshape(slice(xs, 0, t, t + 1), {2, 16}), transpose(w, 0, 1)));
    loss = loss.defined() ? loss + sum(y) : sum(y);
  }
  Tensor g = grad(loss, {w})[0];
  reset_stats();
  eval(g);
  const Stats s = stats();
  std::vector<float> xv = xs.to_vector<float>(), wv = w.to_vector<float>(),
                     gv = g.to_vector<float>();
  for (int o = 0; o < 32; ++o)
    for (int i = 0; i < 16; ++i) {
      double want = 0;
      for (int64_t t = 0; t < steps; ++t)
        for (int b = 0; b < 2; ++b) {
          const float* x = &xv[(t * 2 + b) * 16];
          double pre = 0;
          for (int k = 0; k < 16; ++k) pre += double(x[k]) * wv[o * 16 + k];
          want += (1 - std::tanh(pre) * std::tanh(pre)) * x[i];
        }
      EXPECT_NEAR(gv[o * 16 + i], want, 1e-4 * std::max(1.0, std::fabs(want))) << o << "," << i;
    }
  return s;
}

// 20 steps: 45 kernels and 24 retries before dot products summed; then 26 and the 5 retries
// of the 16-dot splits, one a round; since cut_for_dots, one round finds them all.
TEST_F(SmallMatmulTest, LinearWeightGradientOverTimeSumsWithoutRetries) {
  const Stats s = linear_weight_gradient_over_time(20);
  EXPECT_LE(s.plan_retries, 1) << s;
  EXPECT_LE(s.kernels_run, 30) << s;
}

// 64 steps: the kernels over the dots' budget are cut where a round of planning per cut would
// cut them (the same 50 kernels), but every cut is found in one round (kernel_builder.cpp,
// cut_for_dots), where one cut a round took 48 rounds of grouping the whole graph.
TEST_F(SmallMatmulTest, TheDotsBudgetsCutsAreFoundInOneRound) {
  const Stats s = linear_weight_gradient_over_time(64);
  EXPECT_LE(s.plan_retries, 1) << s;
  EXPECT_EQ(s.kernels_run, 50) << s;
}

} // namespace

// The seeds' loop recorded for 200 steps without eval: each step's x is read by the next step's
// dot product, which a kernel cannot compute from its own output, so every step's x is written.
// The planner finds them in a few passes over the graph, not one pass per step (which took
// 200 rounds of grouping the whole graph: ~70 ms on an H100's host for a loop flush): each
// round writes the operands a kernel reached before its parameter budget ran out, so the
// rounds do not grow with the steps (10 for 200 steps and for 800).
TEST_F(SmallMatmulTest, ALoopOfDotsIsPlannedInFewRounds) {
  const Device dev = default_device();
  Tensor w = rnd({8, 8}, DType::f32, dev, 7, 0.3f), b = rnd({8}, DType::f32, dev, 8, 0.1f);
  Tensor x = rnd({8, 8}, DType::f32, dev, 9);
  eval(w, b, x);
  std::vector<float> want = x.to_vector<float>(), wv = w.to_vector<float>(),
                     bv = b.to_vector<float>();
  constexpr int kSteps = 200;
  for (int i = 0; i < kSteps; ++i) {
    Tensor y = matmul(x, w);
    y = tanh(y + b) * 0.5f + x;
    x = sigmoid(y) - 0.5f;
  }
  reset_stats();
  eval(x);
  const Stats s = stats();
  EXPECT_LE(s.plan_retries, 10) << s;
  // One kernel per step, as when planned step by step, and a few where chains of more than 512
  // ops are cut.
  EXPECT_GE(s.kernels_run, kSteps) << s;
  EXPECT_LE(s.kernels_run, kSteps + 4) << s;
  for (int i = 0; i < kSteps; ++i) { // in double on the host
    std::vector<float> next(64);
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        double acc = 0;
        for (int k = 0; k < 8; ++k) acc += double(want[r * 8 + k]) * wv[k * 8 + c];
        const double y = std::tanh(acc + bv[c]) * 0.5 + want[r * 8 + c];
        next[r * 8 + c] = static_cast<float>(1 / (1 + std::exp(-y)) - 0.5);
      }
    want = next;
  }
  const std::vector<float> got = x.to_vector<float>();
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << i;
}

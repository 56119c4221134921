// The stand-in interpreter (codegen/standin.h) against the kernels NVRTC compiles, bit for bit:
// every op of the catalogue, in every dtype, through every layout it covers (elementwise,
// vectors, tiled transposes, broadcasts, dot products with and without clusters, GEMM tiles, row
// and column reductions, segmented kernels), on the GPU. Each case runs twice on fresh plans and
// identical inputs, once with KILN_COMPILE=standin (the interpreter runs everything it covers,
// binaries loaded or not: every such kernel must have run on it) and once with KILN_COMPILE=sync;
// ctest sets KILN_POISON_ALLOCATIONS, so an element either path skips shows.
#include "../scoped_env.h"
#include "engine/kernel_observer.h"
#include "runtime/cuda/kernel_cache.h"

#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

using Outputs = std::vector<Tensor>;
using Case = std::function<Outputs()>;

struct Standin : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_default_device(Device::cuda(0));
    set_eager(false);
    set_idle_flush(0);
    eval(zeros({1}) + 1); // the backend exists from here on
    const std::string why = detail::cuda_standin_unavailable_reason(0);
    ASSERT_EQ(why, "") << "the stand-in interpreter does not run on this GPU";
  }
  void TearDown() override {
    set_default_device(Device::cpu());
    set_eager(false);
    set_small_matmul(SmallMatmul::on_gpu);
  }
};

int64_t standin_launches() {
  return detail::cuda_kernel_cache_stats().standin_launches;
}

// Every output's values as bit patterns (floating values widened to double exactly).
std::vector<std::vector<uint64_t>> bits_of(const Outputs& outs) {
  std::vector<std::vector<uint64_t>> all;
  for (const Tensor& t : outs) {
    std::vector<uint64_t> b(static_cast<size_t>(t.numel()));
    if (is_floating(t.dtype())) {
      std::vector<double> v = t.to_vector<double>();
      std::memcpy(b.data(), v.data(), v.size() * 8);
    } else {
      std::vector<int64_t> v = t.to_vector<int64_t>();
      std::memcpy(b.data(), v.data(), v.size() * 8);
    }
    all.push_back(std::move(b));
  }
  return all;
}

// Whether the stand-in covers a kernel (codegen/standin.h) on this GPU: what it launches.
bool covered(const detail::FusedKernel& k) {
  const detail::CudaTarget& t = detail::cuda_kernel_cache(0)->target();
  const std::vector<void*> aligned(64, reinterpret_cast<void*>(uintptr_t(1) << 20));
  const detail::CudaVariant v = detail::choose_variant(k, aligned, t);
  return detail::launch_for(k, v, t).grid > 0 && detail::plan_standin(k, v, t).has_value();
}

struct CaseRun {
  std::vector<std::vector<uint64_t>> bits;
  int64_t standins = 0;                  // launches of the stand-in
  int64_t covered = 0;                   // launches of kernels it covers
  int64_t reductions = 0, segmented = 0; // kernels of those kinds run
};

// The case's outputs under KILN_COMPILE=mode, on fresh plans (a cached plan's batch keeps the
// kernels it was prepared with) and the same random inputs.
CaseRun run(const char* mode, const Case& c) {
  kt::ScopedEnv env("KILN_COMPILE", mode);
  set_plan_cache_limit(0);
  set_plan_cache_limit(256);
  manual_seed(11);
  CaseRun r;
  const int64_t before = standin_launches();
  detail::KernelObserver prev = detail::set_kernel_observer([&r](const detail::FusedKernel& k) {
    r.covered += covered(k);
    r.reductions += k.kind == detail::FusedKernel::Kind::reduce;
    r.segmented += k.segmented();
  });
  Outputs outs = c();
  for (Tensor& t : outs) eval(t);
  detail::set_kernel_observer(prev);
  r.standins = standin_launches() - before;
  r.bits = bits_of(outs);
  return r;
}

// The interpreter's results are the compiled kernels', and it ran every kernel it covers.
// Returns the interpreted run.
CaseRun expect_same_bits(const std::string& what, const Case& c) {
  SCOPED_TRACE(what);
  const CaseRun interpreted = run("standin", c), compiled = run("sync", c);
  EXPECT_GT(interpreted.covered, 0) << "no kernel of this case is one the stand-in covers";
  EXPECT_EQ(interpreted.standins, interpreted.covered) << "the stand-in did not run them all";
  EXPECT_EQ(compiled.standins, 0);
  EXPECT_EQ(interpreted.bits.size(), compiled.bits.size());
  if (interpreted.bits.size() != compiled.bits.size()) return interpreted;
  for (size_t o = 0; o < compiled.bits.size(); ++o) {
    const std::vector<uint64_t>&a = interpreted.bits[o], &b = compiled.bits[o];
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size()) continue;
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < b.size(); ++i)
      if (a[i] != b[i] && differ++ == 0) first = i;
    EXPECT_EQ(differ, 0u) << "output " << o << ": " << differ << " of " << b.size()
                          << " elements differ, the first at " << first;
  }
  return interpreted;
}

const DType kFloat[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

Tensor chain(const Tensor& x, const Tensor& y) { // the 9-op chain
  Tensor t = tanh(x * y + 1);
  Tensor s = sigmoid(t);
  return relu(s * x + (1 - s) * y);
}

TEST_F(Standin, UnaryOpsInEveryFloatType) {
  for (DType dt : kFloat)
    expect_same_bits(dtype_name(dt), [dt] {
      Tensor x = randn({33, 20}, dt), p = rand({33, 20}, dt) + 0.5;
      return Outputs{exp(x),  log(p),     log1p(p), sqrt(p), rsqrt(p), sin(x), cos(x),
                     tanh(x), sigmoid(x), gelu(x),  relu(x), abs(x),   neg(x)};
    });
}

TEST_F(Standin, BinaryOpsComparesAndSelectsInEveryFloatType) {
  for (DType dt : kFloat)
    expect_same_bits(dtype_name(dt), [dt] {
      Tensor x = randn({33, 20}, dt), y = randn({33, 20}, dt), p = rand({33, 20}, dt) + 0.5;
      return Outputs{pow(p, y),
                     pow(x, 2),
                     pow(p, 0.5),
                     maximum(x, y),
                     minimum(x, y),
                     x / y,
                     1 - x,
                     2 / p,
                     clamp(x, -0.5, 0.5),
                     x * 1e-3 + y,
                     chain(x, y),
                     where(x > y, x, y),
                     where(x <= 0, 0.0, x),
                     eq(x, y),
                     ne(x, 0.5),
                     lt(x, y),
                     ge(x, y),
                     logical_and(x > 0, y < 0),
                     logical_not(x > p)};
    });
}

TEST_F(Standin, CastsBetweenEveryPairOfTypes) {
  const DType all[] = {DType::f32, DType::f64, DType::f16,    DType::bf16,
                       DType::i32, DType::i64, DType::boolean};
  for (DType from : all)
    expect_same_bits(dtype_name(from), [&all, from] {
      Tensor x = cast(randn({7, 33}) * 1e3, from);
      eval(x);
      Outputs out;
      for (DType to : all) out.push_back(cast(x * 2, to));
      return out;
    });
}

TEST_F(Standin, IntegerArithmeticWrapsAndDividesAsCompiled) {
  for (DType dt : {DType::i32, DType::i64})
    expect_same_bits(dtype_name(dt), [dt] {
      Tensor a = cast(randn({40, 9}) * 1e5, dt), b = cast(randn({40, 9}) * 7, dt);
      eval(a, b);
      return Outputs{a + b,
                     a - b,
                     a * b * a,
                     -a,
                     abs(b),
                     relu(a),
                     pow(b, 3),
                     maximum(a, b),
                     minimum(a, b),
                     a > b,
                     eq(a, b),
                     where(a > 0, a, b),
                     cast(a, DType::f32) / cast(b, DType::f32)};
    });
}

TEST_F(Standin, RandomNumbersAndRangesAreTheCompiledKernels) {
  for (DType dt : kFloat)
    expect_same_bits(dtype_name(dt), [dt] {
      return Outputs{rand({1000}, dt), randn({3, 333}, dt) * 2 + 1, arange(0, 50, 0.5, dt) * 3};
    });
}

TEST_F(Standin, BroadcastsSlicesAndTransposedReads) {
  for (DType dt : kFloat)
    expect_same_bits(dtype_name(dt), [dt] {
      Tensor x = randn({64, 96}, dt), row = randn({96}, dt), col = randn({64, 1}, dt);
      Tensor big = randn({256, 512}, dt);
      eval(x, row, col, big);
      return Outputs{x * row + col,
                     transpose(x, 0, 1) + 1,
                     slice(x, 1, 3, 50, 2) * 2,
                     exp(transpose(big, 0, 1)) * 0.5,
                     big * 2 + 1,
                     tanh(big - sum(big, {1}, true))};
    });
}

TEST_F(Standin, DerivativesOfActivations) {
  for (DType dt : {DType::f32, DType::f64})
    expect_same_bits(dtype_name(dt), [dt] {
      Tensor w = randn({33, 20}, dt).requires_grad_();
      return Outputs{grad(sum(tanh(w) * sigmoid(w)), {w})[0]};
    });
}

// Small matmuls computed inside the kernel that reads them (the dot layout): a vector times a
// matrix with an epilogue, rows times a transposed weight, an LSTM cell's eight dot products
// (whose few element groups split K over a cluster of blocks on sm_90), and mixed K.
TEST_F(Standin, DotProductsSplitAndAddedAsCompiled) {
  set_small_matmul(SmallMatmul::everywhere);
  for (DType dt : kFloat) {
    expect_same_bits(std::string("vector times matrix ") + dtype_name(dt), [dt] {
      Tensor v = randn({20}, dt), w = randn({20, 12}, dt), b = randn({12}, dt);
      return Outputs{tanh(matmul(v, w) + b)};
    });
    expect_same_bits(std::string("rows times a transposed weight ") + dtype_name(dt), [dt] {
      Tensor x = randn({2, 300}, dt), w = randn({48, 300}, dt);
      return Outputs{relu(matmul(x, transpose(w, 0, 1))) * 2};
    });
    // 3,000 and 40,000 elements: 16 and 32 of them per block (dot_bx), so that a warp holds 2
    // rows of a column's partial sums, or 1; at 40,000 blocks take a second run of elements.
    for (int64_t n : {3000, 40000})
      expect_same_bits(std::string("wide vector times matrix ") + std::to_string(n) + " " +
                           dtype_name(dt),
                       [dt, n] {
                         Tensor v = randn({1, 20}, dt), w = randn({20, n}, dt);
                         return Outputs{sigmoid(matmul(v, w))};
                       });
    expect_same_bits(std::string("lstm cell ") + dtype_name(dt), [dt] {
      const int64_t H = 256;
      Tensor x = randn({1, 64}, dt), h = randn({1, H}, dt), c = randn({1, H}, dt);
      Tensor wx = randn({64, 4 * H}, dt) * 0.1, wh = randn({H, 4 * H}, dt) * 0.1;
      Tensor g = matmul(x, wx) + matmul(h, wh);
      Tensor i = sigmoid(slice(g, 1, 0, H)), f = sigmoid(slice(g, 1, H, 2 * H));
      Tensor o = sigmoid(slice(g, 1, 2 * H, 3 * H)), u = tanh(slice(g, 1, 3 * H, 4 * H));
      Tensor c2 = f * c + i * u;
      return Outputs{o * tanh(c2), c2};
    });
  }
}

// Matrices of dot products (the GEMM-tile layout): tiles of 16, 32 and 64, K groups, clusters on
// sm_90, a K that ends inside a chunk, a batch with a broadcast B, two dots in one kernel, and a
// dot short enough for each element to sum alone (an RNN's input of one feature).
TEST_F(Standin, MatricesOfDotProductsSumAsTheirTiles) {
  set_small_matmul(SmallMatmul::everywhere);
  for (DType dt : kFloat) {
    expect_same_bits(std::string("seed step ") + dtype_name(dt), [dt] {
      Tensor x = randn({64, 64}, dt), w = randn({64, 64}, dt) * 0.125, b = randn({64}, dt);
      Tensor y = tanh(matmul(x, w) + b) * 0.5 + x;
      return Outputs{sigmoid(y) - 0.5};
    });
    for (int64_t m : {24, 256, 600})
      expect_same_bits(std::string("square ") + std::to_string(m) + " " + dtype_name(dt), [dt, m] {
        Tensor a = randn({m, 300}, dt), b = randn({300, m}, dt);
        return Outputs{matmul(a, b) * 0.5};
      });
    expect_same_bits(std::string("batched, transposed, two dots, short ") + dtype_name(dt), [dt] {
      Tensor bx = randn({3, 9, 20}, dt), mw = randn({20, 12}, dt);
      Tensor a = randn({40, 33}, dt), w = randn({48, 33}, dt), u = randn({40, 1}, dt);
      Tensor v = randn({1, 48}, dt);
      return Outputs{matmul(bx, mw), matmul(a, transpose(w, 0, 1)) + matmul(u, v),
                     matmul(transpose(a, 0, 1), a) * 2};
    });
  }
}

// Reductions (the row and column layouts): each interpreting thread folds the elements the
// compiled kernel's thread folds, in its order, and the block combines them in the same tree:
// rows read as vectors and element by element (a slice), rows longer than a block's walk, more
// rows than blocks, columns with vectors of V and without, several passes (softmax, layer
// norm), f16/bf16 sums through float partials, f64 sums in double-double.
TEST_F(Standin, ReductionsFoldAndCombineAsCompiled) {
  for (DType dt : kFloat)
    EXPECT_GE(expect_same_bits(dtype_name(dt),
                               [dt] {
                                 Tensor x = randn({37, 1000}, dt), wide = randn({2, 70000}, dt);
                                 Tensor tall = randn({3000, 24}, dt), odd = randn({333, 7}, dt),
                                        many = randn({5000, 40}, dt);
                                 eval(x, wide, tall, odd, many);
                                 Tensor cut = slice(x, 1, 1, 998);
                                 return Outputs{sum(x, {1}),
                                                mean(x, {1}),
                                                max(x, {1}),
                                                min(cut, {1}),
                                                argmax(x, 1),
                                                sum(cut * 3, {1}),
                                                sum(wide, {1}),
                                                mean(wide),
                                                sum(many, {1}),
                                                sum(tall, {0}),
                                                max(tall, {0}),
                                                argmax(tall, 0),
                                                mean(odd, {0}),
                                                sum(exp(odd), {0}),
                                                softmax(x, -1),
                                                softmax(tall, 0),
                                                x - mean(x, {1}, true),
                                                layer_norm(x),
                                                var(tall, {0})};
                               })
                  .reductions,
              15);
}

// Sums whose order shows: values spread over so many binades that their double (f32, f16,
// bf16) or float-partial (f16/bf16 vectors) sums round, so that only the compiled order of
// folds and combines gives the compiled bits.
TEST_F(Standin, SumsOfWidelySpreadValuesAddInTheCompiledOrder) {
  for (DType dt : kFloat)
    expect_same_bits(dtype_name(dt), [dt] {
      const double spread = dt == DType::f16 ? 2.5 : 9;
      auto wide = [&](Shape s) { return randn(s, dt) * exp(randn(s, dt) * spread); };
      Tensor rows = wide({37, 4096}), tall = wide({3000, 24}), odd = wide({1001, 7});
      eval(rows, tall, odd);
      return Outputs{sum(rows, {1}), mean(slice(rows, 1, 1, 4095), {1}),
                     sum(tall, {0}), mean(odd, {0}),
                     sum(rows),      rows - mean(rows, {1}, true)};
    });
}

// Integer and boolean reductions, ties and NaN: argmax takes the first maximum, NaN wins.
TEST_F(Standin, IntegerReductionsTiesAndNaN) {
  expect_same_bits("integers", [] {
    Tensor a = cast(randn({50, 300}) * 1e4, DType::i32),
           b = cast(randn({300, 9}) * 1e9, DType::i64);
    eval(a, b);
    return Outputs{sum(a, {1}), max(a, {1}),  argmax(a, 1),    sum(b, {0}),
                   min(b, {0}), argmax(b, 0), sum(a > 0, {1}), sum(b < 0, {0})};
  });
  for (DType dt : kFloat)
    expect_same_bits(std::string("ties and NaN ") + dtype_name(dt), [dt] {
      Tensor x = randn({40, 500}, dt);
      Tensor ties = cast(cast(x * 2, DType::i32), dt), nan = where(x > 2.5, x / 0.0 * 0.0, x);
      return Outputs{argmax(ties, 1), argmax(ties, 0), max(nan, {1}),
                     argmax(nan, 1),  min(nan, {0}),   sum(nan, {1})};
    });
}

// Segmented kernels (an optimizer's updates of several parameters in one launch): each block
// runs the elementwise Program of its segment.
TEST_F(Standin, SegmentedKernelsRunEverySegment) {
  const CaseRun r = expect_same_bits("adam steps", [] {
    manual_seed(5);
    nn::Linear a(40, 33), b(33, 3);
    optim::Adam opt(nn::join({a.parameters(), b.parameters()}), 0.01);
    Tensor x = randn({16, 40});
    for (int s = 0; s < 3; ++s) {
      Tensor loss = mean(tanh(b(tanh(a(x)))) * 0.5);
      opt.step(grad(loss, optim::tensors(nn::join({a.parameters(), b.parameters()}))));
    }
    return Outputs{a.weight, a.bias, b.weight, b.bias};
  });
  EXPECT_GE(r.segmented, 3) << "the updates were not one segmented kernel per step";
}

// A loop without eval: the interpreter's steps feed each other as compiled ones would.
TEST_F(Standin, ARecurrentLoopGivesTheCompiledLoopsBits) {
  expect_same_bits("seed cell loop", [] {
    Tensor w = randn({64, 64}) * 0.2, u = randn({64}) * 0.1, h = zeros({64});
    eval(w, u, h);
    for (int t = 0; t < 20; ++t) h = tanh(matmul(w, h) + u * float(t));
    return Outputs{h};
  });
}

} // namespace

namespace {

// A kernel structure no earlier run has compiled: a chain of ops picked by a random number.
Tensor fresh_chain(const Tensor& x, uint64_t pick) {
  Tensor y = x;
  for (int i = 0; i < 16; ++i, pick /= 5) {
    switch (pick % 5) {
    case 0:
      y = y * 1.5f + 0.25f;
      break;
    case 1:
      y = tanh(y);
      break;
    case 2:
      y = sigmoid(y) - 0.5f;
      break;
    case 3:
      y = abs(y) * -1.0f;
      break;
    default:
      y = relu(y) + y;
      break;
    }
  }
  return y;
}

TEST_F(Standin, BackgroundCompilesSwapTheirBinariesInAndKeepTheBits) {
  kt::ScopedEnv env("KILN_COMPILE", "background");
  const uint64_t pick = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  Tensor x = randn({3000});
  eval(x);
  const int64_t standins = standin_launches();
  const int64_t builds = detail::cuda_kernel_cache_stats().background_builds;
  Tensor first = fresh_chain(x, pick);
  const std::vector<float> expected = first.to_vector<float>();
  EXPECT_GT(standin_launches(), standins) << "a new kernel's first run waited for NVRTC";
  EXPECT_EQ(detail::cuda_kernel_cache_stats().background_builds, builds + 1);
  detail::cuda_finish_background_builds();
  const int64_t after = standin_launches();
  for (int run = 0; run < 5; ++run)
    EXPECT_EQ(fresh_chain(x, pick).to_vector<float>(), expected) << "run " << run;
  EXPECT_EQ(standin_launches(), after) << "the compiled binary did not replace the stand-in";
}

} // namespace

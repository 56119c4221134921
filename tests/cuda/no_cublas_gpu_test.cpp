// Without cuBLAS (kiln::set_cublas(false), KILN_CUBLAS=0): every floating matmul on CUDA is a
// generated kernel's, at any size and in any layout, and agrees with the CPU backend's BLAS to
// rounding; a process that multiplies this way never loads libcublas. Each case also runs with
// cuBLAS on, where the large ones are cuBLAS calls: the counts can fail.
#include "../scoped_env.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <link.h>

using namespace kiln;

namespace {

struct NoCublasGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
  }
  void TearDown() override { set_cublas(true); }
};

struct Case {
  const char* what;
  Shape a, b; // as stored; a_t / b_t: multiplied through a transposed view
  bool a_t, b_t;
  DType dtype;
  double tolerance; // of the largest difference, relative to the largest |result|
  bool cublas_by_default;
};

const Case kCases[] = {
    {"f32 weight gradient, 2^27 multiply-adds, A transposed",
     {512, 1024},
     {512, 256},
     true,
     false,
     DType::f32,
     1e-5,
     true},
    {"f32 few columns past 2^20", {8192, 256}, {256, 1}, false, false, DType::f32, 1e-5, true},
    {"f32 one row, K 2048", {1, 2048}, {2048, 256}, false, false, DType::f32, 1e-5, true},
    {"f32 batched, 3 rows a matrix",
     {6, 3, 300},
     {6, 300, 200},
     false,
     false,
     DType::f32,
     1e-5,
     true},
    {"f32 batched tiles, K 1536, B transposed",
     {2, 256, 1536},
     {2, 300, 1536},
     false,
     true,
     DType::f32,
     1e-5,
     true},
    {"f64, 2^26.6 multiply-adds", {300, 700}, {700, 500}, false, false, DType::f64, 1e-13, true},
    {"f16 tiles", {256, 512}, {512, 384}, false, false, DType::f16, 2e-3, true},
    {"bf16 batched tiles", {2, 64, 128}, {2, 128, 96}, false, false, DType::bf16, 1.6e-2, true},
    {"f32 small tile (kiln's kernel either way)",
     {64, 64},
     {64, 64},
     false,
     false,
     DType::f32,
     1e-5,
     false},
};

Tensor last_two_swapped(const Tensor& t) {
  const int r = static_cast<int>(t.shape().size());
  return transpose(t, r - 2, r - 1);
}

// The largest |gpu - cpu| over the largest |cpu|, and how many cuBLAS calls the GPU's took.
struct Outcome {
  double relative = 0;
  int64_t gemms = 0;
};

Outcome run(const Case& c) {
  Tensor a = randn(c.a, c.dtype, Device::cpu()), b = randn(c.b, c.dtype, Device::cpu());
  auto product = [&](const Tensor& x, const Tensor& y) {
    return matmul(c.a_t ? last_two_swapped(x) : x, c.b_t ? last_two_swapped(y) : y);
  };
  Tensor ga = a.to(Device::cuda(0)), gb = b.to(Device::cuda(0));
  eval(ga, gb);
  reset_stats();
  Tensor g = product(ga, gb);
  eval(g);
  Outcome o;
  o.gemms = stats().gemms_run;
  std::vector<double> gv = g.to_vector<double>();
  std::vector<double> cv = product(a, b).to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < cv.size(); ++i) {
    diff = std::max(diff, std::abs(gv[i] - cv[i]));
    scale = std::max(scale, std::abs(cv[i]));
  }
  o.relative = std::isfinite(diff) && gv.size() == cv.size() ? diff / scale : INFINITY;
  return o;
}

TEST_F(NoCublasGpu, EveryMatmulIsAKernelsAndAgreesWithTheCpu) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.what);
    set_cublas(true);
    const Outcome with = run(c);
    EXPECT_EQ(with.gemms > 0, c.cublas_by_default);
    EXPECT_LE(with.relative, c.tolerance);
    set_cublas(false);
    const Outcome without = run(c);
    EXPECT_EQ(without.gemms, 0) << "a cuBLAS call without cuBLAS";
    EXPECT_LE(without.relative, c.tolerance);
  }
}

// The mode is part of the plan's key: the same graph, evaluated again after the switch, is
// planned again, not replayed from the cached plan.
TEST_F(NoCublasGpu, TheSwitchTakesEffectOnACachedPlan) {
  Tensor a = randn({512, 1024}, DType::f32, Device::cuda(0));
  Tensor b = randn({1024, 512}, DType::f32, Device::cuda(0));
  eval(a, b);
  auto gemms_for = [&](bool on) {
    set_cublas(on);
    reset_stats();
    Tensor c = matmul(a, b) + 1.0f;
    eval(c);
    return stats().gemms_run;
  };
  EXPECT_EQ(gemms_for(true), 1);
  EXPECT_EQ(gemms_for(false), 0);
  EXPECT_EQ(gemms_for(true), 1);
}

bool cublas_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "libcublas"))
          *static_cast<bool*>(out) = true;
        return 0;
      },
      &found);
  return found;
}

// In a fresh process (the death test runs the test binary again): KILN_CUBLAS=0 from its
// start, a training step's kinds of matmul, and libcublas is not among the loaded libraries.
TEST_F(NoCublasGpu, AProcessWithoutCublasNeverLoadsIt) {
  kt::ScopedEnv off("KILN_CUBLAS", "0");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Tensor x = randn({512, 1024}, DType::f32, Device::cuda(0));
        Tensor w = randn({1024, 256}, DType::f32, Device::cuda(0));
        Tensor y = tanh(matmul(x, w));
        Tensor gw = matmul(last_two_swapped(x), y);
        eval(y, gw);
        std::_Exit(cublas_loaded() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, "fast");
}

} // namespace

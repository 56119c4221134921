// cuBLAS's set-up on a thread (runtime/cuda/cublas_set_up.h): until it finishes, a matmul for
// cuBLAS runs in kiln's kernels (the bits KILN_CUBLAS=0 gives), then in cuBLAS; with
// KILN_CUBLAS=wait or KILN_COMPILE=sync it waits for cuBLAS instead.
//
// The rest of the suite runs with set_cublas_waits(true) (the environment below) unless
// KILN_CUBLAS is set: its tests count cuBLAS calls and compare plans, which the set-up's timing
// would otherwise change in a process's first hundred milliseconds.
#include "../scoped_env.h"
#include "runtime/backend.h"
#include "runtime/cuda/cublas_set_up.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

using namespace kiln;

namespace {

struct CublasWaitsInTests : ::testing::Environment {
  void SetUp() override {
    if (!std::getenv("KILN_CUBLAS")) set_cublas_waits(true); // a value set is the test's own
  }
};
[[maybe_unused]] auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CublasWaitsInTests);

struct CublasSetUpGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
    set_cublas(true);
    set_cublas_waits(false);
  }
  void TearDown() override { // as the process had them (KILN_CUBLAS, the environment above)
    set_cublas(was_on_);
    set_cublas_waits(waited_);
  }
  const bool was_on_ = cublas(), waited_ = cublas_waits();
  // The default mode, which ctest and gpu-check replace with sync (counts must not depend on
  // NVRTC's speed): sync waits for cuBLAS too.
  kt::ScopedEnv compile_{"KILN_COMPILE", "background"};
};

bool ready(DType t) {
  return detail::cublas_ready_kinds() >> detail::cublas_kind(t) & 1;
}

// The largest |gpu - cpu| over the largest |cpu|.
double relative_error(const Tensor& gpu, const Tensor& cpu) {
  std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    diff = std::max(diff, std::abs(g[i] - c[i]));
    scale = std::max(scale, std::abs(c[i]));
  }
  return std::isfinite(diff) && g.size() == c.size() ? diff / scale : INFINITY;
}

// A weight gradient's GEMM (2^27 multiply-adds, cuBLAS's once set up) and its epilogue.
struct Step {
  Tensor a, b, c; // on the GPU
  Tensor cpu;     // the CPU's result
  explicit Step(DType t) {
    Tensor ha = randn({512, 1024}, t, Device::cpu()), hb = randn({512, 256}, t, Device::cpu());
    Tensor hc = randn({1024, 256}, t, Device::cpu());
    cpu = run(ha, hb, hc);
    a = ha.to(Device::cuda(0)), b = hb.to(Device::cuda(0)), c = hc.to(Device::cuda(0));
    eval(a, b, c);
  }
  static Tensor run(const Tensor& a, const Tensor& b, const Tensor& c) {
    return matmul(transpose(a, 0, 1), b) + c;
  }
  // The GPU's result and the cuBLAS calls it took.
  std::pair<Tensor, int64_t> gpu() const {
    reset_stats();
    Tensor y = run(a, b, c);
    eval(y);
    return {y, stats().gemms_run};
  }
};

// f32 before its set-up: kiln's kernels, the bits KILN_CUBLAS=0 gives; the set-up then finishes
// on its thread, and the same graph evaluated again is planned for cuBLAS.
TEST_F(CublasSetUpGpu, AMatmulRunsInKilnsKernelsUntilCublasIsSetUpThenInCublas) {
  if (ready(DType::f32)) GTEST_SKIP() << "f32's set-up ran in this process already";
  const Step s(DType::f32);
  const auto [during, during_gemms] = s.gpu();
  EXPECT_EQ(during_gemms, 0);
  EXPECT_LE(relative_error(during, s.cpu), 1e-5);
  set_cublas(false);
  const auto [without, without_gemms] = s.gpu();
  set_cublas(true);
  EXPECT_EQ(without_gemms, 0);
  EXPECT_EQ(max(abs(during - without)).item<float>(), 0.0f) << "not KILN_CUBLAS=0's bits";

  detail::wait_for_cublas_set_up();
  EXPECT_TRUE(ready(DType::f32));
  const auto [after, after_gemms] = s.gpu();
  EXPECT_EQ(after_gemms, 1);
  EXPECT_LE(relative_error(after, s.cpu), 1e-5);
}

// KILN_CUBLAS=wait: the first GEMM of a type is cuBLAS's, and no set-up thread is asked for it.
TEST_F(CublasSetUpGpu, WaitingSendsTheFirstMatmulToCublas) {
  if (ready(DType::f64)) GTEST_SKIP() << "f64's set-up ran in this process already";
  set_cublas_waits(true);
  const Step s(DType::f64);
  const auto [y, gemms] = s.gpu();
  EXPECT_EQ(gemms, 1);
  EXPECT_LE(relative_error(y, s.cpu), 1e-12);
  detail::wait_for_cublas_set_up();
  EXPECT_FALSE(ready(DType::f64));
}

// KILN_COMPILE=sync waits for everything that is not ready: kernels and cuBLAS alike.
TEST_F(CublasSetUpGpu, SyncCompilesWaitForCublasToo) {
  if (ready(DType::f16)) GTEST_SKIP() << "f16's set-up ran in this process already";
  kt::ScopedEnv sync("KILN_COMPILE", "sync");
  const Step s(DType::f16);
  const auto [y, gemms] = s.gpu();
  EXPECT_EQ(gemms, 1);
  EXPECT_LE(relative_error(y, s.cpu), 2e-2);
  detail::wait_for_cublas_set_up();
  EXPECT_FALSE(ready(DType::f16));
}

// A process that exits while the set-up runs (its first step's matmul asked for it a moment
// before) exits cleanly: the set-up is joined before cuBLAS's state is destroyed.
TEST_F(CublasSetUpGpu, AnExitDuringTheSetUpIsClean) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        set_cublas_waits(false);
        const Step s(DType::bf16);
        const auto r = s.gpu();
        std::exit(r.second == 0 && relative_error(r.first, s.cpu) <= 3e-2 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, "fast");
}

} // namespace

// Merged launches (codegen's CudaRepeat, runtime/cuda/cuda_batch_groups.cpp): consecutive
// launches of one small kernel run as one launch on one block or one cluster. The choice and
// the source are checked without a GPU (NVRTC compiles for a given arch); on a GPU, loops whose
// steps merge must give the same bits as the same steps launched one by one, and agree with
// the CPU backend.
#include "../scoped_env.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen_fixture.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace kt_codegen;

namespace {

// The seed loop's step over d x d, and an LSTM cell at batch 1 (in = hidden = h), as the one
// kernel each evaluates to.
FusedKernel seed_step(int64_t d) {
  Tensor x = randn({d, d}), w = randn({d, d}), b = randn({d});
  eval(x, w, b);
  set_small_matmul(SmallMatmul::everywhere);
  FusedKernel k = kernel_of([&] { return sigmoid(tanh(matmul(x, w) + b) * 0.5f + x) - 0.5f; });
  set_small_matmul(SmallMatmul::on_gpu);
  return k;
}

FusedKernel lstm_cell(int64_t h) {
  Tensor x = randn({1, h}), hs = randn({1, h}), c = randn({1, h});
  Tensor wx = randn({h, 4 * h}), wh = randn({h, 4 * h}), b = randn({4 * h});
  eval(x, hs, c, wx, wh, b);
  set_small_matmul(SmallMatmul::everywhere);
  FusedKernel k = kernel_of([&] {
    std::vector<Tensor> g = chunk(matmul(x, wx) + matmul(hs, wh) + b, 4, 1);
    return sigmoid(g[3]) * tanh(sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]));
  });
  set_small_matmul(SmallMatmul::on_gpu);
  return k;
}

int64_t blocks(const CudaLaunch& l) {
  return int64_t(l.grid) * l.grid_y * l.grid_z;
}

} // namespace

TEST_F(Codegen, MergedLaunchesTakeSmallKernelsOnOneCluster) {
  // The seed step at d = 64: 16 tiles of 16 on the H100 alone; merged, 4 tiles of 32 (2 x 2).
  const FusedKernel seed = seed_step(64);
  const std::optional<CudaRepeat> r = choose_repeat(seed, slot_bases(), target());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->variant.gemm_tile, 32);
  EXPECT_EQ(r->variant.dot_cluster, 1);
  EXPECT_EQ(r->shape.grid, 2u);
  EXPECT_EQ(r->shape.grid_y, 2u);
  EXPECT_EQ(r->max_count, kMaxRepeatCount); // small Params: the count's cap applies
  // Before sm_90 (no clusters) only a grid of one block merges: one tile of 64.
  const std::optional<CudaRepeat> r80 = choose_repeat(seed, slot_bases(), target(80));
  ASSERT_TRUE(r80.has_value());
  EXPECT_EQ(r80->variant.gemm_tile, 64);
  EXPECT_EQ(blocks(r80->shape), 1);
  // An LSTM cell at batch 1, hidden 256: the dot layout, no cluster of its own, 8 blocks.
  const FusedKernel lstm = lstm_cell(256);
  const std::optional<CudaRepeat> rl = choose_repeat(lstm, slot_bases(), target());
  ASSERT_TRUE(rl.has_value());
  EXPECT_EQ(layout_of(lstm, rl->variant), CudaLayout::dot);
  EXPECT_EQ(rl->variant.dot_cluster, 1);
  EXPECT_LE(blocks(rl->shape), kMaxRepeatBlocks);
  EXPECT_GT(blocks(rl->shape), 1);
  // Too much work for 8 SMs: the seed step at d = 256, a chain over 4M elements.
  EXPECT_FALSE(choose_repeat(seed_step(256), slot_bases(), target()).has_value());
  Tensor big = randn({1 << 22});
  eval(big);
  EXPECT_FALSE(
      choose_repeat(kernel_of([&] { return tanh(big) * 2; }), slot_bases(), target()).has_value());
}

TEST_F(Codegen, OneStructureOverOtherSizesMergesOnOtherGrids) {
  // The premise of MergedLaunchGpu.OneKernelOverTwoSizesMergesOnEachSizesGrid: one variant,
  // two grids, so two merged kernels (their keys differ by the grid the source holds).
  auto step = [](int64_t n) {
    Tensor x = randn({n, n});
    eval(x);
    return kernel_of([&] { return tanh(transpose(x, 0, 1) * 0.5f + 0.1f); });
  };
  const FusedKernel k64 = step(64), k128 = step(128);
  const std::optional<CudaRepeat> r64 = choose_repeat(k64, slot_bases(), target());
  const std::optional<CudaRepeat> r128 = choose_repeat(k128, slot_bases(), target());
  ASSERT_TRUE(r64.has_value());
  ASSERT_TRUE(r128.has_value());
  EXPECT_EQ(layout_of(k64, r64->variant), CudaLayout::tiled);
  EXPECT_EQ(variant_key(k64, r64->variant), variant_key(k128, r128->variant));
  EXPECT_EQ(blocks(r64->shape), 4);
  EXPECT_EQ(blocks(r128->shape), 8);
  EXPECT_NE(render_cuda_repeat(k64, *r64, target(), 8).key,
            render_cuda_repeat(k128, *r128, target(), 8).key);
}

TEST_F(Codegen, MergedKernelsCompile) {
  const FusedKernel seed = seed_step(64), lstm = lstm_cell(256);
  const CudaRepeat r = *choose_repeat(seed, slot_bases(), target());
  const CudaKernelSource src = render_cuda_repeat(seed, r, target(), 8);
  check_golden("seed_step_x8_gemm32_f32", src);
  EXPECT_NE(src.source.find("__cluster_dims__(2, 2, 1)"), std::string::npos);
  EXPECT_NE(src.source.find("barrier.cluster.arrive.aligned"), std::string::npos);
  EXPECT_NE(src.source.find("Params p[8]"), std::string::npos);
  EXPECT_NE(src.key.find(" repeat8 grid2x2x1"), std::string::npos) << src.key;
  EXPECT_NE(src.name.find("_x8_"), std::string::npos) << src.name;
  // The count and the grid are the merged kernel's identity.
  EXPECT_NE(render_cuda_repeat(seed, r, target(), 4).key, src.key);
  EXPECT_NE(render_cuda_repeat(seed, r, target(), 4).name, src.name);
  EXPECT_NO_THROW(compile_cuda(src, target()));
  // One block: the block's barrier, no cluster.
  const CudaRepeat r80 = *choose_repeat(seed, slot_bases(), target(80));
  const CudaKernelSource one = render_cuda_repeat(seed, r80, target(80), 3);
  EXPECT_EQ(one.source.find("__cluster_dims__"), std::string::npos);
  EXPECT_EQ(one.source.find("barrier.cluster"), std::string::npos);
  EXPECT_NO_THROW(compile_cuda(one, target(80)));
  const CudaRepeat rl = *choose_repeat(lstm, slot_bases(), target());
  EXPECT_NO_THROW(compile_cuda(render_cuda_repeat(lstm, rl, target(), 16), target()));
}

// ---- on a GPU ---------------------------------------------------------------------------------

namespace {

struct MergedLaunchGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
    set_idle_flush(0); // every step pending until the eval: one evaluation of `steps` kernels
  }
  void TearDown() override {
    set_merge_launches(false);
    set_idle_flush(64);
  }
};

std::vector<float> values(const Tensor& t) {
  return cast(t, DType::f32).to(Device::cpu()).to_vector<float>();
}

// A loop's state and its step, recorded without eval.
struct Loop {
  std::vector<Tensor> state; // made on the CPU, moved to the device the loop runs on
  std::function<void(std::vector<Tensor>&)> step;
};

Loop seed_loop() {
  manual_seed(11);
  const Device cpu = Device::cpu();
  Tensor x = randn({64, 64}, DType::f32, cpu), w = randn({64, 64}, DType::f32, cpu) * 0.125f,
         b = randn({64}, DType::f32, cpu) * 0.1f;
  return {{x, w, b}, [](std::vector<Tensor>& s) {
            Tensor y = matmul(s[0], s[1]);
            y = tanh(y + s[2]) * 0.5f + s[0];
            s[0] = sigmoid(y) - 0.5f;
          }};
}

// PyTorch's LSTMCell math at batch 1, in = hidden = 256, the same input every step.
Loop lstm_loop() {
  manual_seed(12);
  const Device cpu = Device::cpu();
  const float scale = 1.f / 16;
  Tensor x = randn({1, 256}, DType::f32, cpu), h = zeros({1, 256}, DType::f32, cpu),
         c = zeros({1, 256}, DType::f32, cpu), wx = randn({256, 1024}, DType::f32, cpu) * scale,
         wh = randn({256, 1024}, DType::f32, cpu) * scale,
         b = randn({1024}, DType::f32, cpu) * scale;
  return {{h, c, x, wx, wh, b}, [](std::vector<Tensor>& s) {
            std::vector<Tensor> g = chunk(matmul(s[2], s[3]) + matmul(s[0], s[4]) + s[5], 4, 1);
            s[1] = sigmoid(g[1]) * s[1] + sigmoid(g[0]) * tanh(g[2]);
            s[0] = sigmoid(g[3]) * tanh(s[1]);
          }};
}

// x = tanh(x^T * 0.5 + 0.1) over n x n: each block reads what other blocks wrote the step
// before (the tiled layout), so a barrier that spans fewer blocks than the grid would race.
Loop transpose_loop(int64_t n) {
  manual_seed(13);
  return {{randn({n, n}, DType::f32, Device::cpu())},
          [](std::vector<Tensor>& s) { s[0] = tanh(transpose(s[0], 0, 1) * 0.5f + 0.1f); }};
}

// `reps` evaluations of `steps` steps each, continuing from the same start on `dev`, merging
// or not: the first runs of the plan launch directly, the later ones replay a CUDA graph.
std::vector<std::vector<float>> runs(Loop loop, Device dev, bool merge, int steps, int reps) {
  set_merge_launches(merge);
  for (Tensor& t : loop.state) t = t.to(dev);
  for (Tensor& t : loop.state) eval(t);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < reps; ++r) {
    for (int s = 0; s < steps; ++s) loop.step(loop.state);
    eval(loop.state[0]);
    out.push_back(values(loop.state[0]));
  }
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double err = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    err = std::max(err, std::isnan(a[i] - b[i]) ? INFINITY : double(std::fabs(a[i] - b[i])));
  return err;
}

void fresh_plans() {
  set_plan_cache_limit(0);
  set_plan_cache_limit(256);
  reset_stats();
}

// Merged (compiled at once), then each member on its own in the same variant (the stand-in
// interpreter, which computes the bits of the member's kernel), then merging off (a variant with
// more blocks: rounding), then the CPU.
void check_merged_loop(const std::function<Loop()>& make, int steps, int reps) {
  const Device gpu = Device::cuda(0);
  std::vector<std::vector<float>> merged, alone, other_variant;
  {
    kt::ScopedEnv sync("KILN_COMPILE", "sync");
    fresh_plans();
    merged = runs(make(), gpu, true, steps, reps);
    const Stats s = stats();
    EXPECT_EQ(s.kernels_merged, int64_t(steps) * reps) << s;
    EXPECT_GE(s.graph_replays, 1) << s; // the merged launch replayed in a CUDA graph too
  }
  {
    kt::ScopedEnv standin("KILN_COMPILE", "standin");
    fresh_plans();
    alone = runs(make(), gpu, true, steps, reps);
    EXPECT_EQ(stats().kernels_merged, 0) << stats();
  }
  {
    kt::ScopedEnv sync("KILN_COMPILE", "sync");
    fresh_plans();
    other_variant = runs(make(), gpu, false, steps, reps);
    EXPECT_EQ(stats().kernels_merged, 0) << stats();
  }
  const auto cpu = runs(make(), Device::cpu(), false, steps, reps);
  ASSERT_EQ(merged.size(), size_t(reps));
  for (size_t r = 0; r < merged.size(); ++r) {
    EXPECT_EQ(merged[r], alone[r]) << "evaluation " << r;
    EXPECT_LT(max_diff(merged[r], other_variant[r]), 1e-4) << "evaluation " << r;
    EXPECT_LT(max_diff(merged[r], cpu[r]), 1e-4) << "evaluation " << r;
  }
}

} // namespace

TEST_F(MergedLaunchGpu, SeedLoopStepsMergedGiveTheBitsOfStepsLaunchedAlone) {
  check_merged_loop(seed_loop, 16, 5);
}

TEST_F(MergedLaunchGpu, LstmCellStepsMergedGiveTheBitsOfStepsLaunchedAlone) {
  check_merged_loop(lstm_loop, 8, 4);
}

TEST_F(MergedLaunchGpu, OneKernelOverTwoSizesMergesOnEachSizesGrid) {
  // The same structure and variant over 64 x 64 and 128 x 128: grids of 4 and 8 blocks, so two
  // merged kernels (the cluster's dimensions are in the source). Had the second size been
  // given the first one's kernel, its barrier would span half its blocks.
  kt::ScopedEnv sync("KILN_COMPILE", "sync");
  fresh_plans();
  const auto small = runs(transpose_loop(64), Device::cuda(0), true, 8, 3);
  const auto large = runs(transpose_loop(128), Device::cuda(0), true, 8, 3);
  EXPECT_EQ(stats().kernels_merged, 2 * 8 * 3) << stats();
  const auto small_cpu = runs(transpose_loop(64), Device::cpu(), false, 8, 3);
  const auto large_cpu = runs(transpose_loop(128), Device::cpu(), false, 8, 3);
  for (size_t r = 0; r < small.size(); ++r) {
    EXPECT_LT(max_diff(small[r], small_cpu[r]), 1e-5) << "64 x 64, evaluation " << r;
    EXPECT_LT(max_diff(large[r], large_cpu[r]), 1e-5) << "128 x 128, evaluation " << r;
  }
}

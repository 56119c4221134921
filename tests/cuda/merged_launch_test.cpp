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

TEST_F(Codegen, OnlyKernelsWhoseGridIsOneClusterMerge) {
  // The seed step at d = 64: 16 tiles of 16, a cluster of 16 on sm_90, in its own variant.
  const FusedKernel seed = seed_step(64);
  const std::optional<CudaRepeat> r = choose_repeat(seed, slot_bases(), target());
  ASSERT_TRUE(r.has_value());
  const CudaVariant own = choose_variant(seed, slot_bases(), target());
  EXPECT_EQ(variant_key(seed, r->variant), variant_key(seed, own));
  EXPECT_EQ(r->variant.gemm_tile, 16);
  EXPECT_EQ(r->shape.grid, 4u);
  EXPECT_EQ(r->shape.grid_y, 4u);
  EXPECT_EQ(blocks(r->shape), kMaxRepeatBlocks);
  EXPECT_EQ(r->max_count, kMaxRepeatCount); // small Params: the count's cap applies
  // Before sm_90 (no clusters) only a grid of one block: the seed step at d = 8.
  EXPECT_FALSE(choose_repeat(seed, slot_bases(), target(80)).has_value());
  const std::optional<CudaRepeat> r80 = choose_repeat(seed_step(8), slot_bases(), target(80));
  ASSERT_TRUE(r80.has_value());
  EXPECT_EQ(blocks(r80->shape), 1);
  // An LSTM cell at batch 1, hidden 32: the dot layout on 4 blocks.
  const FusedKernel small_lstm = lstm_cell(32);
  const std::optional<CudaRepeat> rl = choose_repeat(small_lstm, slot_bases(), target());
  ASSERT_TRUE(rl.has_value());
  EXPECT_EQ(layout_of(small_lstm, rl->variant), CudaLayout::dot);
  EXPECT_EQ(blocks(rl->shape), 4);
  // Not one cluster: hidden 256 (32 blocks), the seed step at d = 256, a chain over 4M elements.
  EXPECT_FALSE(choose_repeat(lstm_cell(256), slot_bases(), target()).has_value());
  EXPECT_FALSE(choose_repeat(seed_step(256), slot_bases(), target()).has_value());
  Tensor big = randn({1 << 22});
  eval(big);
  EXPECT_FALSE(
      choose_repeat(kernel_of([&] { return tanh(big) * 2; }), slot_bases(), target()).has_value());
}

TEST_F(Codegen, OneStructureOverOtherSizesMergesOnOtherGrids) {
  // The premise of MergedLaunchGpu.OneKernelOverTwoSizesMergesOnEachSizesGrid: one variant,
  // two grids, so two merged kernels (their keys differ by the grid the source holds).
  const FusedKernel k32 = seed_step(32), k64 = seed_step(64);
  const std::optional<CudaRepeat> r32 = choose_repeat(k32, slot_bases(), target());
  const std::optional<CudaRepeat> r64 = choose_repeat(k64, slot_bases(), target());
  ASSERT_TRUE(r32.has_value());
  ASSERT_TRUE(r64.has_value());
  EXPECT_EQ(variant_key(k32, r32->variant), variant_key(k64, r64->variant));
  EXPECT_EQ(blocks(r32->shape), 4);
  EXPECT_EQ(blocks(r64->shape), 16);
  EXPECT_NE(render_cuda_repeat(k32, *r32, target(), 8).key,
            render_cuda_repeat(k64, *r64, target(), 8).key);
}

TEST_F(Codegen, MergedKernelsCompile) {
  const FusedKernel seed = seed_step(64), lstm = lstm_cell(32);
  const CudaRepeat r = *choose_repeat(seed, slot_bases(), target());
  const CudaKernelSource src = render_cuda_repeat(seed, r, target(), 8);
  check_golden("seed_step_x8_gemm16_f32", src);
  EXPECT_NE(src.source.find("__cluster_dims__(4, 4, 1)"), std::string::npos);
  EXPECT_NE(src.source.find("barrier.cluster.arrive.aligned"), std::string::npos);
  EXPECT_NE(src.source.find("Params p[8]"), std::string::npos);
  EXPECT_NE(src.key.find(" repeat8 grid4x4x1"), std::string::npos) << src.key;
  EXPECT_NE(src.name.find("_x8_"), std::string::npos) << src.name;
  // The count and the grid are the merged kernel's identity.
  EXPECT_NE(render_cuda_repeat(seed, r, target(), 4).key, src.key);
  EXPECT_NE(render_cuda_repeat(seed, r, target(), 4).name, src.name);
  EXPECT_NO_THROW(compile_cuda(src, target()));
  // One block: the block's barrier, no cluster.
  const FusedKernel tiny = seed_step(8);
  const CudaRepeat r80 = *choose_repeat(tiny, slot_bases(), target(80));
  const CudaKernelSource one = render_cuda_repeat(tiny, r80, target(80), 3);
  EXPECT_EQ(one.source.find("__cluster_dims__"), std::string::npos);
  EXPECT_EQ(one.source.find("barrier.cluster"), std::string::npos);
  EXPECT_NE(one.source.find("__syncthreads();\n    k_step(r.p[s]);"), std::string::npos);
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

Loop seed_loop(int64_t d = 64) {
  manual_seed(11);
  const Device cpu = Device::cpu();
  Tensor x = randn({d, d}, DType::f32, cpu), w = randn({d, d}, DType::f32, cpu) * (8.f / d),
         b = randn({d}, DType::f32, cpu) * 0.1f;
  return {{x, w, b}, [](std::vector<Tensor>& s) {
            Tensor y = matmul(s[0], s[1]);
            y = tanh(y + s[2]) * 0.5f + s[0];
            s[0] = sigmoid(y) - 0.5f;
          }};
}

// PyTorch's LSTMCell math at batch 1, in = hidden = 32 (one cluster of its own on sm_90; at
// 256 the cell's grid is clusters of its own, which do not merge), the same input every step.
Loop lstm_loop() {
  manual_seed(12);
  const Device cpu = Device::cpu();
  const int64_t n = 32;
  const float scale = 1.f / std::sqrt(float(n));
  Tensor x = randn({1, n}, DType::f32, cpu), h = zeros({1, n}, DType::f32, cpu),
         c = zeros({1, n}, DType::f32, cpu), wx = randn({n, 4 * n}, DType::f32, cpu) * scale,
         wh = randn({n, 4 * n}, DType::f32, cpu) * scale,
         b = randn({4 * n}, DType::f32, cpu) * scale;
  return {{h, c, x, wx, wh, b}, [](std::vector<Tensor>& s) {
            std::vector<Tensor> g = chunk(matmul(s[2], s[3]) + matmul(s[0], s[4]) + s[5], 4, 1);
            s[1] = sigmoid(g[1]) * s[1] + sigmoid(g[0]) * tanh(g[2]);
            s[0] = sigmoid(g[3]) * tanh(s[1]);
          }};
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

// Merged (compiled at once), then each member on its own (the stand-in interpreter, which
// computes the bits of the member's kernel), then merging off (the same kernels launched one by
// one): the same bits all three ways, and the CPU's to rounding.
void check_merged_loop(const std::function<Loop()>& make, int steps, int reps) {
  const Device gpu = Device::cuda(0);
  std::vector<std::vector<float>> merged, alone, unmerged;
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
    unmerged = runs(make(), gpu, false, steps, reps);
    EXPECT_EQ(stats().kernels_merged, 0) << stats();
  }
  const auto cpu = runs(make(), Device::cpu(), false, steps, reps);
  ASSERT_EQ(merged.size(), size_t(reps));
  for (size_t r = 0; r < merged.size(); ++r) {
    EXPECT_EQ(merged[r], alone[r]) << "evaluation " << r;
    EXPECT_EQ(merged[r], unmerged[r]) << "evaluation " << r;
    EXPECT_LT(max_diff(merged[r], cpu[r]), 1e-4) << "evaluation " << r;
  }
}

} // namespace

TEST_F(MergedLaunchGpu, SeedLoopStepsMergedGiveTheBitsOfStepsLaunchedAlone) {
  // 7 evaluations: the loop detector settles on the outer loop (16 steps and the read) in the
  // third; its scalars are shared from there on (graph.h, loop_constant), so the plans of the
  // first four differ, and the fourth's needs three runs before it replays as a CUDA graph.
  check_merged_loop([] { return seed_loop(); }, 16, 7);
}

TEST_F(MergedLaunchGpu, LstmCellStepsMergedGiveTheBitsOfStepsLaunchedAlone) {
  check_merged_loop(lstm_loop, 8, 4);
}

TEST_F(MergedLaunchGpu, OneKernelOverTwoSizesMergesOnEachSizesGrid) {
  // The seed step over 32 x 32 and 64 x 64: one variant on grids of 4 and 16 blocks, so two
  // merged kernels (the cluster's dimensions are in the source). Had the second size been
  // given the first one's kernel, its barrier would span a quarter of its blocks.
  kt::ScopedEnv sync("KILN_COMPILE", "sync");
  fresh_plans();
  const auto small = runs(seed_loop(32), Device::cuda(0), true, 8, 3);
  const auto large = runs(seed_loop(64), Device::cuda(0), true, 8, 3);
  EXPECT_EQ(stats().kernels_merged, 2 * 8 * 3) << stats();
  const auto small_cpu = runs(seed_loop(32), Device::cpu(), false, 8, 3);
  const auto large_cpu = runs(seed_loop(64), Device::cpu(), false, 8, 3);
  for (size_t r = 0; r < small.size(); ++r) {
    EXPECT_LT(max_diff(small[r], small_cpu[r]), 1e-4) << "32 x 32, evaluation " << r;
    EXPECT_LT(max_diff(large[r], large_cpu[r]), 1e-4) << "64 x 64, evaluation " << r;
  }
}

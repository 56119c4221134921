// The early trigger in CUDA graphs (Params::k_flags bit 0: runtime/cuda/cuda_batch.cpp
// graph_flags): a kernel whose blocks all run at once lets the next kernel launch at its start,
// and the next one's first instruction waits for its completion. Loops without eval, whose
// flushes replay a chain of one kernel a step as one graph, must give the bits of kernels
// launched as their predecessors' blocks exit, and the CPU's to rounding. (A kernel that read
// before its wait would run beside its predecessor and read the state before it is written.)
#include "../scoped_env.h"
#include "runtime/backend.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

using namespace kiln;

namespace {

struct EarlyTriggerGpu : ::testing::Test {
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no CUDA device";
    set_eager(false);
    set_idle_flush(64); // a loop without eval is flushed every few steps, as in a user's process
  }
  void TearDown() override { detail::early_trigger() = true; }
};

// A recurrent loop's state (state[0] is read) and its step t, recorded without eval.
struct Loop {
  std::vector<Tensor> state;
  std::function<void(std::vector<Tensor>&, int)> step;
};

// The seeds' loop at d = 64: one GEMM-tile kernel a step on 16 blocks.
Loop seed(int) {
  manual_seed(23);
  const Device cpu = Device::cpu();
  const int64_t d = 64;
  return {{randn({d, d}, DType::f32, cpu), randn({d, d}, DType::f32, cpu) * (1.f / 8),
           randn({d}, DType::f32, cpu) * 0.1f},
          [](std::vector<Tensor>& s, int) {
            Tensor y = matmul(s[0], s[1]);
            y = tanh(y + s[2]) * 0.5f + s[0];
            s[0] = sigmoid(y) - 0.5f;
          }};
}

// PyTorch's LSTMCell at batch 1, hidden 256 (dot kernels in clusters of 4 on the H100), a new
// input row every step.
Loop lstm(int steps) {
  manual_seed(21);
  const Device cpu = Device::cpu();
  const int64_t n = 256;
  const float scale = 1.f / std::sqrt(float(n));
  return {{zeros({1, n}, DType::f32, cpu), zeros({1, n}, DType::f32, cpu),
           randn({int64_t(steps), n}, DType::f32, cpu), randn({n, 4 * n}, DType::f32, cpu) * scale,
           randn({n, 4 * n}, DType::f32, cpu) * scale, randn({4 * n}, DType::f32, cpu) * scale},
          [](std::vector<Tensor>& s, int t) {
            Tensor x = slice(s[2], 0, t, t + 1);
            std::vector<Tensor> g = chunk(matmul(x, s[3]) + matmul(s[0], s[4]) + s[5], 4, 1);
            s[1] = sigmoid(g[1]) * s[1] + sigmoid(g[0]) * tanh(g[2]);
            s[0] = sigmoid(g[3]) * tanh(s[1]);
          }};
}

// The loop on `dev` without eval, state[0] read every `every` steps: the values read.
std::vector<std::vector<float>> run(Loop loop, Device dev, int steps, int every) {
  for (Tensor& t : loop.state) t = t.to(dev);
  for (Tensor& t : loop.state) eval(t);
  std::vector<std::vector<float>> out;
  for (int t = 0; t < steps; ++t) {
    loop.step(loop.state, t);
    if ((t + 1) % every == 0) out.push_back(loop.state[0].to_vector<float>());
  }
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double err = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    err = std::max(err, std::isnan(a[i] - b[i]) ? INFINITY : double(std::fabs(a[i] - b[i])));
  return err;
}

void fresh_plans() { // a graph's flags are set when it is built
  set_plan_cache_limit(0);
  set_plan_cache_limit(256);
  reset_stats();
}

// The trigger on, then off, then the CPU: the same bits both ways on the GPU (compiled kernels,
// no stand-in, so that the flushes replay as graphs), and the CPU's to rounding.
void check(const std::function<Loop(int)>& make) {
  const int steps = 640, every = 320;
  kt::ScopedEnv sync("KILN_COMPILE", "sync");
  fresh_plans();
  const auto early = run(make(steps), Device::cuda(0), steps, every);
  EXPECT_GE(stats().graph_replays, 10) << stats(); // the loop's flushes replayed as graphs
  detail::early_trigger() = false;
  fresh_plans();
  const auto late = run(make(steps), Device::cuda(0), steps, every);
  const auto cpu = run(make(steps), Device::cpu(), steps, every);
  ASSERT_EQ(early.size(), size_t(steps / every));
  for (size_t r = 0; r < early.size(); ++r) {
    EXPECT_EQ(early[r], late[r]) << "read " << r;
    EXPECT_LT(max_diff(early[r], cpu[r]), 1e-4) << "read " << r;
  }
}

} // namespace

TEST_F(EarlyTriggerGpu, SeedLoopGivesTheBitsOfLaunchesAsBlocksExit) {
  check(seed);
}

TEST_F(EarlyTriggerGpu, LstmLoopGivesTheBitsOfLaunchesAsBlocksExit) {
  check(lstm);
}

#pragma once
// The fixtures of the adaptive-batching tests (adaptive_flush_test.cpp, loop_constants_test.cpp):
// a replaceable device probe on the CPU backend, so CI drives the early-flush policy.
#include "../test_device.h"

#include "engine/adaptive_flush.h"
#include "engine/graph.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <vector>

namespace kiln_tests {

using namespace kiln;
using kiln::detail::DeviceState;

constexpr int64_t kEvery = 16; // check interval in these tests (nodes)

struct AdaptiveFlush : ::testing::Test {
  void SetUp() override {
    KILN_USE_TEST_DEVICE(); // pins early flushes off for the rest of the suite; on here
    set_eager(false);
    set_idle_flush(kEvery);
    set_loop_flush(false); // the node-count policy; AdaptiveLoopFlush below tests loops
    manual_seed(91);
  }
  void TearDown() override {
    detail::set_device_probe({});
    set_idle_flush(0);
    set_loop_flush(true);
    detail::engine().loop_skips_cse = true;
    detail::engine().loop_shares_constants = true;
  }
  // A probe that answers `state` for every device and counts the questions.
  void probe(DeviceState state) {
    detail::set_device_probe([this, state](Device d) {
      asked.push_back(d);
      return state;
    });
  }
  std::vector<Device> asked;
};

inline Tensor realized_randn(const Shape& s, float scale = 1.0f) {
  Tensor t = randn(s) * scale;
  eval(t);
  return t;
}

struct Rnn {
  Tensor x, w, b, h;
  static Rnn make(int64_t d) {
    return {realized_randn({4, d}), realized_randn({d, d}, 0.3f), realized_randn({d}, 0.1f),
            realized_randn({4, d})};
  }
  // One step, 7 op calls: nothing is evaluated.
  void step() { h = tanh(matmul(h, w) + b) * 0.5f + sigmoid(x) * h; }
};

// `steps` steps recorded without an eval, then read.
inline std::vector<float> run_unevaluated(Rnn r, int steps) {
  for (int i = 0; i < steps; ++i) r.step();
  return r.h.to_vector<float>();
}

// Loops without eval (engine/loop_detect.h): once the ops repeat, early flushes fall on the
// ends of the loop's body, after a power of two of bodies, so the loop's flushes repeat a few
// plans instead of cutting wherever a node count falls.
// A loop's idle flushes hold at least 16 check intervals of nodes (adaptive_flush.cpp): these
// tests check every 2 nodes, so that flushes of a few bodies come within a few hundred steps.
constexpr int64_t kLoopEvery = 2;

struct AdaptiveLoopFlush : AdaptiveFlush {
  void SetUp() override {
    AdaptiveFlush::SetUp();
    set_idle_flush(kLoopEvery);
    set_loop_flush(true);
  }
};

} // namespace kiln_tests

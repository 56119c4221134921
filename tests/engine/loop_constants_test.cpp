// A confirmed loop's scalar operands share one pending constant node per value (engine/graph.h,
// loop_constant): the same values, buffers and kernels as a constant per op.
#include "adaptive_flush_fixture.h"

#include "engine/kernel_observer.h"
#include "ir/kernel_key.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace kiln;
using namespace kiln_tests;

namespace {

struct LoopConstants : AdaptiveLoopFlush {};

// In a confirmed loop an op's scalar operand reuses the pending constant an earlier op made with
// the same value (graph.h, loop_constant): the seeds' step records its 7 op calls' nodes, and a
// constant only after a flush freed the last one, instead of 9 nodes. The same bits, buffers and
// kernels as with a constant per op.
TEST_F(LoopConstants, AConfirmedLoopsScalarsShareOneConstantNode) {
  auto run = [](bool share) {
    detail::engine().loop_shares_constants = share;
    std::set<std::string> keys; // the kernels run: none compiled again for the shared constant
    detail::set_kernel_observer(
        [&keys](const detail::FusedKernel& k) { keys.insert(detail::kernel_key(k)); });
    manual_seed(3);
    const Tensor w = realized_randn({8, 8}, 0.3f), b = realized_randn({8}, 0.1f);
    Tensor h = realized_randn({4, 8});
    auto step = [&] {
      Tensor y = tanh(matmul(h, w) + b) * 0.5f + h;
      h = sigmoid(y) - 0.5f;
    };
    for (int i = 0; i < 100; ++i) step();
    EXPECT_GT(detail::engine().loop.period(), 0);
    reset_stats();
    for (int i = 0; i < 200; ++i) step();
    const std::vector<float> values = h.to_vector<float>();
    detail::set_kernel_observer({});
    return std::tuple{values, stats(), keys};
  };
  probe(DeviceState::busy);
  const auto [shared_values, shared, shared_keys] = run(true);
  const auto [own_values, own, own_keys] = run(false);
  EXPECT_EQ(shared_keys, own_keys);
  // A flush that realizes every reader of the constant frees it: the next body makes another.
  EXPECT_GE(shared.ops_recorded, 7 * 200) << shared;
  EXPECT_LE(shared.ops_recorded, 7 * 200 + shared.flushes) << shared;
  EXPECT_EQ(own.ops_recorded, 9 * 200) << own;
  EXPECT_EQ(shared_values, own_values);
  EXPECT_EQ(shared.buffers_materialized, own.buffers_materialized) << shared << "\n" << own;
  EXPECT_EQ(shared.kernels_run, own.kernels_run);
  EXPECT_GT(shared.loop_flushes, 3) << shared;
}

// A body whose first op reads a scalar: the shared constant, made in an earlier body, is read
// on both sides of each loop flush's cut. It stays pending there (each kernel computes it), is
// never written (as many buffers as with a constant per op), and the values are the same.
TEST_F(LoopConstants, AConstantSharedAcrossAFlushCutStaysPending) {
  auto run = [](bool share) {
    detail::engine().loop_shares_constants = share;
    manual_seed(4);
    Tensor h = realized_randn({4, 8});
    auto step = [&] {
      Tensor a = h * 0.9f; // the body's first op (the fewest values held), named: recorded first
      Tensor s = sigmoid(h);
      h = a + s * 0.9f;
    };
    for (int i = 0; i < 100; ++i) step();
    reset_stats();
    for (int i = 0; i < 300; ++i) step();
    const std::vector<float> values = h.to_vector<float>();
    return std::pair{values, stats()};
  };
  probe(DeviceState::busy);
  const auto [shared_values, shared] = run(true);
  const auto [own_values, own] = run(false);
  EXPECT_GE(shared.loop_flushes, 4) << shared;
  EXPECT_EQ(shared.ops_recorded, 4 * 300) << "one constant throughout: " << shared;
  EXPECT_EQ(shared_values, own_values);
  EXPECT_EQ(shared.buffers_materialized, own.buffers_materialized) << shared << "\n" << own;
}

// Random loop bodies of scalar and tensor ops, the device idle or busy at random (flushes after
// varying numbers of bodies, so cuts fall between a shared constant's readers in every way):
// the same bits and the same buffers written with shared constants as with a constant per op.
TEST_F(LoopConstants, RandomLoopBodiesGiveTheSameBitsWithSharedConstants) {
  constexpr float kScalars[] = {0.5f, 0.25f, -1.0f};
  int shared_some = 0; // runs in which the loop was confirmed and its scalars shared
  for (unsigned seed = 1; seed <= 40; ++seed) {
    std::mt19937 gen(seed);
    const int ops = std::uniform_int_distribution<int>(2, 8)(gen);
    std::vector<std::pair<int, float>> body; // (op, scalar)
    for (int i = 0; i < ops; ++i)
      body.emplace_back(std::uniform_int_distribution<int>(0, 5)(gen),
                        kScalars[std::uniform_int_distribution<int>(0, 2)(gen)]);
    const int steps = std::uniform_int_distribution<int>(60, 300)(gen);
    auto run = [&](bool share) {
      set_loop_flush(true); // the loop detector starts afresh in both runs
      detail::engine().loop_shares_constants = share;
      uint64_t bits = seed; // the probe's answers, the same in both runs
      detail::set_device_probe([&bits](Device) {
        bits = bits * 6364136223846793005ull + 1442695040888963407ull;
        return bits >> 63 ? DeviceState::idle : DeviceState::busy;
      });
      manual_seed(seed);
      const Tensor w = realized_randn({6, 6}, 0.3f);
      Tensor h = realized_randn({3, 6}), x = realized_randn({3, 6});
      reset_stats();
      for (int s = 0; s < steps; ++s) {
        for (const auto& [op, c] : body) {
          switch (op) {
          case 0:
            h = h * c + x;
            break;
          case 1:
            h = tanh(h) - c;
            break;
          case 2:
            x = sigmoid(x + c) * h;
            break;
          case 3:
            h = matmul(h, w) * c;
            break;
          case 4:
            h = where(h > 0.0f, h, c);
            break;
          default:
            x = c - x * h;
            break;
          }
        }
      }
      std::vector<float> values = h.to_vector<float>();
      const std::vector<float> xv = x.to_vector<float>();
      values.insert(values.end(), xv.begin(), xv.end());
      return std::pair{values, stats()};
    };
    const auto [shared_values, shared] = run(true);
    const auto [own_values, own] = run(false);
    EXPECT_EQ(shared_values, own_values) << "seed " << seed;
    EXPECT_EQ(shared.buffers_materialized, own.buffers_materialized) << "seed " << seed << "\n"
                                                                     << shared << "\n"
                                                                     << own;
    EXPECT_LE(shared.ops_recorded, own.ops_recorded) << "seed " << seed;
    shared_some += shared.ops_recorded < own.ops_recorded;
  }
  EXPECT_GE(shared_some, 30);
}

} // namespace

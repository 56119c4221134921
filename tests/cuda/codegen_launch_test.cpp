// Launch shapes and grids of the generated kernels, without a GPU: the elementwise grid (its
// vector groups, the cap, what transposing and segmented kernels keep) and the column layout's
// variants. The sources themselves are pinned in codegen_test.cpp.
#include "../scoped_env.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen_fixture.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::detail;
using namespace kt_codegen;

TEST_F(Codegen, LaunchShapes) {
  Tensor x = randn({1 << 20}), e = zeros({0}), m = randn({1000, 7});
  eval(x, e, m);
  FusedKernel big = kernel_of([&] { return x + 1; });
  FusedKernel empty = kernel_of([&] { return e + 1; });
  FusedKernel rows = kernel_of([&] { return sum(m, {1}); });
  CudaTarget t = target();
  EXPECT_EQ(launch_for(big, {true, false}, t).grid, uint32_t(132 * 8));
  EXPECT_EQ(launch_for(big, {true, true}, t).grid, uint32_t((1 << 20) / 1024)); // 4 per thread
  EXPECT_EQ(launch_for(empty, {true, false}, t).grid, 0u);                      // nothing to launch
  CudaLaunch r = launch_for(rows, {true, false}, t);
  EXPECT_EQ(r.block, 32u); // R = 7: one warp per output
  EXPECT_EQ(r.grid, 1000u);
  // Vectors need every operand aligned; 32-bit indexing needs everything to fit.
  const std::vector<void*> aligned = slot_bases(), misaligned = slot_bases(4);
  EXPECT_TRUE(choose_variant(big, aligned, target()).vec);
  EXPECT_FALSE(choose_variant(big, misaligned, target()).vec);
  EXPECT_TRUE(choose_variant(big, aligned, target()).index32);
  EXPECT_FALSE(choose_variant(rows, aligned, target()).vec);
  // Fewer elements than a block of vectors per SM (132 x 256 x 4): one per thread, on more
  // threads (an LSTM's gates at batch 32, [32, 256]); from there on, vectors.
  const int64_t edge = int64_t(132) * 256 * 4;
  Tensor below = randn({edge - 4}), at = randn({edge});
  eval(below, at);
  EXPECT_FALSE(choose_variant(kernel_of([&] { return sigmoid(below) * 2; }), aligned, t).vec);
  EXPECT_TRUE(choose_variant(kernel_of([&] { return sigmoid(at) * 2; }), aligned, t).vec);
  t.sm_count = 66; // the edge moves with the SMs
  EXPECT_TRUE(choose_variant(kernel_of([&] { return sigmoid(below) * 2; }), aligned, t).vec);
}

// The elementwise grid: a block for every 2 x 256 vectors, all of a thread's vectors loaded before
// any is computed, where a block per 256 vectors would be more than 8 per SM; else a block per
// 256 vectors, one a thread (the sources small kernels always had: Codegen.GoldenSources).
// KILN_ELEMENTWISE_GRID chooses `capped` (at most 8 blocks per SM, looping) or N a thread for
// every kernel. Transposing kernels keep their capped grid under any of them.
TEST_F(Codegen, ElementwiseVectorGroups) {
  const int64_t n = (int64_t(1) << 22) + 12; // vectors, a partial group at the end, no tail
  Tensor x = randn({n}), y = randn({n}), m = randn({4099, 1024}), row = randn({1024});
  Tensor col = randn({4099, 1});
  const int64_t cap = 132 * 8, edge = cap * 256 * 4; // f32: 4 elements a vector
  Tensor at_cap = randn({edge}), past_cap = randn({edge + 4});
  eval(x, y, m, row, col, at_cap, past_cap);
  FusedKernel chain = kernel_of([&] {
    Tensor s = sigmoid(tanh(x * y + 1));
    return relu(s * x + (1 - s) * y);
  });
  FusedKernel bcast = kernel_of([&] { return tanh(m + row) * col; });
  Tensor sq = randn({2048, 2048});
  eval(sq);
  FusedKernel transposed = kernel_of([&] { return contiguous(transpose(sq, 0, 1)) * 2; });
  const std::vector<void*> aligned = slot_bases();
  const CudaTarget t = target();
  const int64_t vectors = n / 4, blocks = (vectors + 255) / 256;
  {
    const CudaVariant v = choose_variant(chain, aligned, t);
    EXPECT_TRUE(v.vec);
    EXPECT_EQ(v.vec_group, 2);
    EXPECT_EQ(launch_for(chain, v, t).grid, uint32_t((blocks + 1) / 2));
    EXPECT_EQ(choose_variant(bcast, aligned, t).vec_group, 2);
    FusedKernel small = kernel_of([&] { return sigmoid(at_cap) * 2; });
    const CudaVariant sv = choose_variant(small, aligned, t);
    EXPECT_EQ(sv.vec_group, 0);
    EXPECT_EQ(launch_for(small, sv, t).grid, uint32_t(cap));
    EXPECT_EQ(
        choose_variant(kernel_of([&] { return sigmoid(past_cap) * 2; }), aligned, t).vec_group, 2);
    const CudaVariant tv = choose_variant(transposed, aligned, t);
    ASSERT_EQ(layout_of(transposed, tv), CudaLayout::tiled);
    EXPECT_EQ(launch_for(transposed, tv, t).grid, uint32_t(cap));
    FusedKernel segmented; // a segment's grid is capped (segmented.cpp): one vector a thread
    segmented.append_segment(small);
    segmented.append_segment(chain);
    const CudaVariant gv = choose_variant(segmented, aligned, t);
    ASSERT_EQ(gv.segments.size(), 2u);
    EXPECT_TRUE(gv.segments[1].vec);
    EXPECT_EQ(gv.segments[1].vec_group, 0);
  }
  {
    kt::ScopedEnv grid("KILN_ELEMENTWISE_GRID", "capped");
    const CudaVariant v = choose_variant(chain, aligned, t);
    EXPECT_EQ(v.vec_group, 0);
    EXPECT_EQ(launch_for(chain, v, t).grid, uint32_t(cap));
  }
  for (int group : {1, 2, 4}) {
    kt::ScopedEnv grid("KILN_ELEMENTWISE_GRID", std::to_string(group).c_str());
    const CudaVariant v = choose_variant(chain, aligned, t);
    ASSERT_EQ(v.vec_group, group);
    EXPECT_EQ(launch_for(chain, v, t).grid, uint32_t((blocks + group - 1) / group)) << group;
    const CudaKernelSource src = render_cuda(chain, v, t);
    const std::string g = std::to_string(group);
    EXPECT_NE(src.key.find("grp" + g), std::string::npos) << src.key;
    if (group > 1) {
      EXPECT_NE(src.source.find("c += " + g + " * stride"), std::string::npos);
      EXPECT_NE(src.source.find("if (c + " + std::to_string(group - 1) + " * stride < nv) {"),
                std::string::npos);
    }
    EXPECT_NO_THROW(compile_cuda(src, t)) << group;
    const CudaVariant tv = choose_variant(transposed, aligned, t);
    EXPECT_EQ(launch_for(transposed, tv, t).grid, uint32_t(cap)) << group;
    const CudaVariant bv = choose_variant(bcast, aligned, t);
    ASSERT_EQ(bv.vec_group, group);
    EXPECT_NE(bv.vec_inputs, 0u);   // the row, read as vectors
    EXPECT_NE(bv.splat_inputs, 0u); // the column, once a vector
    EXPECT_NO_THROW(compile_cuda(render_cuda(bcast, bv, t), t)) << group;
    for (DType d : {DType::bf16, DType::f64}) { // 8 and 4 elements a vector, mixed with f32
      FusedKernel mixed = kernel_of([&] { return cast(tanh(cast(x, d) * 2) + y, d); });
      const CudaVariant mv = choose_variant(mixed, aligned, t);
      ASSERT_EQ(mv.vec_group, group) << dtype_name(d);
      EXPECT_NO_THROW(compile_cuda(render_cuda(mixed, mv, t), t)) << dtype_name(d) << group;
    }
  }
  // The default grouping over other operand kinds: two outputs, integers, a bool result.
  Tensor xi = cast(x * 100, DType::i32);
  eval(xi);
  std::vector<FusedKernel> others = {kernel_of([&] { return xi * 3 + 1; }),
                                     kernel_of([&] { return x > y; })};
  {
    Capture c;
    Tensor a = tanh(x) * 2, b = a + y;
    eval(a, b);
    ASSERT_EQ(c.kernels.size(), 1u);
    ASSERT_EQ(c.kernels[0].outputs.size(), 2u);
    others.push_back(c.kernels[0]);
  }
  for (const FusedKernel& k : others) {
    const CudaVariant v = choose_variant(k, aligned, t);
    EXPECT_TRUE(v.vec);
    EXPECT_EQ(v.vec_group, 2);
    EXPECT_NO_THROW(compile_cuda(render_cuda(k, v, t), t));
  }
}

// The column layout (reductions over outer axes): vectors along the kept innermost dim where
// every operand allows them, bx threads along the columns, the rest of the block down the
// reduced axis, one block per bx * V columns.
TEST_F(Codegen, ColumnLayoutVariantsAndLaunchShapes) {
  Tensor m = randn({64, 64}), w = randn({64, 1}), odd = randn({37, 3}), one = randn({37, 1});
  Tensor h = cast(randn({16, 64}), DType::bf16);
  eval(m, w, odd, one, h);
  FusedKernel colsum = kernel_of([&] { return sum(m, {0}); });
  FusedKernel center = kernel_of([&] { return m - mean(m, {0}, true); });
  FusedKernel weighted = kernel_of([&] { return sum(m * w, {0}); }); // w: constant along columns
  FusedKernel sliced = kernel_of([&] { return sum(slice(m, 1, 1, 64), {0}); });
  FusedKernel odds = kernel_of([&] { return sum(odd, {0}); });
  FusedKernel ones = kernel_of([&] { return sum(one, {0}); });
  FusedKernel hsum = kernel_of([&] { return sum(h, {0}); });
  const std::vector<void*> aligned = slot_bases(), misaligned = slot_bases(4);
  CudaTarget t = target();

  CudaVariant v = choose_variant(colsum, aligned, target());
  EXPECT_TRUE(v.vec);
  EXPECT_EQ(v.rows_per_block, 8);
  EXPECT_TRUE(choose_variant(center, aligned, target()).vec);
  EXPECT_TRUE(choose_variant(weighted, aligned, target()).vec);
  EXPECT_TRUE(choose_variant(hsum, aligned, target()).vec); // 8 bf16 columns per thread
  EXPECT_FALSE(choose_variant(colsum, misaligned, target()).vec);
  EXPECT_EQ(choose_variant(colsum, misaligned, target()).rows_per_block, 32);
  EXPECT_FALSE(choose_variant(sliced, aligned, target()).vec); // 63 columns from element 1
  EXPECT_FALSE(choose_variant(odds, aligned, target()).vec);
  EXPECT_EQ(choose_variant(odds, aligned, target()).rows_per_block, 4); // 3 columns: 4 threads wide
  EXPECT_EQ(choose_variant(ones, aligned, target()).rows_per_block,
            1); // one column: the row layout

  // 64 x 64: 8 threads x 4 columns = 32 columns per block, 2 blocks; 64 rows of 4 per step.
  CudaLaunch l = launch_for(colsum, v, t);
  EXPECT_EQ(l.block, 128u);
  EXPECT_EQ(l.grid, 2u);
  // The benchmark's 16384 x 16384: 512 blocks of 256 threads.
  FusedKernel big = colsum;
  big.shape = {16384, 16384};
  big.inputs[0].strides = {16384, 1};
  CudaVariant bv = choose_variant(big, aligned, target());
  EXPECT_TRUE(bv.vec);
  l = launch_for(big, bv, t);
  EXPECT_EQ(l.block, 256u);
  EXPECT_EQ(l.grid, 512u);
  // 37 x 3 without vectors: 4 threads along the columns, 8 rows each, one block.
  l = launch_for(odds, choose_variant(odds, aligned, target()), t);
  EXPECT_EQ(l.block, 32u);
  EXPECT_EQ(l.grid, 1u);
  // An empty reduced axis still writes its outputs; no columns: nothing to launch.
  FusedKernel empty_rows = colsum, no_cols = colsum;
  empty_rows.shape = {0, 64};
  no_cols.shape = {64, 0};
  EXPECT_EQ(launch_for(empty_rows, choose_variant(empty_rows, aligned, target()), t).grid, 2u);
  EXPECT_EQ(launch_for(no_cols, {true, false, 32}, t).grid, 0u);
}

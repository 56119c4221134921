// The gather / scatter_add kernels (codegen/cuda_index.h) compile through NVRTC for sm_90 and
// sm_80 without a GPU, for every element and index type; their identity is structural.
#include "codegen/cuda_index.h"
#include "codegen/nvrtc/nvrtc_api.h"
#include "codegen/nvrtc_compiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <string>
#include <vector>

namespace {

using namespace kiln;
using namespace kiln::detail;

CudaTarget target(int arch) {
  CudaTarget t;
  t.arch = arch;
  t.sm_count = 132;
  t.nvrtc_version = 13000;
  return t;
}

IndexStep step(IndexStep::Op op, DType t, DType it, Shape x = {5, 3}, Shape index = {4, 3}) {
  IndexStep s;
  s.op = op;
  s.dtype = t;
  s.index_dtype = it;
  s.dim = 0;
  s.x_slot = 0;
  s.index_slot = 1;
  s.out_slot = 3;
  s.x = contiguous_layout(x);
  s.index = contiguous_layout(index);
  if (op == IndexStep::Op::scatter_add) {
    s.src = contiguous_layout(index);
    s.src_slot = 2;
    s.out_shape = x;
  } else {
    s.out_shape = index;
  }
  return s;
}

std::vector<IndexStep> every_kernel() {
  std::vector<IndexStep> all;
  for (DType it : {DType::i32, DType::i64}) {
    for (DType t : {DType::boolean, DType::f16, DType::f32, DType::f64}) // 1, 2, 4, 8 bytes
      all.push_back(step(IndexStep::Op::gather, t, it));
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
      all.push_back(step(IndexStep::Op::scatter_add, t, it));
  }
  return all;
}

TEST(IndexCodegen, EveryKernelCompilesForSm90AndSm80) {
  if (std::string why = nvrtc_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_GT(nvrtc_version(), 0);
  for (int arch : {90, 80})
    for (const IndexStep& s : every_kernel()) {
      const CudaKernelSource src = render_index_cuda(s, target(arch));
      EXPECT_NE(src.source.find("extern \"C\" __global__ void __launch_bounds__(256) " + src.name +
                                "(const __grid_constant__ Params p)"),
                std::string::npos);
      try {
        const CudaBinary b = compile_cuda(src, target(arch));
        EXPECT_GT(b.image.size(), 0u) << src.name;
      } catch (const std::exception& e) {
        ADD_FAILURE() << src.key << ": " << e.what();
      }
    }
}

TEST(IndexCodegen, KeysAreStructuralAndParamsMatchTheSource) {
  const IndexStep small = step(IndexStep::Op::gather, DType::f32, DType::i64);
  const IndexStep large = step(IndexStep::Op::gather, DType::f32, DType::i64, {700, 9}, {80, 9});
  EXPECT_EQ(render_index_cuda(small, target(90)).key, render_index_cuda(large, target(90)).key);
  EXPECT_EQ(index_kernel_id(small), index_kernel_id(large));
  // gather moves bytes: one kernel per element size, whatever the dtype.
  EXPECT_EQ(index_kernel_id(small),
            index_kernel_id(step(IndexStep::Op::gather, DType::i32, DType::i64)));
  std::vector<std::string> ids;
  for (const IndexStep& s : every_kernel()) ids.push_back(render_index_cuda(s, target(90)).key);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "two kernels share a key";
  // Pointers by slot (the operand's base plus its offset; replays patch only them), the error
  // record baked in.
  IndexError err;
  IndexStep sliced = step(IndexStep::Op::scatter_add, DType::f32, DType::i32);
  sliced.x.offset = 3;
  const ParamTemplate t = index_param_template(sliced, &err);
  ASSERT_EQ(t.pointers.size(), 4u);
  EXPECT_EQ(t.pointers[0].slot, 3); // out
  EXPECT_EQ(t.pointers[1].slot, 0); // x
  EXPECT_EQ(t.pointers[1].byte_offset, 12);
  EXPECT_EQ(t.pointers[3].slot, 2);                                 // src
  EXPECT_EQ(index_param_template(small, &err).pointers.size(), 3u); // gather: no src
  std::vector<void*> base = {reinterpret_cast<void*>(0x1000), reinterpret_cast<void*>(0x2000),
                             reinterpret_cast<void*>(0x3000), reinterpret_cast<void*>(0x4000)};
  const std::vector<std::byte> p = pack_index_params(sliced, base, &err);
  EXPECT_EQ(p.size(), 464u); // the source asserts sizeof(Params) == 464
  uint64_t f[5];
  std::memcpy(f, p.data(), sizeof f);
  EXPECT_EQ(f[0], 0x4000u);
  EXPECT_EQ(f[1], 0x1000u + 12);
  EXPECT_EQ(f[3], 0x3000u);
  EXPECT_EQ(f[4], reinterpret_cast<uintptr_t>(&err));
  EXPECT_EQ(
      index_launch(step(IndexStep::Op::gather, DType::f32, DType::i64, {5, 3}, {0, 3}), target(90))
          .grid,
      0u);
}

} // namespace

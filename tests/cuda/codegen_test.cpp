// CUDA code generation without a GPU: a few sources are compared with golden files, kernel
// keys are checked for what they must and must not depend on, variant choices are pinned, and
// a compile failure is checked to report NVRTC's log and a saved source. Launch shapes and
// grids are in codegen_launch_test.cpp; the whole op catalogue is compiled in
// codegen_catalogue_test.cpp.
//
// Golden files: tests/cuda/golden/*.cu. After an intended change to the generated code, rewrite
// them with   KILN_UPDATE_GOLDEN=1 build/tests/kiln_tests --gtest_filter='Codegen*'   and
// review the diff (bump kCodegenVersion in codegen/cuda_codegen.h when the meaning changes).
#include "../scoped_env.h"
#include "codegen/jit.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen_fixture.h"
#include "ir/kernel_key.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

using namespace kiln;
using namespace kiln::detail;
using namespace kt_codegen;

namespace fs = std::filesystem;

// ---- golden sources -------------------------------------------------------------------------

TEST_F(Codegen, GoldenSources) {
  Tensor x = randn({4096}), y = randn({4096});
  Tensor h = cast(randn({64, 32}), DType::bf16), g = cast(randn({32}), DType::bf16);
  Tensor m = randn({16, 32});
  eval(x, y, h, g, m);
  FusedKernel chain9 = kernel_of([&] { return chain(x, y); });
  FusedKernel bcast = kernel_of([&] { return h * g + 1; });
  FusedKernel rowsum = kernel_of([&] { return sum(m, {1}); });
  FusedKernel tcopy = kernel_of([&] { return contiguous(transpose(m, 0, 1)); });
  FusedKernel smax = kernel_of([&] { return softmax(m, 1); });
  FusedKernel center = kernel_of([&] { return m - mean(m, {0}, true); });
  FusedKernel colsum = kernel_of([&] { return sum(m, {0}); });
  Tensor hm = cast(m, DType::bf16);
  eval(hm);
  Tensor w0 = randn({32}), b0 = randn({32});
  FusedKernel hsoft = kernel_of([&] { return softmax(hm, 0); });
  Tensor rowv = randn({32}), colv = randn({16, 1});
  eval(rowv, colv);
  FusedKernel rowcol = kernel_of([&] { return (m + rowv) * colv; });
  FusedKernel hsoft_rows = kernel_of([&] { return softmax(hm, 1); });
  Tensor dm = cast(m, DType::f64);
  eval(dm);
  FusedKernel dsoft_rows = kernel_of([&] { return softmax(dm, 1); });
  FusedKernel dsoft_cols = kernel_of([&] { return softmax(dm, 0); });
  FusedKernel hlogsoft_rows = kernel_of([&] { return log_softmax(hm, 1); });
  Tensor hw = cast(w0, DType::bf16), hb = cast(b0, DType::bf16);
  eval(hw, hb);
  FusedKernel hln = kernel_of([&] { return layer_norm(hm, hw, hb); });
  Tensor w = randn({32}), b = randn({32});
  eval(w, b);
  FusedKernel ln = kernel_of([&] { return layer_norm(m, w, b); });
  // An LSTM cell at batch 1: two matmuls, the bias and the gates through chunk views.
  Tensor lx = randn({1, 32}), lh = randn({1, 8}), lc = randn({1, 8});
  Tensor lwx = randn({32, 32}), lwh = randn({8, 32}), lb = randn({32});
  eval(lx, lh, lc, lwx, lwh, lb);
  set_small_matmul(SmallMatmul::everywhere);
  FusedKernel lstm = kernel_of([&] {
    std::vector<Tensor> gt = chunk(matmul(lx, lwx) + matmul(lh, lwh) + lb, 4, 1);
    return sigmoid(gt[3]) * tanh(sigmoid(gt[1]) * lc + sigmoid(gt[0]) * tanh(gt[2]));
  });
  // The seed loop's step (a tiled matmul and its epilogue, which reads the matmul's operand).
  Tensor sx = randn({24, 24}), sw = randn({24, 24}), sb = randn({24});
  eval(sx, sw, sb);
  FusedKernel seed =
      kernel_of([&] { return sigmoid(tanh(matmul(sx, sw) + sb) * 0.5f + sx) - 0.5f; });
  // An LSTM's gates at batch 32, input of one feature: a short dot (K 1) beside a long one,
  // weights read transposed.
  Tensor gx = randn({32, 1}), gh = randn({32, 64}), gwx = randn({256, 1}), gwh = randn({256, 64});
  eval(gx, gh, gwx, gwh);
  FusedKernel gates = kernel_of(
      [&] { return matmul(gx, transpose(gwx, 0, 1)) + matmul(gh, transpose(gwh, 0, 1)); });
  // The same with an input of 8 features (two long dots), in the variant choose_variant picks:
  // both operands of both dots load along k.
  Tensor g8 = randn({32, 8}), gw8 = randn({256, 8});
  eval(g8, gw8);
  FusedKernel gates8 = kernel_of(
      [&] { return matmul(g8, transpose(gw8, 0, 1)) + matmul(gh, transpose(gwh, 0, 1)); });
  const CudaVariant gates8_v = choose_variant(gates8, slot_bases(), target());
  set_small_matmul(SmallMatmul::on_gpu);
  EXPECT_EQ(lstm.dots.size(), 8u);
  EXPECT_EQ(seed.dots.size(), 1u);
  // The GEMM-tile grid: x the column tiles times the cluster, y the row tiles, z the matrices.
  CudaVariant gv;
  gv.gemm_tile = 16;
  gv.dot_cluster = 4;
  const CudaLaunch gl = launch_for(seed, gv, target());
  EXPECT_EQ(gl.grid, 2u * 4u);
  EXPECT_EQ(gl.grid_y, 2u);
  EXPECT_EQ(gl.grid_z, 1u);
  EXPECT_EQ(launch_for(seed, gv, target(80)).grid, 2u); // no clusters before sm_90
  EXPECT_EQ(chain9.compute_ops(), 9);
  EXPECT_EQ(bcast.inputs.size(), 2u);
  EXPECT_EQ(rowsum.kind, FusedKernel::Kind::reduce);
  ASSERT_EQ(tcopy.inputs.size(), 1u);
  EXPECT_EQ(tcopy.inputs[0].cls, IndexClass::strided);

  // Reproducible mode: double-double dots (also across a cluster) and sums, kiln's exp/sigmoid.
  auto reproducible = [](FusedKernel k) {
    k.reproducible = true;
    return k;
  };
  const FusedKernel lstm_r = reproducible(lstm), smax_r = reproducible(smax),
                    colsum_r = reproducible(colsum);

  struct Case {
    const char* name;
    const FusedKernel& k;
    CudaVariant v;
  } cases[] = {
      {"chain9_f32_vec", chain9, {true, true}},
      {"broadcast_bf16", bcast, {true, false}},
      {"rowsum_f32", rowsum, {true, false}},
      {"transpose_copy_f32", tcopy, {true, false, 1, 0, 1u}},
      {"softmax_rows_f32", smax, {true, false, 1}},
      {"center_cols_f32", center, {true, false, 32}},
      {"center_cols_f32_vec", center, {true, true, 8}},
      {"colsum_f32_vec", colsum, {true, true, 8}},
      {"softmax_cols_bf16_vec", hsoft, {true, true, 8}},
      {"softmax_rows_f64_dsum", dsoft_rows, {true, false, 1}},
      {"softmax_cols_f64_dsum_vec", dsoft_cols, {true, true, 16}},
      {"layer_norm_f32_vec", ln, {true, true, 1}},
      {"softmax_rows_f32_cached", smax, {true, true, 1, -1, 0, 8}},
      {"layer_norm_f32_smem", ln, {true, true, 1, -1, 0, 0, true}},
      {"softmax_rows_bf16_cached", hsoft_rows, {true, true, 1, -1, 0, 4}},
      {"log_softmax_rows_bf16_cached", hlogsoft_rows, {true, true, 1, -1, 0, 4}},
      {"layer_norm_rows_bf16_cached", hln, {true, true, 1, -1, 0, 4}},
      {"layer_norm_rows_bf16_smem", hln, {true, true, 1, -1, 0, 0, true, 0b110u}},
      {"broadcast_row_col_f32_vec", rowcol, {true, true, 1, -1, 0, 0, false, 0b010u, 0b100u}},
      {"lstm_cell_dots_f32", lstm, {true, false, 1, -1, 0, 0, false, 0, 0, 8}},
      {"lstm_cell_dots_f32_cluster4", lstm, {true, false, 1, -1, 0, 0, false, 0, 0, 8, 4}},
      {"seed_step_gemm16_f32", seed, {true, false, 1, -1, 0, 0, false, 0, 0, 0, 1, 16}},
      {"seed_step_gemm32_cluster4_f32", seed, {true, false, 1, -1, 0, 0, false, 0, 0, 0, 4, 32}},
      {"seed_step_gemm64_f32", seed, {true, false, 1, -1, 0, 0, false, 0, 0, 0, 1, 64}},
      {"lstm_gates_gemm16_cluster2_short_f32",
       gates,
       {true, false, 1, -1, 0, 0, false, 0, 0, 0, 2, 16, 1u}},
      {"lstm_gates_gemm64_short_f32", gates, {true, false, 1, -1, 0, 0, false, 0, 0, 0, 1, 64, 1u}},
      {"lstm_gates_in8_chosen_f32", gates8, gates8_v},
      {"reproducible_lstm_cell_cluster4_f32",
       lstm_r,
       {true, false, 1, -1, 0, 0, false, 0, 0, 8, 4}},
      {"reproducible_softmax_rows_f32", smax_r, {true, false, 1}},
      {"reproducible_colsum_f32_vec", colsum_r, {true, true, 8}}};
  for (const Case& c : cases) {
    CudaKernelSource src = render_cuda(c.k, c.v, target());
    check_golden(c.name, src);
    EXPECT_NO_THROW(compile_cuda(src, target())) << c.name;
  }
}

// ---- keys, names, parameters ----------------------------------------------------------------

TEST_F(Codegen, EveryVariantFieldReachesBothKeys) {
  // One visit feeds the in-memory bytes and the text key (disk cache, golden sources): a
  // field changed must change both, or one variant's kernel would be handed to another.
  Tensor m = randn({16, 32});
  eval(m);
  const FusedKernel k = kernel_of([&] { return sum(m, {0}); });
  auto key = [&](const CudaVariant& v) {
    llvm::SmallVector<char, 16> s;
    append_variant(k, v, s);
    return std::string(s.begin(), s.end());
  };
  CudaVariant base;
  std::vector<CudaVariant> changed(15, base);
  changed[0].index32 = false;
  changed[1].vec = true;
  changed[2].rows_per_block = 32;
  changed[3].tile_dim = 0;
  changed[4].tile_inputs = 1u << 9;
  changed[5].cached_vecs = 2;
  changed[6].smem_row = true;
  changed[7].vec_inputs = 1u << 17;
  changed[8].splat_inputs = 1u << 3;
  changed[9].dot_bx = 8;
  changed[10].dot_cluster = 4;
  changed[11].gemm_tile = 32;
  changed[12].gemm_short_dots = 1;
  changed[13].gemm_a_along_k = 1;
  changed[14].gemm_b_along_k = 1;
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(key(changed[i]), key(base)) << "field " << i;
    EXPECT_NE(variant_key(k, changed[i]), variant_key(k, base)) << "field " << i;
  }
}

TEST_F(Codegen, TheJitCompilesOnceThenReadsTheDiskCache) {
  // One home for render -> disk cache -> NVRTC -> store (codegen/jit.h); runs without a GPU.
  std::string tmpl = (fs::temp_directory_path() / "kiln-jit-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  Tensor x = randn({64});
  eval(x);
  const FusedKernel k = kernel_of([&] { return tanh(x) * 3; });
  const CudaVariant v{true, false};
  Jit first(target(), tmpl);
  JitKernel a = first.build(k, v);
  EXPECT_EQ(first.stats().compiles, 1);
  EXPECT_EQ(first.stats().disk_hits, 0);
  EXPECT_FALSE(a.binary.image.empty());
  EXPECT_EQ(a.name, render_cuda(k, v, target()).name);
  Jit second(target(), tmpl); // another process, say: the disk cache has it
  JitKernel b = second.build(k, v);
  EXPECT_EQ(second.stats().compiles, 0);
  EXPECT_EQ(second.stats().disk_hits, 1);
  EXPECT_EQ(b.binary.image, a.binary.image);
  EXPECT_TRUE(b.from_disk);
  EXPECT_FALSE(a.from_disk);
  // The driver rejected the cached binary: compiled again, the entry replaced.
  JitKernel c = second.build(render_cuda(k, v, target()), /*fresh=*/true);
  EXPECT_EQ(second.stats().compiles, 1);
  EXPECT_FALSE(c.from_disk);
  EXPECT_EQ(Jit(target(), tmpl).build(k, v).binary.image, c.binary.image);
  fs::remove_all(tmpl);
}

TEST_F(Codegen, KeysAreStructural) {
  auto ew = [](Shape s, DType dt, double c1, double c2) {
    Tensor x = cast(randn(s), dt), y = cast(randn(s), dt);
    eval(x, y);
    return kernel_of([&] { return tanh(x * y + c1) * c2; });
  };
  FusedKernel small = ew({64}, DType::f32, 1, 2), big = ew({1000, 37}, DType::f32, 1, 2);
  FusedKernel consts = ew({64}, DType::f32, 3.5, -7);
  FusedKernel f16 = ew({64}, DType::f16, 1, 2);
  CudaVariant v32{true, false}, v64{false, false}, vec{true, true};
  auto key = [](const FusedKernel& k, CudaVariant v, int arch = 90) {
    return render_cuda(k, v, target(arch)).key;
  };
  // Sizes of the same rank... and of another rank with the same structure are one kernel only
  // when the rank matches; here both are contiguous, so the rank is the only difference.
  Tensor a = randn({64}), b = randn({64}), c = randn({128}), d = randn({128});
  eval(a, b, c, d);
  FusedKernel s64 = kernel_of([&] { return tanh(a * b + 1) * 2; });
  FusedKernel s128 = kernel_of([&] { return tanh(c * d + 1) * 2; });
  EXPECT_EQ(key(s64, v32), key(s128, v32));
  EXPECT_EQ(render_cuda(s64, v32, target()).source, render_cuda(s128, v32, target()).source);
  EXPECT_EQ(render_cuda(s64, v32, target()).name, render_cuda(s128, v32, target()).name);
  EXPECT_NE(key(small, v32), key(big, v32)); // rank 1 vs rank 2
  // Constants are parameters: same key and source, different packed bytes.
  EXPECT_EQ(key(small, v32), key(consts, v32));
  EXPECT_EQ(render_cuda(small, v32, target()).source, render_cuda(consts, v32, target()).source);
  std::vector<void*> bases(8, nullptr);
  EXPECT_NE(pack_params(small, v32, bases), pack_params(consts, v32, bases));
  // dtype, variant and arch are part of the key (and the name).
  EXPECT_NE(key(small, v32), key(f16, v32));
  EXPECT_NE(key(small, v32), key(small, v64));
  EXPECT_NE(key(small, v32), key(small, vec));
  EXPECT_NE(key(small, v32), key(small, v32, 80));
  EXPECT_NE(render_cuda(small, v32, target()).name, render_cuda(small, v64, target()).name);
  EXPECT_NE(render_cuda(small, v32, target()).name, render_cuda(small, v32, target(80)).name);
  // Index class: contiguous vs transposed vs broadcast vs scalar operand.
  Tensor sq = randn({8, 8}), sq2 = randn({8, 8}), row = randn({8}), s0 = full({}, 3.0);
  eval(sq, sq2, row, s0);
  FusedKernel cc = kernel_of([&] { return sq + sq2; });
  FusedKernel ct = kernel_of([&] { return sq + transpose(sq2, 0, 1); });
  FusedKernel cb = kernel_of([&] { return sq + row; });
  FusedKernel cs = kernel_of([&] { return sq + s0; });
  std::set<std::string> keys = {key(cc, v32), key(ct, v32), key(cb, v32), key(cs, v32)};
  EXPECT_EQ(keys.size(), 4u);
  // The name is readable: ops, dtype, variant, arch, hash.
  std::string name = render_cuda(small, vec, target()).name;
  EXPECT_EQ(name.rfind("kiln_mul_add_tanh_mul_f32_v4_sm90_", 0), 0u) << name;
}

TEST_F(Codegen, ParamsFollowTheDeclaredOrder) {
  Tensor x = randn({10, 6}), y = randn({6});
  eval(x, y);
  FusedKernel k = kernel_of([&] { return x * y + 2.5; });
  // n, sh0, sh1, in0 (contiguous), in1 (strided: only its nonzero stride, dim 1), out0, c<t>.
  CudaKernelSource src = render_cuda(k, {true, false}, target());
  std::vector<std::string> fields;
  size_t at = src.source.find("struct Params {");
  ASSERT_NE(at, std::string::npos);
  std::istringstream body(src.source.substr(at, src.source.find("};", at) - at));
  std::string line;
  std::getline(body, line);
  while (std::getline(body, line)) fields.push_back(line.substr(line.rfind(' ') + 1));
  ASSERT_EQ(fields.size(), 8u) << src.source;
  EXPECT_EQ(fields[0], "n;");
  EXPECT_EQ(fields[3], "in0;");
  EXPECT_EQ(fields[4], "in1;");
  EXPECT_EQ(fields[5], "in1_s1;");
  EXPECT_EQ(fields[6], "out0;");
  EXPECT_EQ(fields[7], "c3;"); // tape: load, load, mul, constant (value 3), add
  // Where do the slots live? Give each slot a distinct fake base and find them in the bytes.
  std::vector<char> mem(4096);
  std::vector<void*> bases;
  for (int s = 0; s < 8; ++s) bases.push_back(mem.data() + 256 * s);
  std::vector<std::byte> p = pack_params(k, {true, false}, bases);
  auto word = [&](int i) {
    uint64_t w;
    std::memcpy(&w, p.data() + 8 * i, 8);
    return w;
  };
  EXPECT_EQ(word(0), 60u);
  EXPECT_EQ(word(1), 10u);
  EXPECT_EQ(word(2), 6u);
  EXPECT_EQ(word(3), reinterpret_cast<uintptr_t>(bases[k.inputs[0].slot]) + 4 * k.inputs[0].offset);
  EXPECT_EQ(word(5), 1u);
  EXPECT_EQ(word(6), reinterpret_cast<uintptr_t>(bases[k.outputs[0].slot]));
  double c;
  std::memcpy(&c, p.data() + 8 * 7, 8);
  EXPECT_EQ(c, 2.5);
}

// The dot layout puts more elements side by side when there are enough of them (dot_bx 8, 16,
// 32: a warp then holds 4, 2 or 1 rows of a column's partial sums), and a grid smaller than the
// elements' runs makes blocks take several (standin_gpu_test.cpp checks their bits on a GPU).
TEST_F(Codegen, DotLayoutWidthsAndRuns) {
  set_small_matmul(SmallMatmul::everywhere);
  const std::vector<void*> aligned = slot_bases();
  auto dot_of = [&](int64_t n) {
    Tensor v = randn({1, 20}), w = randn({20, n});
    eval(v, w);
    return kernel_of([&] { return sigmoid(matmul(v, w)); });
  };
  const FusedKernel k256 = dot_of(256), k3000 = dot_of(3000), k40000 = dot_of(40000);
  set_small_matmul(SmallMatmul::on_gpu);
  ASSERT_EQ(k40000.dots.size(), 1u);
  EXPECT_EQ(choose_variant(k256, aligned, target()).dot_bx, 8);
  EXPECT_EQ(choose_variant(k3000, aligned, target()).dot_bx, 16);
  const CudaVariant wide = choose_variant(k40000, aligned, target());
  EXPECT_EQ(wide.dot_bx, 32);
  EXPECT_EQ(wide.dot_cluster, 1);
  EXPECT_LT(int64_t(launch_for(k40000, wide, target()).grid), (40000 + 31) / 32);
}

// Few groups of elements take a cluster that splits each dot's K only where K is long: past 16 ks
// a thread (K > 512 at 8 elements a block). An RNN cell's dots (K = hidden = 256) take none.
TEST_F(Codegen, DotClustersOnlyForLongDots) {
  set_small_matmul(SmallMatmul::everywhere);
  const std::vector<void*> aligned = slot_bases();
  auto cluster_of = [&](int64_t K) {
    Tensor v = randn({1, K}), w = randn({K, 256});
    eval(v, w);
    const FusedKernel k = kernel_of([&] { return tanh(matmul(v, w)); });
    const CudaVariant cv = choose_variant(k, aligned, target());
    EXPECT_EQ(cv.dot_bx, 8) << "K = " << K;
    return cv.dot_cluster;
  };
  EXPECT_EQ(cluster_of(256), 1);
  EXPECT_EQ(cluster_of(512), 1);
  EXPECT_EQ(cluster_of(1024), 8); // 32 groups x 8 blocks within ~2 blocks per SM of 132
  set_small_matmul(SmallMatmul::on_gpu);
}

TEST_F(Codegen, GemmTileChoice) {
  // The tile and cluster a tiled matmul takes (choose_gemm_tile): the smallest tile whose grid
  // stays within ~two blocks per SM, clusters while K is long and the grid small. Measured in
  // bench/results/2026-11-22-h100-gemm-k-groups.md.
  set_small_matmul(SmallMatmul::everywhere);
  struct Case {
    int64_t M, K, N;
    DType dt;
    int tile, cluster;
  } cases[] = {{256, 256, 256, DType::f32, 16, 1}, {64, 64, 64, DType::f32, 16, 1},
               {64, 512, 96, DType::f32, 16, 4},   {64, 256, 96, DType::f32, 16, 2},
               {32, 1024, 32, DType::f32, 16, 4},  {512, 128, 256, DType::f32, 32, 1},
               {512, 64, 512, DType::f32, 32, 1},  {1024, 16, 1024, DType::f32, 64, 1},
               {128, 128, 128, DType::f64, 16, 1}, {512, 40, 160, DType::f64, 32, 1}};
  const std::vector<void*> aligned = slot_bases();
  for (const Case& c : cases) {
    Tensor a = randn({c.M, c.K}, c.dt), b = randn({c.K, c.N}, c.dt);
    eval(a, b);
    FusedKernel k = kernel_of([&] { return tanh(matmul(a, b)); });
    const CudaVariant v = choose_variant(k, aligned, target());
    EXPECT_EQ(v.gemm_tile, c.tile) << c.M << " x " << c.K << " x " << c.N;
    EXPECT_EQ(v.dot_cluster, c.cluster) << c.M << " x " << c.K << " x " << c.N;
  }
  // The grid follows the target's SM count: with 40 SMs (80 blocks), the seed step's 256 x 256
  // takes tiles of 32 (64 blocks) instead of 16 (256).
  Tensor a = randn({256, 256}), b = randn({256, 256});
  eval(a, b);
  FusedKernel k = kernel_of([&] { return tanh(matmul(a, b)); });
  const std::vector<void*> unaligned_bases(64, reinterpret_cast<void*>((uintptr_t(1) << 20) + 4));
  CudaTarget small = target();
  small.sm_count = 40;
  EXPECT_EQ(choose_variant(k, aligned, small).gemm_tile, 32);
  // Dots of K <= 4 are short (summed by each element); the cluster splits the others' K.
  Tensor x = randn({64, 1}), wx = randn({1, 96}), h = randn({64, 256}), wh = randn({256, 96});
  eval(x, wx, h, wh);
  FusedKernel lstm = kernel_of([&] { return matmul(x, wx) + matmul(h, wh); });
  CudaVariant lv = choose_variant(lstm, aligned, target());
  EXPECT_EQ(lv.gemm_tile, 16);
  EXPECT_EQ(lv.gemm_short_dots, 1u);
  EXPECT_EQ(lv.dot_cluster, 2); // as {64, 256, 96} alone
  // Operands with stride 1 along k load along k: A row-major here, B read transposed below.
  EXPECT_EQ(lv.gemm_a_along_k, 3u);
  EXPECT_EQ(lv.gemm_b_along_k, 0u);
  Tensor ht = randn({256, 64}), wt = randn({96, 256});
  eval(ht, wt);
  FusedKernel bt = kernel_of([&] { return matmul(transpose(ht, 0, 1), transpose(wt, 0, 1)); });
  const CudaVariant btv = choose_variant(bt, aligned, target());
  EXPECT_EQ(btv.gemm_a_along_k, 0u);
  EXPECT_EQ(btv.gemm_b_along_k, 1u);
  Tensor x5 = randn({64, 5}), w5 = randn({5, 96});
  eval(x5, w5);
  FusedKernel five = kernel_of([&] { return matmul(h, wh) + matmul(x5, w5); });
  EXPECT_EQ(choose_variant(five, aligned, target()).gemm_short_dots, 0u);
  set_small_matmul(SmallMatmul::on_gpu);
}

TEST_F(Codegen, CompileErrorReportsLogAndSavedSource) {
  CudaKernelSource src;
  src.name = "kiln_broken_test_kernel";
  src.key = "broken";
  src.source = "extern \"C\" __global__ void kiln_broken_test_kernel() { undefined_thing(); }\n";
  try {
    compile_cuda(src, target());
    FAIL() << "expected a compile error";
  } catch (const kiln::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind("[compile] ", 0), 0u) << what;
    EXPECT_NE(what.find("undefined_thing"), std::string::npos) << what; // NVRTC's log
    size_t at = what.find("source saved to ");
    ASSERT_NE(at, std::string::npos) << what;
    std::string path = what.substr(at + 16);
    path = path.substr(0, path.find('\n'));
    EXPECT_TRUE(fs::exists(path)) << path;
    EXPECT_NE(read_file(path).find("undefined_thing"), std::string::npos);
  }
  // The engine is still usable for the next compile.
  Tensor a = randn({4}), b = randn({4});
  eval(a, b);
  FusedKernel k = kernel_of([&] { return a + b; });
  EXPECT_NO_THROW(compile_cuda(render_cuda(k, {true, false}, target()), target()));
}

TEST_F(Codegen, UnknownArchFallsBackToPtx) {
  Tensor a = randn({4}), b = randn({4});
  eval(a, b);
  FusedKernel k = kernel_of([&] { return a * b; });
  CudaTarget t = target(95); // not a real arch: PTX for the newest known arch below it
  CudaBinary bin = compile_cuda(render_cuda(k, {true, false}, t), t);
  EXPECT_FALSE(bin.is_cubin);
  ASSERT_FALSE(bin.image.empty());
  EXPECT_EQ(bin.image.back(), '\0');
  EXPECT_NE(std::string(bin.image.data()).find(".entry"), std::string::npos);
}

TEST_F(Codegen, KernelsStayWithinStaticSharedMemory) {
  // A backward kernel can read dozens of transposed inputs: only the tiles that fit 47 KB go
  // through shared memory, and inputs past the 32-bit tile mask are never tiled (a shift by 32
  // or more wrapped around and tiled 22 inputs, 91 KB, which ptxas rejects).
  std::vector<Tensor> xs;
  for (int i = 0; i < 40; ++i) xs.push_back(randn({64, 64}));
  eval(xs);
  FusedKernel k = kernel_of([&] {
    Tensor acc = transpose(xs[0], 0, 1);
    for (int i = 1; i < 40; ++i) acc = acc + transpose(xs[i], 0, 1) * float(i);
    return acc;
  });
  ASSERT_EQ(k.inputs.size(), 40u);
  std::vector<char> mem(64);
  std::vector<void*> bases(64, mem.data());
  const CudaVariant v = choose_variant(k, bases, target());
  EXPECT_EQ(layout_of(k, v), CudaLayout::tiled);
  const CudaKernelSource src = render_cuda(k, v, target());
  size_t tiles = 0;
  for (size_t at = src.source.find("[32][33]"); at != std::string::npos;
       at = src.source.find("[32][33]", at + 1))
    ++tiles;
  EXPECT_EQ(tiles, 11u) << "11 f32 tiles of 4,224 bytes fit 47 KB";
  EXPECT_NO_THROW(compile_cuda(src, target())); // NVRTC and ptxas, no GPU needed
}

// A segmented kernel (FusedKernel::segments): its Params are the block ends, then each
// segment's own Params as that segment alone would have them; the grid is the segments' blocks
// end to end; constants reach the right fields after a run rewrites the tape; NVRTC compiles it.
TEST_F(Codegen, SegmentedKernelParamsAndLaunch) {
  // z: enough elements for vectors (at least a block of them per SM: elementwise.cpp)
  Tensor x = randn({10, 6}), y = randn({6}), z = randn({140000});
  eval(x, y, z);
  const FusedKernel a = kernel_of([&] { return x * y + 2.5; });
  const FusedKernel b = kernel_of([&] { return exp(z) - 0.25; });
  FusedKernel k;
  k.append_segment(a);
  k.append_segment(b);
  ASSERT_EQ(k.segments.size(), 2u);
  EXPECT_EQ(kernel_key(k.segment(1)), kernel_key(b));
  EXPECT_NE(kernel_key(k), kernel_key(a) + kernel_key(b));

  std::vector<char> mem(1 << 16);
  std::vector<void*> bases;
  for (int s = 0; s < 8; ++s) bases.push_back(mem.data() + 4096 * s); // 16-byte aligned
  const CudaVariant v = choose_variant(k, bases, target());
  ASSERT_EQ(v.segments.size(), 2u);
  EXPECT_TRUE(v.segments[1].vec) << "the contiguous segment reads 16-byte vectors";
  EXPECT_FALSE(v.segments[0].vec) << "the broadcast one (a strided input) element by element";
  const CudaLaunch l = launch_for(k, v, target());
  // 60 elements: one block; 140,000 by vectors of 4: 137 blocks of 1024.
  EXPECT_EQ(l.grid, 138u);
  EXPECT_EQ(l.block, 256u);

  ParamTemplate t = param_template(k, v);
  const ParamTemplate ta = param_template(a, v.segments[0]);
  const ParamTemplate tb = param_template(b, v.segments[1]);
  ASSERT_EQ(t.bytes.size(), 16 + ta.bytes.size() + tb.bytes.size());
  int64_t ends[2];
  std::memcpy(ends, t.bytes.data(), 16);
  EXPECT_EQ(ends[0], 1);
  EXPECT_EQ(ends[1], 138);
  t.patch(bases);
  std::vector<std::byte> pa = ta.bytes, pb = tb.bytes;
  ParamTemplate::patch_pointers(pa, ta.pointers, bases);
  ParamTemplate::patch_pointers(pb, tb.pointers, bases);
  EXPECT_EQ(std::memcmp(t.bytes.data() + 16, pa.data(), pa.size()), 0);
  EXPECT_EQ(std::memcmp(t.bytes.data() + 16 + pa.size(), pb.data(), pb.size()), 0);

  // A run with other constants: each lands in its segment's field.
  ASSERT_EQ(t.values.size(), 2u);
  FusedKernel k2 = k;
  for (TapeInst& in : k2.tape)
    if (in.op == OpCode::constant) in.imm = in.imm == 2.5 ? 7.0 : -3.0;
  EXPECT_TRUE(ParamTemplate::patch_values(t.bytes, t.values, k2));
  double c0, c1;
  std::memcpy(&c0, t.bytes.data() + t.values[0].at, 8);
  std::memcpy(&c1, t.bytes.data() + t.values[1].at, 8);
  EXPECT_EQ(c0, 7.0);
  EXPECT_EQ(c1, -3.0);
  EXPECT_GT(t.values[1].at, 16 + pa.size() - 1) << "segment 1's constant is in segment 1's Params";

  const CudaKernelSource src = render_cuda(k, v, target());
  EXPECT_NE(src.source.find("if (b < p.end1) { seg1(p.s1, b - p.end0, p.end1 - p.end0); return; }"),
            std::string::npos)
      << src.source;
  EXPECT_NE(src.source.find("sizeof(Params) == " + std::to_string(t.bytes.size())),
            std::string::npos);
  const CudaBinary bin = compile_cuda(src, target());
  EXPECT_FALSE(bin.image.empty());
}

// The pasted device code (codegen/device/*.cuh, ir/philox.h) is part of every key: a binary
// built with other helpers is never loaded for this source.
TEST_F(Codegen, KeysCarryThePastedDeviceCode) {
  const std::string& tag = pasted_sources_tag();
  ASSERT_EQ(tag.size(), 11u);
  EXPECT_EQ(tag.substr(0, 3), "dev");
  Tensor x = randn({64});
  eval(x);
  const FusedKernel k = kernel_of([&] { return tanh(x) * 3; });
  const CudaKernelSource src = render_cuda(k, {true, false}, target());
  EXPECT_EQ(src.key.substr(src.key.size() - tag.size()), tag) << src.key;
}

// KILN_COMPILE=0: what the disk cache has loads, anything else is an error naming the kernel.
TEST_F(Codegen, CompilingCanBeForbiddenForAWarmDeployment) {
  std::string dir = (fs::temp_directory_path() / "kiln-jit-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  Tensor x = randn({64});
  eval(x);
  const FusedKernel cached = kernel_of([&] { return tanh(x) * 3; });
  const FusedKernel fresh = kernel_of([&] { return exp(x) - 1; });
  Jit(target(), dir).build(cached, {true, false});
  kt::ScopedEnv off("KILN_COMPILE", "0"); // the value before is back after the test (the suite's)
  Jit warm(target(), dir);
  EXPECT_FALSE(warm.build(cached, {true, false}).binary.image.empty());
  try {
    warm.build(fresh, {true, false});
    ADD_FAILURE() << "compiled with KILN_COMPILE=0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(render_cuda(fresh, {true, false}, target()).name),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("KILN_COMPILE=0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(warm.stats().compiles, 0);
  fs::remove_all(dir);
}

// Rows of several passes stay in registers for short tapes, and for long ones (layer_norm) where
// a shared-memory copy of the row would cost blocks per SM; other rows go to shared memory.
TEST_F(Codegen, RowsOfSeveralPassesStayInRegistersOrSharedMemory) {
  Tensor x = randn({4, 8192}), w = randn({8192}), b = randn({8192});
  Tensor hx = cast(x, DType::bf16), hw = cast(w, DType::bf16), hb = cast(b, DType::bf16);
  Tensor narrow = randn({4, 2048}), nw = randn({2048}), nb = randn({2048});
  eval(x, w, b, hx, hw, hb, narrow, nw, nb);
  const std::vector<void*> aligned = slot_bases();
  auto chosen = [&](const std::function<Tensor()>& f) {
    return choose_variant(kernel_of(f), aligned, target());
  };
  const CudaVariant ln = chosen([&] { return layer_norm(x, w, b); }); // 32 KB rows
  EXPECT_EQ(ln.cached_vecs, 8);
  EXPECT_FALSE(ln.smem_row);
  const CudaVariant hln = chosen([&] { return layer_norm(hx, hw, hb); }); // 16 KB rows
  EXPECT_EQ(hln.cached_vecs, 0);
  EXPECT_TRUE(hln.smem_row);
  const CudaVariant nln = chosen([&] { return layer_norm(narrow, nw, nb); }); // 8 KB rows
  EXPECT_EQ(nln.cached_vecs, 0);
  EXPECT_TRUE(nln.smem_row);
  const CudaVariant hsm = chosen([&] { return softmax(hx, 1); }); // a short tape
  EXPECT_EQ(hsm.cached_vecs, 4);
  EXPECT_FALSE(hsm.smem_row);
  // 64 KB rows (f64): too long for shared memory, and not kept in registers either.
  Tensor dx = cast(x, DType::f64), dw = cast(w, DType::f64), db = cast(b, DType::f64);
  eval(dx, dw, db);
  const CudaVariant dln = chosen([&] { return layer_norm(dx, dw, db); });
  EXPECT_EQ(dln.cached_vecs, 0);
  EXPECT_FALSE(dln.smem_row);
}

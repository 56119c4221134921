// Every kernel shape the op catalogue produces on the CPU backend, rendered and compiled with
// NVRTC for sm_90 and sm_80 without a GPU; and, on request, written to a directory so that two
// builds' generated sources can be compared (for refactoring the emitters).
#include "codegen/device/standin_program.h"
#include "codegen/jit.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen/standin.h"
#include "codegen_fixture.h"
#include "ir/kernel_key.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

using namespace kiln;
using namespace kiln::detail;
using namespace kt_codegen;

namespace {

namespace fs = std::filesystem;

// ---- the catalogue ------------------------------------------------------------------------

const DType kFloat[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

void float_ops(DType dt) {
  Tensor x = randn({33, 20}, dt), y = randn({33, 20}, dt);
  Tensor p = rand({33, 20}, dt) + 0.5;
  eval(x, y, p);
  eval(chain(x, y));
  eval(exp(x), log(p), log1p(p), sqrt(p), rsqrt(p), sin(x), cos(x), tanh(x), sigmoid(x), gelu(x));
  eval(relu(x), abs(x), neg(x), pow(p, y), pow(x, 2), pow(p, 0.5), maximum(x, y), minimum(x, y));
  eval(x / y, 1 - x, 2 / p, clamp(x, -0.5, 0.5), x * 1e-3 + y);
  eval(where(x > y, x, y), where(x <= 0, 0.0, x), eq(x, y), ne(x, 0.5), lt(x, y), ge(x, y));
  eval(cast(x, DType::i32), cast(x, DType::i64), cast(x, DType::boolean), cast(x, DType::f64),
       cast(x, DType::f16), cast(x, DType::bf16), cast(x, DType::f32));
  eval(softmax(x), log_softmax(x), softmax(x, 0));
  if (dt == DType::f32 || dt == DType::f64) { // tanh_grad, sigmoid_grad
    Tensor w = x.detach().requires_grad_();
    eval(grad(sum(tanh(w) * sigmoid(w)), {w})[0]);
  }
  eval(layer_norm(x, slice(y, 0, 0, 1).reshape({20}), slice(p, 0, 3, 4).reshape({20})),
       x - mean(x, {0}, true), argmax(x, 1, true) + x);
  for (auto r : {OpCode::sum, OpCode::mean, OpCode::max, OpCode::min}) {
    auto red = [&](const Tensor& t, std::vector<int> axes, bool keep) {
      switch (r) {
      case OpCode::sum:
        return sum(t, axes, keep);
      case OpCode::mean:
        return mean(t, axes, keep);
      case OpCode::max:
        return max(t, axes, keep);
      default:
        return min(t, axes, keep);
      }
    };
    Tensor z = reshape(x, {3, 11, 20});
    eval(red(x, {1}, false), red(x, {0}, true), red(x, {}, false), red(z, {1}, false),
         red(z, {0, 2}, false), red(exp(x) * y, {1}, false));
  }
  eval(argmax(x, 1), argmax(x, 0), argmax(x), argmax(x * y, 1, true));
  // Column layouts with whole vectors of every dtype's width (64 columns), a row slice (its
  // base moves by one row: still aligned) and a 3-d reduction over the middle axis.
  Tensor c = randn({9, 64}, dt), w = randn({9, 1}, dt), c3 = randn({4, 5, 16}, dt);
  eval(c, w, c3);
  eval(sum(c, {0}), mean(exp(c) * w, {0}, true), max(c, {0}), min(c, {0}), argmax(c, 0),
       c - mean(c, {0}, true), softmax(c, 0), log_softmax(c, 0), sum(slice(c, 0, 1, 9), {0}),
       sum(c3, {1}), c3 - max(c3, {0, 1}, true));
  // Small matmuls as dot products: a vector times a matrix with an epilogue, two rows times a
  // transposed matrix.
  set_small_matmul(SmallMatmul::everywhere);
  Tensor v = randn({20}, dt), mw = randn({20, 12}, dt);
  eval(v, mw);
  eval(tanh(matmul(v, mw)) + 1, matmul(slice(x, 0, 0, 2), transpose(slice(y, 0, 0, 8), 0, 1)));
  // Tiled matmuls (the GEMM-tile layout): the seed step's epilogue (it reads the matmul's own
  // operand), a transposed B, a transposed A, batched with a broadcast B, two dots of one kernel.
  Tensor sx = randn({24, 24}, dt), sw = randn({24, 24}, dt), sb = randn({24}, dt);
  Tensor bx = randn({3, 9, 20}, dt);
  eval(sx, sw, sb, bx);
  eval(sigmoid(tanh(matmul(sx, sw) + sb) * 0.5 + sx) - 0.5, matmul(x, transpose(y, 0, 1)),
       matmul(transpose(x, 0, 1), y) * 2, matmul(bx, mw), matmul(sx, sw) + matmul(sw, sx));
  set_small_matmul(SmallMatmul::on_gpu);
}

void int_ops(DType dt) {
  Tensor a = cast(arange(-40, 40, 1, DType::i64), dt), b = cast(arange(80, DType::i64), dt);
  a = reshape(a, {8, 10});
  b = reshape(b, {8, 10});
  eval(a, b);
  eval(a * b + 3, a - b, neg(a), abs(a), relu(a), pow(a, 3), pow(a, b), maximum(a, b),
       minimum(a, 7), a * 2 + 1);
  eval(where(a > b, a, b), eq(a, b), lt(a, 0), cast(a, DType::f32), cast(a, DType::f16),
       cast(a, DType::boolean), cast(a, DType::i32), cast(a, DType::i64), cast(a, DType::f64));
  eval(sum(a), sum(a, {1}), sum(a, {0}, true), max(a, {1}), min(a, {0}), argmax(a, 1), argmax(a));
  eval(a * 0.5, a / 3);           // promotes to float
  Tensor c = reshape(a, {5, 16}); // column layouts with vectors
  eval(sum(c, {0}), max(c, {0}, true) - c, argmax(c, 0), min(c, {0}));
}

void bool_ops() {
  Tensor x = randn({5, 7}), y = randn({5, 7});
  Tensor a = x > 0, b = y < 0.3;
  eval(a, b);
  eval(logical_and(a, b), logical_or(a, b), logical_not(a), a + b, a * b, where(a, x, y),
       cast(a, DType::f32), cast(a, DType::i64), eq(a, b), sum(a), sum(a, {1}), max(a, {0}),
       argmax(a, 1), a + 1);
  Tensor c = randn({3, 16}) > 0;
  eval(c);
  eval(sum(c, {0}), max(c, {0}), argmax(c, 0));
}

void view_ops() {
  Tensor x = randn({6, 8}), y = randn({8}), z = randn({6, 1}), w = randn({2, 3, 4, 5});
  Tensor h = cast(x, DType::bf16), g = cast(y, DType::bf16), s = full({}, 2.5);
  eval(x, y, z, w, h, g, s);
  eval(x + y, x * z + y, y + z, h * g + 1, h + cast(z, DType::bf16), x * s, s + 1);
  eval(transpose(x, 0, 1) + 1, contiguous(transpose(x, 0, 1)),
       contiguous(permute(w, {3, 1, 0, 2})));
  eval(slice(x, 1, 1, 7, 2) * 2, slice(x, 0, 2, 5), expand(z, {6, 8}) - x, exp(transpose(x, 0, 1)));
  eval(unsqueeze(y, 0) + z, reshape(x, {48}) * 3, squeeze(z) + 1, transpose(w, 1, 3) * 2);
  eval(sum(transpose(x, 0, 1), {1}), sum(w, {1, 3}), mean(w, {0, 2}), max(w, {3}), argmax(w, 2),
       sum(slice(x, 1, 0, 8, 3), {0}), sum(x + y, {0}), min(permute(w, {2, 0, 3, 1}), {1, 2}));
  // argmax down the columns of a broadcast value (the fuzzer's seeds 1000931 and 14000694 on
  // CUDA: "identifier acc1 is undefined")
  Tensor one = full({1, 1}, 1.5);
  eval(one);
  eval(argmax(expand(one, {3, 3}), 0), argmax(expand(cast(one, DType::i32), {2, 2}), 0),
       max(expand(one, {3, 5}), {0}), sum(expand(one, {4, 7}), {0}));
  eval(concat({x, x * 2}, 0), concat({x, exp(x), z}, 1),
       concat({cast(x, DType::f16), cast(x, DType::f16)}, 1));
}

void source_ops() {
  for (DType dt : kFloat) eval(rand({3, 17}, dt), randn({65}, dt), rand({4}, dt) * 2);
  eval(arange(10), arange(0.5, 3.0, 0.25, DType::f32), arange(-3, 9, 2, DType::i32),
       arange(5, DType::f64), cast(arange(0, 4, 1, DType::i64), DType::boolean));
  eval(full({3, 3}, 1.5) + reshape(arange(0, 9, 1, DType::f32), {3, 3}));
}

void empty_ops() {
  Tensor e = zeros({0, 3}), f = zeros({4, 0});
  eval(e + 1, exp(e) * 2, sum(e, {0}), sum(f, {1}), mean(f, {1}), sum(e), concat({e, e}, 0));
}

void eager_ops() {
  set_eager(true);
  Tensor x = randn({16}), y = randn({16});
  Tensor o = chain(x, y);
  eval(o, sum(o), softmax(o));
  set_eager(false);
}

std::vector<FusedKernel> catalogue() {
  Capture c;
  for (DType dt : kFloat) float_ops(dt);
  int_ops(DType::i32);
  int_ops(DType::i64);
  bool_ops();
  view_ops();
  source_ops();
  empty_ops();
  eager_ops();
  return c.kernels;
}

bool vec_possible(const FusedKernel& k) {
  if (k.kind != FusedKernel::Kind::elementwise) return false;
  for (const KernelInput& in : k.inputs)
    if (in.cls == IndexClass::strided) return false;
  for (const KernelOutput& o : k.outputs)
    if (!is_contiguous(Layout{k.shape, o.strides, 0})) return false;
  return true;
}

// One compile job per unique full key.
struct Job {
  FusedKernel kernel;
  CudaVariant variant;
  int arch;
  CudaKernelSource src;
};

// The catalogue's kernels as compile jobs: every unique structure once for sm_90 (the vec
// variant where it applies, else 32-bit indices); every 8th also with 64-bit indices; about 20
// for sm_80. Reductions also with the variant a launch on 16-byte aligned buffers chooses (row
// or column layout, vectors, cached rows), every 4th of those for sm_80 too; kernels with dot
// products in the layout launches choose. `unique` and `sm80` count structures and sm_80 jobs.
std::vector<Job> catalogue_jobs(const std::vector<FusedKernel>& all, size_t& unique_count,
                                int& sm80) {
  std::map<std::string, FusedKernel> unique;
  for (const FusedKernel& k : all) unique.emplace(kernel_key(k), k);
  unique_count = unique.size();
  std::vector<Job> jobs;
  std::map<std::string, bool> seen;
  int n = 0, nred = 0;
  sm80 = 0;
  const std::vector<void*> aligned_bases = slot_bases();
  for (auto& [key, k] : unique) {
    // Kernels with dot products only in a layout launches choose (dot or GEMM tile), segmented
    // kernels in the variants their segments' launches choose.
    const bool dots = !k.dots.empty();
    const CudaVariant base = dots || k.segmented() ? choose_variant(k, aligned_bases, target())
                                                   : CudaVariant{true, vec_possible(k)};
    CudaVariant wide = base, plain = base; // 64-bit indices; for sm_80 without vectors
    wide.index32 = wide.vec = false;
    plain.vec = false;
    std::vector<std::pair<CudaVariant, int>> todo = {{base, 90}};
    if (n % 8 == 0) todo.push_back({wide, 90});
    if (n % 20 == 0) todo.push_back({plain, 80}), ++sm80;
    if (dots) todo.push_back({base, 80}), ++sm80; // clusters on sm_90 only
    if (k.kind == FusedKernel::Kind::reduce) {
      CudaVariant chosen = choose_variant(k, aligned_bases, target());
      todo.push_back({chosen, 90});
      if (nred++ % 4 == 0) todo.push_back({chosen, 80}), ++sm80;
      if (chosen.rows_per_block > 1) { // the column layout without vectors, 64-bit indices
        chosen.vec = false;
        chosen.index32 = false;
        todo.push_back({chosen, 90});
      }
    }
    ++n;
    for (auto& [v, arch] : todo) {
      CudaKernelSource src = render_cuda(k, v, target(arch));
      if (seen.emplace(src.key, true).second) jobs.push_back({k, v, arch, src});
    }
  }
  return jobs;
}

} // namespace

TEST_F(Codegen, CatalogueCompilesForSm90AndSm80) {
  ASSERT_GT(nvrtc_version(), 0);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<FusedKernel> all = catalogue();
  ASSERT_GT(all.size(), 100u);
  size_t unique = 0;
  int sm80 = 0;
  const std::vector<Job> jobs = catalogue_jobs(all, unique, sm80);
  // Basic shape of every source and of its parameters.
  bool ops[64] = {};
  for (const Job& j : jobs) {
    for (const TapeInst& t : j.kernel.tape) ops[static_cast<int>(t.op)] = true;
    EXPECT_NE(j.src.source.find("extern \"C\" __global__ void __launch_bounds__(256) " +
                                j.src.name + "(const __grid_constant__ Params p)"),
              std::string::npos)
        << j.src.source;
    std::vector<void*> bases(16, reinterpret_cast<void*>(uintptr_t(1) << 20));
    std::vector<std::byte> params = pack_params(j.kernel, j.variant, bases);
    ASSERT_FALSE(params.empty());
    ASSERT_EQ(params.size() % 8, 0u);
    // The source checks sizeof(Params) against this count; the compile below proves it.
    EXPECT_NE(j.src.source.find("sizeof(Params) == " + std::to_string(params.size())),
              std::string::npos)
        << j.src.source;
  }
  // Every op of the table that can appear in a kernel did.
  for (OpCode op : {OpCode::constant, OpCode::rand_uniform, OpCode::rand_normal, OpCode::iota,
                    OpCode::copy,     OpCode::neg,          OpCode::abs,         OpCode::relu,
                    OpCode::exp,      OpCode::log,          OpCode::log1p,       OpCode::sqrt,
                    OpCode::rsqrt,    OpCode::sin,          OpCode::cos,         OpCode::tanh,
                    OpCode::sigmoid,  OpCode::gelu,         OpCode::logical_not, OpCode::cast,
                    OpCode::add,      OpCode::sub,          OpCode::mul,         OpCode::div,
                    OpCode::pow,      OpCode::maximum,      OpCode::minimum,     OpCode::eq,
                    OpCode::ne,       OpCode::lt,           OpCode::le,          OpCode::gt,
                    OpCode::ge,       OpCode::logical_and,  OpCode::logical_or,  OpCode::where,
                    OpCode::sum,      OpCode::mean,         OpCode::max,         OpCode::min,
                    OpCode::argmax,   OpCode::sigmoid_grad, OpCode::tanh_grad})
    EXPECT_TRUE(ops[static_cast<int>(op)]) << "no kernel used " << op_name(op);

  // Compile on two threads (NVRTC is thread-safe per program).
  std::vector<std::string> errors(jobs.size());
  std::vector<size_t> sizes(jobs.size());
  std::vector<double> ms(jobs.size());
  auto work = [&](size_t first, size_t step) {
    for (size_t i = first; i < jobs.size(); i += step) {
      try {
        CudaBinary b = compile_cuda(jobs[i].src, target(jobs[i].arch));
        sizes[i] = b.is_cubin ? b.image.size() : 0;
        ms[i] = b.compile_ms;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  unsigned nthreads = std::max(2u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < nthreads; ++t) threads.emplace_back(work, t, nthreads);
  for (auto& t : threads) t.join();
  double total_ms = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(errors[i], "") << jobs[i].src.key;
    EXPECT_GT(sizes[i], 0u) << jobs[i].src.name << " (sm_" << jobs[i].arch << "): no cubin";
    total_ms += ms[i];
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[codegen] " << all.size() << " kernels run, " << unique << " structures, "
            << jobs.size() << " compiles (" << sm80 << " for sm_80), NVRTC " << total_ms / 1000
            << " s total, " << total_ms / std::max<size_t>(1, jobs.size()) << " ms each, wall "
            << wall << " s\n";
}

// The stand-in interpreter (codegen/standin.h) covers every kernel of the catalogue outside
// reproducible mode: every layout, reductions and segmented kernels. Its argument block holds the
// kernel's own Params one word in, then its Program; tests/cuda/standin_gpu_test.cpp checks its
// results on a GPU.
standin::Layout standin_layout(CudaLayout l) {
  switch (l) {
  case CudaLayout::elementwise:
  case CudaLayout::tiled:
    return standin::l_elementwise;
  case CudaLayout::dot:
    return standin::l_dot;
  case CudaLayout::gemm_tile:
    return standin::l_gemm_tile;
  case CudaLayout::row_reduce:
    return standin::l_row_reduce;
  case CudaLayout::column_reduce:
    return standin::l_column_reduce;
  }
  return standin::l_elementwise;
}

TEST_F(Codegen, TheStandinCoversEveryKernelOfTheCatalogue) {
  size_t unique = 0;
  int sm80 = 0;
  const std::vector<Job> jobs = catalogue_jobs(catalogue(), unique, sm80);
  std::map<standin::Layout, int> covered;
  for (const Job& j : jobs) {
    std::string why;
    const std::optional<StandinLaunch> s = plan_standin(j.kernel, j.variant, target(j.arch), &why);
    EXPECT_EQ(s.has_value(), !j.kernel.reproducible) << j.src.name << ": " << why;
    if (!s) continue;
    const ParamTemplate own = param_template(j.kernel, j.variant);
    ASSERT_EQ(s->params.bytes.size(), size_t(standin::kArgsBytes));
    uint64_t program_at = 0;
    std::memcpy(&program_at, s->params.bytes.data(), 8);
    EXPECT_EQ(program_at, 8 + own.bytes.size());
    EXPECT_EQ(0, std::memcmp(s->params.bytes.data() + 8, own.bytes.data(), own.bytes.size()));
    ASSERT_EQ(s->params.pointers.size(), own.pointers.size());
    for (size_t p = 0; p < own.pointers.size(); ++p)
      EXPECT_EQ(s->params.pointers[p].at, own.pointers[p].at + 8);
    standin::Program pr;
    std::memcpy(&pr, s->params.bytes.data() + program_at, sizeof pr);
    if (j.kernel.segmented()) {
      EXPECT_EQ(pr.layout, standin::l_segmented);
      EXPECT_EQ(pr.n_in, j.kernel.segments.size());
      EXPECT_EQ(s->shape.grid, launch_for(j.kernel, j.variant, target(j.arch)).grid);
      covered[standin::l_segmented]++;
      continue;
    }
    const CudaLayout layout = layout_of(j.kernel, j.variant);
    EXPECT_EQ(pr.layout, standin_layout(layout)) << j.src.name;
    covered[standin_layout(layout)]++;
    EXPECT_EQ(pr.n_inst, j.kernel.tape.size());
    EXPECT_EQ(pr.n_in, j.kernel.inputs.size());
    EXPECT_EQ(pr.n_out, j.kernel.outputs.size());
    EXPECT_EQ(pr.n_dots, j.kernel.dots.size());
    if (layout == CudaLayout::dot)
      EXPECT_EQ(s->shape.cluster, j.arch >= 90 ? uint32_t(std::max(1, j.variant.dot_cluster)) : 1u);
    if (layout == CudaLayout::row_reduce || layout == CudaLayout::column_reduce) {
      const CudaLaunch own_shape = launch_for(j.kernel, j.variant, target(j.arch));
      EXPECT_EQ(s->shape.grid, own_shape.grid); // the same threads, folding the same elements
      EXPECT_EQ(s->shape.block, own_shape.block);
      EXPECT_EQ(pr.passes, reduce_passes(j.kernel).passes);
    }
  }
  for (standin::Layout l : {standin::l_elementwise, standin::l_dot, standin::l_gemm_tile,
                            standin::l_row_reduce, standin::l_column_reduce, standin::l_segmented})
    EXPECT_GT(covered[l], 0) << "no catalogue kernel of stand-in layout " << int(l);
  int total = 0;
  for (const auto& [l, n] : covered) total += n;
  std::printf("the stand-in covers %d of %zu catalogue kernels (row reduce %d, column reduce %d, "
              "segmented %d, dot %d, GEMM tile %d)\n",
              total, jobs.size(), covered[standin::l_row_reduce], covered[standin::l_column_reduce],
              covered[standin::l_segmented], covered[standin::l_dot],
              covered[standin::l_gemm_tile]);
}

// For refactoring the emitters: with KILN_TEST_SOURCES_DIR set, writes every source of the
// catalogue's jobs there, with their launch shapes in launches.txt (no compiles), so that two
// builds' outputs can be compared with diff -r. Skipped otherwise.
TEST_F(Codegen, CatalogueSourcesToDirectory) {
  const char* dir = std::getenv("KILN_TEST_SOURCES_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "KILN_TEST_SOURCES_DIR not set";
  size_t unique = 0;
  int sm80 = 0;
  std::vector<Job> jobs = catalogue_jobs(catalogue(), unique, sm80);
  // More layouts than the compile test takes: the variants launches choose on a small GPU, and
  // every cluster size and GEMM tile for kernels with dot products.
  const std::vector<void*> aligned_bases = slot_bases();
  const std::vector<void*> unaligned_bases = slot_bases(4);
  CudaTarget small = target();
  small.sm_count = 16;
  const size_t catalogue_jobs_count = jobs.size();
  for (size_t i = 0; i < catalogue_jobs_count; ++i) {
    const FusedKernel k = jobs[i].kernel;
    std::vector<CudaVariant> more = {choose_variant(k, aligned_bases, small),
                                     choose_variant(k, unaligned_bases, target())};
    if (!k.dots.empty())
      for (int tile : {0, 16, 32, 64})
        for (int cluster : {1, 2, 4, 8}) {
          CudaVariant v = more[0];
          v.gemm_tile = tile;
          v.dot_bx = tile ? 0 : std::max(v.dot_bx, 8);
          v.dot_cluster = cluster;
          more.push_back(v);
        }
    for (const CudaVariant& v : more) jobs.push_back({k, v, 90, render_cuda(k, v, target())});
  }
  fs::create_directories(dir);
  std::ofstream launches(fs::path(dir) / "launches.txt");
  for (const Job& j : jobs) {
    std::ofstream f(fs::path(dir) / (j.src.name + "_sm" + std::to_string(j.arch) + ".cu"));
    f << j.src.key << "\n" << j.src.source;
    for (const CudaTarget& t : {target(j.arch), small}) {
      const CudaLaunch l = launch_for(j.kernel, j.variant, t);
      launches << j.src.name << " sm" << j.arch << " on " << t.sm_count << " SMs: grid " << l.grid
               << " x " << l.grid_y << " x " << l.grid_z << ", block " << l.block << ", shared "
               << l.shared_bytes << "\n";
    }
  }
  EXPECT_GT(jobs.size(), 100u);
}

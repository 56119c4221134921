// Jit::build_all: a new plan's kernels compiled several at once (KILN_COMPILE_THREADS). NVRTC
// compiles without a GPU, so this runs wherever NVRTC loads.
#include "../scoped_env.h"
#include "codegen/jit.h"
#include "codegen_fixture.h"

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

using namespace kt_codegen;
namespace fs = std::filesystem;

namespace {

using kt::ScopedEnv;

struct JitParallel : Codegen {
  std::vector<std::string> dirs;
  std::string new_dir() {
    std::string t = (fs::temp_directory_path() / "kiln-jit-parallel-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    dirs.push_back(t);
    return t;
  }
  void TearDown() override {
    for (const std::string& d : dirs) fs::remove_all(d);
    Codegen::TearDown();
  }
  // Six structurally different kernels.
  std::vector<CudaKernelSource> sources() {
    Tensor x = randn({64}), y = randn({8, 8});
    eval(x, y);
    std::vector<CudaKernelSource> out;
    for (int i = 0; i < 6; ++i) {
      FusedKernel k = kernel_of([&] {
        Tensor t = i < 3 ? x : y;
        for (int j = 0; j <= i % 3; ++j) t = tanh(t * float(j + 2)) + exp(t);
        return t;
      });
      out.push_back(render_cuda(k, {true, false}, target()));
    }
    return out;
  }
};

TEST_F(JitParallel, CompilesEveryKernelOnceAndAsOneAtATimeWould) {
  const std::vector<CudaKernelSource> srcs = sources();
  ScopedEnv threads("KILN_COMPILE_THREADS", "3");
  const std::string dir = new_dir();
  Jit parallel(target(), dir);
  const std::vector<JitKernel> built = parallel.build_all(srcs);
  ASSERT_EQ(built.size(), srcs.size());
  EXPECT_EQ(parallel.stats().compiles, 6);
  EXPECT_EQ(parallel.stats().disk_hits, 0);
  Jit serial(target(), new_dir());
  for (size_t i = 0; i < srcs.size(); ++i) {
    const JitKernel one = serial.build(srcs[i]);
    EXPECT_EQ(built[i].name, srcs[i].name) << i; // results in the order of the sources
    EXPECT_FALSE(built[i].from_disk) << i;
    EXPECT_EQ(built[i].binary.image, one.binary.image) << srcs[i].name;
  }
  // A later process finds them all in the disk cache.
  Jit later(target(), dir);
  for (const JitKernel& k : later.build_all(srcs)) EXPECT_TRUE(k.from_disk) << k.name;
  EXPECT_EQ(later.stats().compiles, 0);
  EXPECT_EQ(later.stats().disk_hits, 6);
}

TEST_F(JitParallel, AFailingKernelIsReportedAfterTheOthersAreBuilt) {
  std::vector<CudaKernelSource> srcs = sources();
  srcs.insert(srcs.begin() + 2, CudaKernelSource{"kiln_broken", "broken-key",
                                                 "extern \"C\" __global__ void kiln_broken() { "
                                                 "undeclared_name = 1; }"});
  ScopedEnv threads("KILN_COMPILE_THREADS", "4");
  const std::string dir = new_dir();
  Jit jit(target(), dir);
  try {
    jit.build_all(srcs);
    FAIL() << "a kernel that does not compile must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
  }
  srcs.erase(srcs.begin() + 2);
  Jit later(target(), dir);
  later.build_all(srcs);
  EXPECT_EQ(later.stats().disk_hits, 6) << "the others were compiled and stored all the same";
}

TEST_F(JitParallel, ThreadCountFollowsTheSetting) {
  {
    ScopedEnv threads("KILN_COMPILE_THREADS", "5");
    EXPECT_EQ(compile_threads(), 5);
  }
  ScopedEnv unset("KILN_COMPILE_THREADS", nullptr);
  EXPECT_EQ(compile_threads(), 1);
}

} // namespace

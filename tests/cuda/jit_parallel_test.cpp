// Jit::build_all: a new plan's kernels compiled several at once, in compile worker processes
// (KILN_COMPILE_PROCESSES) or on threads (KILN_COMPILE_THREADS). NVRTC compiles without a GPU,
// so this runs wherever NVRTC loads.
#include "../scoped_env.h"
#include "codegen/jit.h"
#include "codegen/nvrtc/compile_workers.h"
#include "codegen_fixture.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

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
  ScopedEnv no_workers("KILN_COMPILE_PROCESSES", "0"); // the threads, not the workers
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
  ScopedEnv no_workers("KILN_COMPILE_PROCESSES", "0");
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

TEST_F(JitParallel, CompileWorkersBuildWhatTheProcessWould) {
  const std::vector<CudaKernelSource> srcs = sources();
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "3");
  ScopedEnv worker("KILN_COMPILE_WORKER", KILN_CACHE_TOOL);
  const std::string dir = new_dir();
  Jit jit(target(), dir);
  const std::vector<JitKernel> built = jit.build_all(srcs);
  EXPECT_EQ(jit.stats().worker_compiles, 6) << "every kernel compiled in a worker process";
  EXPECT_EQ(jit.stats().compiles, 6);
  EXPECT_GT(jit.stats().compile_ms, 0);
  Jit here(target(), new_dir());
  for (size_t i = 0; i < srcs.size(); ++i) {
    EXPECT_EQ(built[i].name, srcs[i].name) << i;
    EXPECT_EQ(built[i].binary.image, here.build(srcs[i]).binary.image) << srcs[i].name;
  }
  // The workers stay: a second batch is compiled by them too, and cached kernels are not.
  Tensor z = randn({32});
  eval(z);
  std::vector<CudaKernelSource> more = {srcs[0], srcs[1]};
  for (int i = 0; i < 2; ++i)
    more.push_back(render_cuda(kernel_of([&] { return sigmoid(z * float(i + 7)) - z; }),
                               {true, false}, target()));
  jit.build_all(more);
  EXPECT_EQ(jit.stats().worker_compiles, 8);
  EXPECT_EQ(jit.stats().disk_hits, 2);
}

// A fork()'s child inherits the pool; when it lets go of it (here: asks for another pool, as
// its exit's static destructors would), the parent's workers must live on.
TEST_F(JitParallel, AForkedChildLeavesTheParentsWorkersAlone) {
  const std::vector<CudaKernelSource> srcs = sources();
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "2");
  ScopedEnv worker("KILN_COMPILE_WORKER", KILN_CACHE_TOOL);
  const std::string dir = new_dir();
  Jit jit(target(), dir);
  jit.build_all({srcs[0], srcs[1]});
  ASSERT_EQ(jit.stats().worker_compiles, 2);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (void)CompileWorkers::shared(1, dir); // drops the inherited pool
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  jit.build_all({srcs[2], srcs[3], srcs[4]});
  EXPECT_EQ(jit.stats().worker_compiles, 5) << "the parent's workers were ended by the child";
}

TEST_F(JitParallel, WithoutAWorkerTheProcessCompiles) {
  const std::vector<CudaKernelSource> srcs = sources();
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "4");
  ScopedEnv worker("KILN_COMPILE_WORKER", "/nonexistent/kiln-cache");
  EXPECT_EQ(compile_worker_path(), "");
  const std::string log = new_dir() + "/misses.jsonl";
  ScopedEnv miss_log("KILN_CACHE_MISS_LOG", log.c_str());
  Jit jit(target(), new_dir());
  jit.build_all(srcs);
  EXPECT_EQ(jit.stats().worker_compiles, 0);
  EXPECT_EQ(jit.stats().compiles, 6);
  std::ifstream in(log);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 6) << "one miss logged per kernel, not one per lookup";
}

TEST_F(JitParallel, AWorkerThatDiesLeavesItsKernelsToTheProcess) {
  const std::vector<CudaKernelSource> srcs = sources();
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "2");
  ScopedEnv worker("KILN_COMPILE_WORKER", "/bin/true"); // exits at once, answering nothing
  { // the workers do start, and their jobs come back as errors
    std::unique_ptr<CompileWorkers> w = CompileWorkers::start("/bin/true", 2, new_dir());
    ASSERT_NE(w, nullptr);
    for (const CompileWorkers::Result& r : w->compile(srcs, target())) {
      EXPECT_FALSE(r.ok);
      EXPECT_FALSE(r.error.empty());
    }
  }
  const std::string dir = new_dir();
  Jit jit(target(), dir);
  const std::vector<JitKernel> built = jit.build_all(srcs);
  EXPECT_EQ(jit.stats().worker_compiles, 0);
  EXPECT_EQ(jit.stats().compiles, 6);
  for (const JitKernel& k : built) EXPECT_FALSE(k.binary.image.empty()) << k.name;
  EXPECT_EQ(CompileWorkers::shared(2, dir), nullptr)
      << "a tool whose workers all died unheard is not started again for every batch";
}

TEST_F(JitParallel, ProcessCountFollowsTheSetting) {
  {
    ScopedEnv processes("KILN_COMPILE_PROCESSES", "5");
    EXPECT_EQ(compile_processes(), 5);
  }
  ScopedEnv unset("KILN_COMPILE_PROCESSES", nullptr);
  EXPECT_GE(compile_processes(), 1);
  EXPECT_LE(compile_processes(), 8);
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

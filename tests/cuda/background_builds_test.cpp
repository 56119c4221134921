// BackgroundBuilds stopped (the exit handler's path) while a round of new kernels compiles: the
// round starts no further compile, so an exit waits for the compiles in flight, not for the
// round. NVRTC compiles without a GPU, so this runs wherever NVRTC loads.
#include "../scoped_env.h"
#include "codegen/jit.h"
#include "codegen_fixture.h"
#include "runtime/cuda/background_builds.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

using namespace kt_codegen;
namespace fs = std::filesystem;

namespace {

using kt::ScopedEnv;
using Clock = std::chrono::steady_clock;

constexpr int kKernels = 12;

struct BackgroundBuildsStop : Codegen {
  std::string dir;
  void SetUp() override {
    Codegen::SetUp();
    dir = (fs::temp_directory_path() / "kiln-background-stop-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  }
  void TearDown() override {
    fs::remove_all(dir);
    Codegen::TearDown();
  }
  // kKernels structurally different kernels, each a compile of its own.
  std::vector<BackgroundBuilds::Job> jobs() {
    Tensor x = randn({64});
    eval(x);
    std::vector<BackgroundBuilds::Job> out;
    for (int i = 0; i < kKernels; ++i) {
      FusedKernel k = kernel_of([&] {
        Tensor t = x;
        for (int j = 0; j <= i; ++j) t = tanh(t * float(j + 2)) + exp(t);
        return t;
      });
      CudaKernelSource src = render_cuda(k, {true, false}, target());
      out.push_back({src.name, std::move(src)});
    }
    return out;
  }
  int stored() const {
    int n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      n += e.is_regular_file() && e.path().extension() == ".kce";
    return n;
  }
  // Submits the round, waits until its first kernel is stored, then stops the builds as the exit
  // handler does (the destructor calls stop()). Returns the kernels stored by then.
  int stop_during_round() {
    Jit jit(target(), dir);
    auto builds = std::make_unique<BackgroundBuilds>(jit);
    builds->submit(jobs());
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (stored() == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_GT(stored(), 0) << "no kernel was compiled within 120 s";
    builds.reset();
    return stored();
  }
  // Nothing half written: a later round finds the n kernels stored and compiles the rest.
  void expect_later_round_finds(int n) {
    Jit later(target(), dir);
    std::vector<CudaKernelSource> srcs;
    for (BackgroundBuilds::Job& j : jobs()) srcs.push_back(std::move(j.src));
    later.build_all(srcs);
    EXPECT_EQ(later.stats().disk_hits, n);
    EXPECT_EQ(later.stats().compiles, kKernels - n);
  }
};

TEST_F(BackgroundBuildsStop, ARoundOnTheProcesssThreadStopsAfterTheCompileInFlight) {
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "0");
  ScopedEnv threads("KILN_COMPILE_THREADS", "1");
  const int n = stop_during_round();
  EXPECT_LE(n, 2) << "the round went on compiling after the stop";
  expect_later_round_finds(n);
}

TEST_F(BackgroundBuildsStop, ARoundInCompileWorkersEndsTheWorkers) {
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "2");
  ScopedEnv worker("KILN_COMPILE_WORKER", KILN_CACHE_TOOL);
  const int n = stop_during_round();
  EXPECT_LE(n, 3) << "the workers were handed more kernels after the stop";
  expect_later_round_finds(n);
}

// An exit while NVRTC compiles a new kind of kernel in the process: NVRTC may register the
// destructor of state it made in that compile, after every exit handler of kiln's, and a
// destructor that ran before the compile ended crashed the process (bench/results/
// 2026-11-28-h200-session44.md). Here an exit handler registered while a compile is in flight
// stands for that destructor: when it runs, the builds must be stopped already (a submit then
// throws), which only the main thread's thread_local guard achieves.
BackgroundBuilds* g_exiting = nullptr;
BackgroundBuilds::Job* g_late_job = nullptr;

void expect_builds_stopped() {
  try {
    g_exiting->submit({*g_late_job});
  } catch (const Error&) {
    std::_Exit(0);
  }
  std::_Exit(1); // the builds still ran when NVRTC's state would have been destroyed
}

TEST_F(BackgroundBuildsStop, AnExitStopsTheBuildsBeforeHandlersRegisteredDuringACompile) {
  ScopedEnv processes("KILN_COMPILE_PROCESSES", "0");
  ScopedEnv threads("KILN_COMPILE_THREADS", "1");
  std::vector<BackgroundBuilds::Job> round = jobs();
  g_late_job = new BackgroundBuilds::Job(round.back());
  EXPECT_EXIT(
      {
        g_exiting = new BackgroundBuilds(*new Jit(target(), dir)); // never destroyed: at exit
        g_exiting->submit(std::move(round));
        const auto deadline = Clock::now() + std::chrono::seconds(120);
        while (stored() == 0 && Clock::now() < deadline) // the next compile is in flight
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::atexit(expect_builds_stopped);
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

} // namespace

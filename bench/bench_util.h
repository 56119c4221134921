#pragma once
// Small helpers shared by the benchmarks (header only; bench/CMakeLists.txt builds one
// executable per bench/*.cpp). Deliberately no <thread> or <unistd.h>: they declare ::sync(),
// which makes `using namespace kiln; sync();` ambiguous in the files that include this.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sched.h>
#include <string>
#include <vector>

namespace bench {

inline double now_ns() {
  using namespace std::chrono;
  return static_cast<double>(
      duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count());
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) {
        auto s = line.substr(p + 1);
        s.erase(0, s.find_first_not_of(" \t"));
        return s;
      }
    }
  }
  return "unknown";
}

inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

inline std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

/// Like nproc: CPUs this process may run on.
inline int nproc() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return 0; // unknown
}

/// Microseconds per call over repeated timed batches: the median, and the fastest and slowest
/// batch (the spread README figures quote beside the median).
struct Spread {
  double median = 0, min = 0, max = 0;
};

/// Microseconds per call of `body`, timed on the host: after a warm-up, `iters` calls are
/// queued, then `sync()` waits for the device; repeated `batches` times. Suits work issued
/// asynchronously (a GPU stream), where host overhead overlaps device time as it does for users.
template <class F, class S>
Spread time_spread(F&& body, S&& sync, int iters = 20, int batches = 7) {
  body();
  sync();
  std::vector<double> per;
  for (int b = 0; b < batches; ++b) {
    double t0 = now_ns();
    for (int i = 0; i < iters; ++i) body();
    sync();
    per.push_back((now_ns() - t0) / 1e3 / iters);
  }
  const auto [lo, hi] = std::minmax_element(per.begin(), per.end());
  return {median(per), *lo, *hi};
}

/// The median of time_spread.
template <class F, class S> double time_us(F&& body, S&& sync, int iters = 20, int batches = 7) {
  return time_spread(body, sync, iters, batches).median;
}

/// For benchmarks of compiled kernels' speed: unless KILN_COMPILE says otherwise, a new kernel
/// compiles before its first run, so that no timed run is the stand-in interpreter's while NVRTC
/// works in the background (cold starts: first_steps.cpp, cold_start.sh). Call first in main.
inline void time_compiled_kernels() {
  ::setenv("KILN_COMPILE", "sync", 0);
}

/// The time of a fixed host workload, us (median of 5): a dependent walk through a random cycle
/// of 64K indices (256 KB, in a core's L2) with integer mixing, the kind of work kiln's recording
/// does. Host-bound rows of one binary on one machine are comparable between processes only
/// when this is (the device machine's host changes speed between processes and within one:
/// bench/results/2026-11-27-h100-session35.md).
inline double host_speed_us() {
  constexpr uint32_t kSize = 1u << 16, kSteps = 1u << 20;
  std::vector<uint32_t> next(kSize);
  uint32_t x = 12345;
  std::vector<uint32_t> order(kSize);
  for (uint32_t i = 0; i < kSize; ++i) order[i] = i;
  for (uint32_t i = kSize - 1; i > 0; --i) { // Fisher-Yates with an LCG: the same cycle each run
    x = x * 1664525u + 1013904223u;
    std::swap(order[i], order[x % (i + 1)]);
  }
  for (uint32_t i = 0; i < kSize; ++i) next[order[i]] = order[(i + 1) % kSize];
  std::vector<double> us;
  volatile uint32_t sink = 0;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now_ns();
    uint32_t at = 0, h = 0;
    for (uint32_t i = 0; i < kSteps; ++i) {
      at = next[at];
      h = (h ^ at) * 0x9E3779B1u;
    }
    sink = sink + h;
    us.push_back((now_ns() - t0) / 1e3);
  }
  return median(us);
}

/// The header every benchmark prints first: what ran, where and when.
inline void print_header(const char* title, int argc, char** argv) {
  std::printf("# %s\n\n", title);
  std::printf("- command: `%s`\n", command_line(argc, argv).c_str());
  std::printf("- machine: %s, nproc %d\n", cpu_model().c_str(), nproc());
  std::printf("- date: %s\n", utc_now().c_str());
  if (const char* mode = std::getenv("KILN_COMPILE")) std::printf("- KILN_COMPILE=%s\n", mode);
  std::printf("- host speed probe: %.0f us (bench::host_speed_us: a fixed host workload; lower is "
              "faster)\n",
              host_speed_us());
#ifdef NDEBUG
  std::printf("- build: NDEBUG (Release)\n");
#else
  std::printf("- build: assertions on (not a Release build; numbers are not representative)\n");
#endif
}

} // namespace bench

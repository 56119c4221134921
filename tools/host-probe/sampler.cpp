// A sampling profiler to LD_PRELOAD where perf is missing (the device machine): a signal every
// 50 us of wall time (a high-resolution timer; CPU-time timers fire only at the kernel's tick)
// records the program counter of the main thread, the one that records kiln's ops; at exit, the
// functions with the most samples are printed (self time, like perf's --no-children; time
// blocked shows as the call that blocks), named through dladdr (exported symbols: libkiln's
// internals are visible, as the tests use them).
//   g++ -O2 -shared -fPIC tools/host-probe/sampler.cpp -o /tmp/libsampler.so
//   LD_PRELOAD=/tmp/libsampler.so SAMPLER_OUT=profile.txt [SAMPLER_DELAY_MS=500] <program>
#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr size_t kMaxSamples = size_t(1) << 22;
void** samples = nullptr;
std::atomic<size_t> taken{0};
timer_t timer{};

void on_prof(int, siginfo_t*, void* context) {
  const size_t i = taken.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxSamples) return;
  auto* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
  samples[i] = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
#else
  samples[i] = nullptr;
#endif
}

// Names of functions dladdr cannot name (static or in an anonymous namespace): addr2line on the
// library's symbol table, one run per library for all of its addresses.
std::map<std::pair<std::string, uintptr_t>, std::string>
local_names(const std::map<std::string, std::vector<uintptr_t>>& by_file) {
  std::map<std::pair<std::string, uintptr_t>, std::string> names;
  for (const auto& [file, offsets] : by_file) {
    char list[] = "/tmp/sampler-addrs.XXXXXX";
    const int fd = mkstemp(list);
    if (fd < 0) continue;
    FILE* f = fdopen(fd, "w");
    for (uintptr_t o : offsets) std::fprintf(f, "0x%lx\n", static_cast<unsigned long>(o));
    std::fclose(f);
    const std::string cmd = "addr2line -f -C -e '" + file + "' < " + list + " 2>/dev/null";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char line[4096];
      for (uintptr_t o : offsets) {
        if (!std::fgets(line, sizeof line, p)) break;
        std::string name = line;
        if (!name.empty() && name.back() == '\n') name.pop_back();
        names[{file, o}] = name;
        if (!std::fgets(line, sizeof line, p)) break; // file:line
      }
      pclose(p);
    }
    std::remove(list);
  }
  return names;
}

std::string demangled(const char* sym) {
  int status = 0;
  char* d = abi::__cxa_demangle(sym, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : sym;
  std::free(d);
  return s;
}

__attribute__((constructor)) void start() {
  unsetenv("LD_PRELOAD"); // not in the processes this one starts (addr2line at exit)
  samples = static_cast<void**>(std::calloc(kMaxSamples, sizeof(void*)));
  struct sigaction sa {};
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, nullptr);
  sigevent ev{};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return;
  // SAMPLER_DELAY_MS: the first sample that long after the start (leaves a program's set-up out).
  const char* delay = std::getenv("SAMPLER_DELAY_MS");
  const long first_ns = delay ? std::max(1L, std::atol(delay) * 1000000L) : 50000L;
  itimerspec every{{0, 50000}, {first_ns / 1000000000L, first_ns % 1000000000L}};
  timer_settime(timer, 0, &every, nullptr);
}

__attribute__((destructor)) void finish() {
  timer_delete(timer);
  const size_t n = std::min(taken.load(), kMaxSamples);
  // Pass 1: dladdr; addresses it names by library only are named by addr2line in pass 2.
  std::vector<std::pair<std::string, uintptr_t>> where(n);
  std::map<std::string, std::vector<uintptr_t>> unnamed;
  for (size_t i = 0; i < n; ++i) {
    Dl_info info{};
    if (!dladdr(samples[i], &info)) {
      where[i] = {"?", 0};
    } else if (info.dli_sname) {
      where[i] = {demangled(info.dli_sname), 0};
    } else {
      const std::string file = info.dli_fname ? info.dli_fname : "?";
      const uintptr_t off =
          reinterpret_cast<uintptr_t>(samples[i]) - reinterpret_cast<uintptr_t>(info.dli_fbase);
      where[i] = {file, off + 1}; // +1: 0 marks a resolved name
      unnamed[file].push_back(off);
    }
  }
  for (auto& [file, offsets] : unnamed) {
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  }
  const auto names = local_names(unnamed);
  std::map<std::string, size_t> by_name;
  for (const auto& [name, off] : where) {
    std::string s = name;
    if (off) {
      auto it = names.find({name, off - 1});
      s = it != names.end() && it->second != "??" ? it->second : "[" + name + "]";
    }
    if (s.size() > 140) s = s.substr(0, 140) + "...";
    by_name[s]++;
  }
  std::vector<std::pair<size_t, std::string>> top;
  for (auto& [k, v] : by_name) top.push_back({v, k});
  std::sort(top.rbegin(), top.rend());
  const char* path = std::getenv("SAMPLER_OUT");
  FILE* f = path ? std::fopen(path, "w") : stderr;
  if (!f) f = stderr;
  std::fprintf(f, "# %zu samples (50 us of the main thread's wall time each)\n", n);
  for (size_t i = 0; i < top.size() && i < 60; ++i)
    std::fprintf(f, "%6.2f%%  %s\n", 100.0 * top[i].first / n, top[i].second.c_str());
  if (f != stderr) std::fclose(f);
}

} // namespace

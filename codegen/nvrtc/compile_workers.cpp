#include "codegen/nvrtc/compile_workers.h"

#include "codegen/cache_files.h"
#include "codegen/codegen_version.h"
#include "ir/settings.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

extern char** environ;

namespace kiln::detail {

std::string manifest_line(const CudaKernelSource& src, const CudaTarget& t) {
  return fmt::format(
      "{{\"name\":{},\"arch\":{},\"nvrtc\":{},\"codegen\":{},\"key\":{},\"source\":{}}}\n",
      cache_files::json_quote(src.name), t.arch, t.nvrtc_version, kCodegenVersion,
      cache_files::json_quote(src.key), cache_files::json_quote(src.source));
}

// How long a worker may take to answer before it is given up (a compile takes milliseconds to
// seconds; a worker that hangs must not hang the program).
constexpr int kAnswerTimeoutMs = 300000;

struct CompileWorkers::Worker {
  pid_t pid = -1;
  int fd = -1;     // the socket: requests out, answers in
  std::string buf; // answer bytes not yet split into lines
  int job = -1;    // the source it is compiling
  bool alive = true;

  pid_t owner = ::getpid(); // the process that started it (a fork's child inherits the pool)

  ~Worker() { stop(); }

  // Ends the worker (it may be in the middle of a compile) and reaps it. Closing the socket
  // ends an idle worker; one still compiling gets a moment (`grace`), then SIGKILL (its stores
  // are a temporary file and a rename, so a kill leaves nothing half written). A child of a
  // fork() only closes its copy of the socket: the workers are its parent's.
  void stop(bool grace = true) {
    if (fd >= 0) ::close(fd);
    fd = -1;
    alive = false;
    if (pid > 0 && owner == ::getpid()) {
      bool reaped = false;
      for (int i = 0; i < (grace ? 20 : 0) && !reaped; ++i) { // ~20 ms for one that saw EOF
        reaped = ::waitpid(pid, nullptr, WNOHANG) == pid;
        if (!reaped) ::usleep(1000);
      }
      if (!reaped) {
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
    }
    pid = -1;
  }

  static std::unique_ptr<Worker> start(const std::string& path, const std::string& dir) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0); // dup2 clears close-on-exec
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); // the caller's other files stay its own
#endif
    // A process group of its own: a terminal's Ctrl-C that the program handles spares them.
    // No signal blocked or ignored because the program's are: a worker must die of SIGPIPE
    // when the program is gone.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    std::string cmd = "serve-compiles", dir_flag = "--dir", dir_arg = dir;
    char* argv[] = {const_cast<char*>(path.c_str()), dir_flag.data(), dir_arg.data(), cmd.data(),
                    nullptr};
    auto w = std::make_unique<Worker>();
    const int rc = ::posix_spawn(&w->pid, path.c_str(), &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(sv[1]);
    w->fd = sv[0];
    if (rc != 0) {
      w->pid = -1;
      return nullptr;
    }
    return w;
  }

  bool send(const std::string& line) {
    for (size_t done = 0; done < line.size();) {
      const ssize_t n = ::send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return alive = false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads what has arrived; false when the worker is gone.
  bool receive() {
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return alive = false;
      buf.append(chunk, static_cast<size_t>(n));
      return true;
    }
  }

  // The next whole answer line, if one has arrived.
  bool next_answer(Result& r) {
    const size_t nl = buf.find('\n');
    if (nl == std::string::npos) return false;
    const std::string line = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    r = Result{};
    if (line.rfind("ok ", 0) == 0) {
      r.ok = true;
      r.compile_ms = std::strtod(line.c_str() + 3, nullptr);
    } else {
      r.error = line.rfind("error ", 0) == 0 ? line.substr(6) : "unreadable answer: " + line;
    }
    return true;
  }
};

CompileWorkers* CompileWorkers::shared(int n, const std::string& dir) {
  static std::mutex mu;
  static std::unique_ptr<CompileWorkers> pool;
  static std::string pool_key; // directory, program and size: another asks for other workers
  std::lock_guard<std::mutex> lock(mu);
  const std::string path = compile_worker_path();
  const std::string key = dir + '\n' + path + '\n' + std::to_string(n);
  static std::set<std::string> given_up;    // keys whose workers all died without answering
  if (pool && pool->owner_ != ::getpid()) { // inherited through fork(): the parent's workers
    pool.reset(); // closes this process's copies of their sockets only (Worker::stop)
  }
  if (pool) pool->reap_exited();
  if (pool && pool_key == key && pool->alive() > 0) return pool.get();
  // A tool that dies before answering anything (not a kiln-cache, a broken install) would be
  // started again for every batch: the process compiles alone from then on.
  if (pool && pool->alive() == 0 && !pool->answered_) given_up.insert(pool_key);
  pool.reset(); // another directory, program or size, or every worker gone: start afresh
  if (path.empty() || n < 2 || given_up.count(key)) return nullptr;
  pool = start(path, n, dir);
  pool_key = key;
  return pool.get();
}

void CompileWorkers::reap_exited() {
  for (auto& w : workers_)
    if (w->alive && w->pid > 0 && w->owner == ::getpid() &&
        ::waitpid(w->pid, nullptr, WNOHANG) == w->pid) {
      w->pid = -1; // reaped
      w->stop();
    }
}

int CompileWorkers::alive() const {
  int n = 0;
  for (const auto& w : workers_) n += w->alive;
  return n;
}

std::unique_ptr<CompileWorkers> CompileWorkers::start(const std::string& path, int n,
                                                      const std::string& dir) {
  auto p = std::make_unique<CompileWorkers>();
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Worker> w = Worker::start(path, dir);
    if (!w) break;
    p->workers_.push_back(std::move(w));
  }
  if (p->workers_.empty()) return nullptr;
  return p;
}

// Workers given up on in the middle of a job: their jobs fail with `why`. All sockets first, so
// that they are ended together.
void CompileWorkers::end_busy_workers(std::vector<Result>& out, const char* why) {
  for (auto& w : workers_)
    if (w->alive && w->job >= 0) {
      out[w->job].error = why;
      ::close(std::exchange(w->fd, -1));
    }
  for (auto& w : workers_)
    if (w->alive && w->job >= 0) {
      w->stop(/*grace=*/false);
      w->job = -1;
    }
}

// All sockets first, so that every idle worker sees EOF and exits while the others are reaped.
CompileWorkers::~CompileWorkers() {
  for (auto& w : workers_)
    if (w->fd >= 0) ::close(std::exchange(w->fd, -1));
}

std::vector<CompileWorkers::Result> CompileWorkers::compile(llvm::ArrayRef<CudaKernelSource> srcs,
                                                            const CudaTarget& t,
                                                            const std::atomic<bool>* cancel) {
  std::vector<std::string> lines;
  for (const CudaKernelSource& s : srcs) lines.push_back(manifest_line(s, t));
  return compile_lines(lines, cancel);
}

// How often a cancellable call looks at its flag while the workers compile.
constexpr int kCancelCheckMs = 10;

std::vector<CompileWorkers::Result> CompileWorkers::compile_lines(llvm::ArrayRef<std::string> lines,
                                                                  const std::atomic<bool>* cancel) {
  std::vector<Result> out(lines.size());
  for (Result& r : out) r.error = "no compile worker was left to take it";
  for (auto& w : workers_) w->job = -1, w->buf.clear(); // nothing left from an earlier call
  std::deque<size_t> queue;
  for (size_t i = 0; i < lines.size(); ++i) queue.push_back(i);
  auto hand_out = [&] {
    for (auto& w : workers_)
      while (w->alive && w->job < 0 && !queue.empty()) {
        const size_t i = queue.front();
        if (!w->send(lines[i])) { // gone: the job stays queued
          w->stop();              // reaped
          break;
        }
        queue.pop_front();
        w->job = static_cast<int>(i);
      }
  };
  hand_out();
  const int slice_ms = cancel ? kCancelCheckMs : kAnswerTimeoutMs;
  int silent_ms = 0; // waited since the last answer
  for (;;) {
    if (cancel && cancel->load(std::memory_order_relaxed)) {
      end_busy_workers(out, "the compiles were cancelled");
      break;
    }
    std::vector<pollfd> fds;
    std::vector<Worker*> busy;
    for (auto& w : workers_)
      if (w->alive && w->job >= 0) fds.push_back({w->fd, POLLIN, 0}), busy.push_back(w.get());
    if (busy.empty()) break;
    const int ready = ::poll(fds.data(), fds.size(), slice_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0 && (silent_ms += slice_ms) < kAnswerTimeoutMs) continue;
    if (ready <= 0) { // no answer for minutes, or poll failed: stop waiting for these
      end_busy_workers(out, "the compile worker did not answer");
      silent_ms = 0;
      continue;
    }
    silent_ms = 0;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      Worker& w = *busy[k];
      Result r;
      if (!w.receive()) {
        out[w.job].error = "the compile worker exited";
        w.stop(); // reaped
        w.job = -1;
      } else if (w.next_answer(r)) {
        out[w.job] = r;
        w.job = -1;
        answered_ = true;
      }
    }
    hand_out();
  }
  return out;
}

int compile_processes() {
  if (auto n = setting_int(Setting::compile_processes)) return static_cast<int>(*n);
  return static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
}

namespace {

bool executable(const std::string& p) {
  return !p.empty() && ::access(p.c_str(), X_OK) == 0;
}

} // namespace

std::string compile_worker_path() {
  if (auto p = setting_text(Setting::compile_worker)) return executable(*p) ? *p : std::string();
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void*>(&compile_worker_path), &info) || !info.dli_fname) return {};
  std::string lib = info.dli_fname;
  const size_t slash = lib.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : lib.substr(0, slash);
  // An install (lib/ or lib/<multiarch>/ beside bin/), then the build tree.
  for (const char* rel :
       {"/../bin/kiln-cache", "/../../bin/kiln-cache", "/tools/kiln-cache/kiln-cache"})
    if (executable(dir + rel)) return dir + rel;
  return {};
}

} // namespace kiln::detail

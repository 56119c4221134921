#include "runtime/cuda/background_builds.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstdlib>
#include <exception>

#include <unistd.h>

namespace kiln::detail {

namespace {

std::mutex& registry_mu() {
  static auto* mu = new std::mutex; // never destroyed: used by the exit handler
  return *mu;
}
std::vector<BackgroundBuilds*>& registry() {
  static auto* all = new std::vector<BackgroundBuilds*>;
  return *all;
}

void at_exit() {
  BackgroundBuilds::stop_all();
}

// After each compile in this process: the handler then runs before the destructors of whatever
// state NVRTC made during the compiles so far, which a compile still running would use.
void at_exit_again() {
  std::atexit(at_exit);
}

// exit() runs its calling thread's thread_local destructors before any exit handler or static
// destructor (glibc's __run_exit_handlers), so a guard in the main thread stops the builds while
// all of NVRTC's state is there, even state that a compile in flight made (its destructor
// registered after every handler above). The exit handlers stay for an exit() from another
// thread. Only the main thread: another thread's end is not the process's.
struct StopAtExit {
  ~StopAtExit() {
    if (::gettid() == ::getpid()) BackgroundBuilds::stop_all();
  }
};

void stop_at_exit_of_this_thread() {
  thread_local StopAtExit guard;
  (void)guard;
}

} // namespace

void BackgroundBuilds::stop_all() {
  std::vector<BackgroundBuilds*> all;
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    all = registry();
  }
  for (BackgroundBuilds* b : all) b->stop();
}

BackgroundBuilds::~BackgroundBuilds() {
  stop();
  std::lock_guard<std::mutex> lock(registry_mu());
  auto& all = registry();
  all.erase(std::remove(all.begin(), all.end(), this), all.end());
}

// In a fork()'s child the thread does not exist (and may have held mu_ at the fork): its handle
// is let go of, never joined, and nothing is locked.
void BackgroundBuilds::stop() {
  if (owner_ != 0 && owner_ != ::getpid()) {
    if (thread_.joinable())
      new std::thread(std::move(thread_)); // never destroyed: destroying a joinable one aborts
    return;
  }
  cancel_ = true; // a round under way starts no further compile
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    outstanding_ -= queue_.size();
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void BackgroundBuilds::submit(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  stop_at_exit_of_this_thread();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw Error("[compile] kernels queued for compiling after the process's exit");
    if (!thread_.joinable()) { // first, so that a failure to start one leaves nothing queued
      {
        std::lock_guard<std::mutex> reg(registry_mu());
        if (std::find(registry().begin(), registry().end(), this) == registry().end())
          registry().push_back(this);
      }
      std::atexit(at_exit);
      owner_ = ::getpid();
      thread_ = std::thread([this] { run(); });
    }
    outstanding_ += jobs.size();
    for (Job& j : jobs) queue_.push_back(std::move(j));
  }
  cv_.notify_all();
}

std::vector<BackgroundBuilds::Finished> BackgroundBuilds::take_finished() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Finished> out = std::move(finished_);
  finished_.clear();
  outstanding_ -= out.size();
  return out;
}

size_t BackgroundBuilds::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outstanding_;
}

void BackgroundBuilds::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stopping_ || (queue_.empty() && !busy_); });
}

void BackgroundBuilds::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::vector<Job> jobs(std::make_move_iterator(queue_.begin()),
                          std::make_move_iterator(queue_.end()));
    queue_.clear();
    busy_ = true;
    lock.unlock();
    std::vector<Finished> done = build(std::move(jobs));
    std::atexit(at_exit); // after the round: the state its compile workers made on their start
    lock.lock();
    for (Finished& f : done) finished_.push_back(std::move(f));
    busy_ = false;
    cv_.notify_all();
  }
}

// One round: all of the jobs at once (in this thread's own compile workers when there are
// several); where that fails, each job alone, so that every failure is reported with its kernel
// and the others still come back.
std::vector<BackgroundBuilds::Finished> BackgroundBuilds::build(std::vector<Job> jobs) {
  std::vector<Finished> out(jobs.size());
  std::vector<CudaKernelSource> srcs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    out[i].key = std::move(jobs[i].key);
    out[i].src = jobs[i].src;
    srcs.push_back(std::move(jobs[i].src));
  }
  if (srcs.size() >= 2 && !workers_tried_ && jit_.disk_cache_enabled()) {
    workers_tried_ = true;
    const int n = compile_processes();
    const std::string path = compile_worker_path();
    if (n >= 2 && !path.empty()) workers_ = CompileWorkers::start(path, n, jit_.cache_dir());
  }
  try {
    std::vector<JitKernel> built =
        jit_.build_missing(srcs, workers_.get(), &cancel_, at_exit_again);
    for (size_t i = 0; i < out.size(); ++i) out[i].built = std::move(built[i]);
    return out;
  } catch (const std::exception&) {
  }
  for (Finished& f : out) {
    if (cancel_) {
      f.error = "[compile] " + f.src.name + ": not compiled, the builds were cancelled";
      continue;
    }
    try {
      f.built = jit_.build(f.src); // (the round stored those that compiled)
    } catch (const std::exception& e) {
      f.error = e.what();
    }
    at_exit_again();
  }
  return out;
}

} // namespace kiln::detail

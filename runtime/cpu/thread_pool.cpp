#include "runtime/cpu/thread_pool.h"

#include "ir/settings.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::detail::cpu {

namespace {

int configured_threads() {
  if (auto n = setting_int(Setting::num_threads)) return static_cast<int>(*n);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Workers sleep on a condition variable; a job is a chunked range handed out by an atomic
// counter, so uneven chunks balance themselves. One job at a time (kiln is single-threaded).
class Pool {
public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }

  void run(int64_t chunks, const std::function<void(int64_t)>& fn) {
    {
      std::lock_guard<std::mutex> lock(m_);
      fn_ = &fn;
      chunks_.store(chunks);
      next_.store(0);
      pending_ = chunks;
      ++generation_;
    }
    cv_.notify_all();
    drain(); // the calling thread works too
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
  }

private:
  void drain() {
    int64_t finished = 0;
    for (int64_t c; (c = next_.fetch_add(1)) < chunks_;) {
      (*fn_)(c);
      ++finished;
    }
    if (finished) {
      std::lock_guard<std::mutex> lock(m_);
      pending_ -= finished;
      if (pending_ == 0) done_.notify_all();
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return generation_ != seen && fn_ != nullptr; });
        seen = generation_;
      }
      drain();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable cv_, done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  std::atomic<int64_t> chunks_{0};
  int64_t pending_ = 0;
  std::atomic<int64_t> next_{0};
  uint64_t generation_ = 0;
};

Pool& pool() {
  // Never destroyed: detached-at-exit workers must not touch a destroyed pool.
  static Pool* p = [] {
    auto* pl = new Pool(num_threads() - 1);
    return pl;
  }();
  return *p;
}

} // namespace

int num_threads() {
  static const int n = configured_threads();
  return n;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  int threads = num_threads();
  if (threads <= 1 || n < 2 * grain) {
    if (n > 0) fn(0, n);
    return;
  }
  // A few chunks per thread for balance, each at least `grain`.
  int64_t chunks = std::min<int64_t>(n / grain, int64_t(threads) * 4);
  int64_t size = (n + chunks - 1) / chunks;
  chunks = (n + size - 1) / size;
  std::function<void(int64_t)> chunk = [&](int64_t c) {
    int64_t b = c * size;
    fn(b, std::min(n, b + size));
  };
  pool().run(chunks, chunk);
}

} // namespace kiln::detail::cpu

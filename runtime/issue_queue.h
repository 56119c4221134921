#pragma once
// IssueQueue<Item>: hands work from the thread that calls kiln (one at a time: kiln's contract)
// to one worker thread that issues it in order. The CUDA backend uses it for graph launches
// (runtime/cuda/launch_thread.h): the driver spends ~2-3 us of host time per launch and node
// update, which a loop of small steps would otherwise pay on the thread that records its ops.
//
// A bounded ring of reusable slots: a slot's buffers keep their capacity, so a steady loop
// allocates nothing. The producer fills next(), then push() publishes it with one atomic store.
// An idle worker spins for a while (so that a loop's next push costs no system call), then
// sleeps. A push that finds it asleep issues its item itself, and wakes it only when pushes
// come closer together than the spin time (a producer that pushes rarely gains nothing from
// the worker and would pay a wake-up system call for every push). drain() waits until
// everything pushed has been issued: callers use it before any work that must come after the
// queued work and does not go through the queue (stream operations, destroying what queued
// items name).
//
// An issue that throws does not stop the worker: the first error is kept and rethrown by the
// next drain() or rethrow_error() (not by wait()), as CUDA reports asynchronous errors at the
// next call that checks.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace kiln::detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

template <class Item> class IssueQueue {
public:
  using Issue = std::function<void(Item&)>;
  using Clock = std::chrono::steady_clock;
  /// `spin`: how long an idle worker polls before it sleeps (timed: the cost of a pause
  /// instruction differs tenfold between CPUs). `start`: run first on the worker thread (e.g.
  /// select the device its calls act on).
  IssueQueue(size_t capacity, Issue issue,
             std::chrono::nanoseconds spin = std::chrono::microseconds(200),
             std::function<void()> start = {})
      : ring_(capacity), issue_(std::move(issue)), spin_(spin), start_(std::move(start)),
        worker_([this] { loop(); }) {}
  /// Issues what was pushed, then stops the worker.
  ~IssueQueue() {
    stop_.store(true);
    wake();
    worker_.join();
  }
  IssueQueue(const IssueQueue&) = delete;
  IssueQueue& operator=(const IssueQueue&) = delete;

  /// The slot that the next push() publishes, as it was left (its buffers keep their
  /// capacity). Waits while the ring is full.
  Item& next() {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    while (t - head_.load(std::memory_order_acquire) >= ring_.size()) cpu_relax();
    return ring_[t % ring_.size()];
  }
  /// Publish next(), and return true. Except when the worker sleeps with nothing queued: then
  /// issue it here, on the calling thread, and return false; if the previous such push was
  /// within the spin time, also wake the worker, as pushes now come often enough to keep it
  /// spinning. A producer that pushes rarely thus never waits for a sleeping worker to be
  /// scheduled (tens of microseconds) nor pays for waking it.
  bool push() {
    const uint64_t t = tail_.load(std::memory_order_relaxed);
    if (sleeping_.load(std::memory_order_seq_cst) && empty()) {
      const Clock::time_point now = Clock::now();
      if (now - last_inline_ < spin_) wake();
      last_inline_ = now;
      issue_(ring_[t % ring_.size()]); // everything pushed before was issued: order holds
      return false;
    }
    tail_.store(t + 1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
    return true;
  }
  /// Whether the worker sleeps now (then a push with nothing queued issues on the caller).
  bool sleeping() const { return sleeping_.load(std::memory_order_seq_cst); }
  /// Whether everything pushed has been issued.
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
  }
  /// Wait until everything pushed has been issued.
  void wait() {
    for (int i = 0; !empty(); ++i)
      if (i < 1 << 16)
        cpu_relax();
      else
        std::this_thread::yield();
  }
  /// wait(), then rethrow the first error of an issue since the last one was rethrown.
  void drain() {
    wait();
    rethrow_error();
  }
  void rethrow_error() {
    if (!failed_.load(std::memory_order_acquire)) return;
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(error_mutex_);
      std::swap(e, error_);
      failed_.store(false, std::memory_order_release);
    }
    if (e) std::rethrow_exception(e);
  }
  /// Issues that threw on the worker so far (never reset): a producer compares it with the
  /// count it saw last to learn that queued work it counted on did not happen.
  uint64_t failures() const { return failures_.load(std::memory_order_acquire); }

private:
  void record_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
    failed_.store(true, std::memory_order_release);
    failures_.fetch_add(1, std::memory_order_release);
  }

  void wake() {
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_ = true;
    }
    wakeup_.notify_one();
  }

  void loop() {
    if (start_) try {
        start_();
      } catch (...) {
        record_error();
      }
    int polls = 0;
    Clock::time_point last_work = Clock::now();
    for (;;) {
      const uint64_t h = head_.load(std::memory_order_relaxed);
      if (h != tail_.load(std::memory_order_acquire)) {
        try {
          issue_(ring_[h % ring_.size()]);
        } catch (...) {
          record_error();
        }
        head_.store(h + 1, std::memory_order_release);
        polls = 0;
        last_work = Clock::now();
        continue;
      }
      // Stopping: the pushes came before stop_ was set, so once it is seen, tail_ shows them.
      if (stop_.load()) {
        if (h == tail_.load(std::memory_order_acquire)) return;
        continue;
      }
      // Spin, yielding the CPU every 64 polls (~2 us): woken by the producer, the scheduler
      // tends to run this thread on the producer's CPU, and a spin that kept it would hold the
      // producer off for the whole spin time, again at every wake-up (seen on a 2-core VM: the
      // worker never got a single item while the producer pushed every 5 us).
      if (++polls % 64 != 0) {
        cpu_relax();
        continue;
      }
      if (Clock::now() - last_work < spin_) {
        std::this_thread::yield();
        continue;
      }
      // Sleep. The store to sleeping_ and the producer's store to tail_ are both seq_cst, so
      // either the check below sees the new item or the producer sees sleeping_ and wakes us
      // (wake_ is set under the mutex, so a wake between the check and the wait is kept).
      {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleeping_.store(true, std::memory_order_seq_cst);
        if (h == tail_.load(std::memory_order_seq_cst) && !stop_.load())
          wakeup_.wait(lock, [this] { return wake_; });
        wake_ = false;
        sleeping_.store(false, std::memory_order_relaxed);
      }
      polls = 0;
      last_work = Clock::now();
    }
  }

  std::vector<Item> ring_;
  Issue issue_;
  const std::chrono::nanoseconds spin_;
  Clock::time_point last_inline_{}; // producer's: its last push issued inline
  std::function<void()> start_;
  alignas(64) std::atomic<uint64_t> head_{0}; // next to issue; written by the worker
  alignas(64) std::atomic<uint64_t> tail_{0}; // next to fill; written by the producer
  alignas(64) std::atomic<bool> sleeping_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wakeup_;
  bool wake_ = false; // guarded by sleep_mutex_
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> failures_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::thread worker_; // last: starts after everything it reads is initialized
};

} // namespace kiln::detail

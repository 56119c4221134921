// The queue that hands CUDA graph launches to the launch thread (runtime/issue_queue.h), driven
// here with plain items so that its ordering, back-pressure, sleep/wake and error paths are
// tested on any machine (and under ThreadSanitizer: the issue function's writes are read by the
// producer only after drain()).
#include "runtime/issue_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kiln::detail {
namespace {

struct Item {
  int value = 0;
  std::vector<int> payload; // reused slot storage, as the CUDA items' Params bytes
};

TEST(IssueQueue, IssuesEveryItemInOrderWithWhatWasWrittenBeforePush) {
  std::vector<int> seen; // written by the worker, read after drain()
  IssueQueue<Item> q(8, [&](Item& it) {
    int sum = 0;
    for (int v : it.payload) sum += v;
    seen.push_back(it.value * 1000 + sum);
  });
  for (int i = 0; i < 5000; ++i) {
    Item& it = q.next();
    it.value = i;
    it.payload.assign(static_cast<size_t>(i % 7), 1);
    q.push();
  }
  q.drain();
  ASSERT_EQ(seen.size(), 5000u);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(seen[i], i * 1000 + i % 7) << "item " << i;
  EXPECT_TRUE(q.empty());
}

TEST(IssueQueue, FullRingMakesTheProducerWaitAndLosesNothing) {
  std::vector<int> seen;
  IssueQueue<Item> q(2, [&](Item& it) {
    std::this_thread::sleep_for(std::chrono::microseconds(200)); // slower than the producer
    seen.push_back(it.value);
  });
  for (int i = 0; i < 50; ++i) {
    q.next().value = i;
    q.push();
  }
  q.drain();
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
}

// A worker that spins only 2 us falls asleep all the time, so pushes race with it going to
// sleep, find it asleep (issued by the caller) or wake it (pushes within 2 us): none is lost.
TEST(IssueQueue, PushesRacingWithTheWorkerFallingAsleepAreNotLost) {
  int issued = 0;
  IssueQueue<Item> q(
      4, [&](Item&) { ++issued; }, std::chrono::microseconds(2));
  for (int round = 0; round < 200; ++round) {
    if (round % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2)); // asleep
    q.next().value = round;
    q.push();
    q.drain(); // hangs if a wake-up was lost
    ASSERT_EQ(issued, round + 1);
  }
}

// A push that finds the worker asleep and nothing queued is issued by the caller (no wake-up
// delay before it reaches the device); pushes that keep coming within the spin time wake the
// worker, which then takes them.
TEST(IssueQueue, PushToASleepingWorkerIsIssuedByTheCaller) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> by;
  std::atomic<int> by_worker{0};
  IssueQueue<Item> q(
      4,
      [&](Item&) {
        by.push_back(std::this_thread::get_id());
        if (std::this_thread::get_id() != caller) by_worker.fetch_add(1);
      },
      std::chrono::microseconds(200));
  // Until the worker has fallen asleep (200 us of spinning, then it sleeps; on a loaded machine
  // it may not run for a while).
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       !q.sleeping() && std::chrono::steady_clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(q.sleeping());
  EXPECT_FALSE(q.push());
  ASSERT_EQ(by.size(), 1u); // issued before push returned
  EXPECT_EQ(by[0], caller);
  // Pushes 5 us apart: from the second on they wake the worker, which takes the rest. At least
  // 10 ms of them, and on until the worker took one (a loaded machine, such as CI running test
  // processes side by side, may not schedule it for a while), for at most 5 s.
  int pushes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto now = start; now < start + std::chrono::seconds(5) &&
                         (now < start + std::chrono::milliseconds(10) || by_worker.load() == 0);
       now = std::chrono::steady_clock::now(), ++pushes) {
    q.push();
    for (auto t = now + std::chrono::microseconds(5); std::chrono::steady_clock::now() < t;) {
    }
  }
  q.drain();
  ASSERT_EQ(by.size(), size_t(pushes) + 1);
  EXPECT_GT(std::count_if(by.begin(), by.end(), [&](std::thread::id id) { return id != caller; }),
            0);
}

TEST(IssueQueue, AnErrorIsReportedOnceAndLaterItemsStillRun) {
  std::vector<int> seen;
  IssueQueue<Item> q(4, [&](Item& it) {
    if (it.value == 3) throw std::runtime_error("launch 3 failed");
    seen.push_back(it.value);
  });
  // Item 3 fails on the worker (reported by the next drain) or, if the worker was asleep, on
  // this thread (thrown by its push): either way once, and nothing else is lost.
  std::vector<std::string> errors;
  uint64_t on_worker = 0;
  for (int i = 0; i < 6; ++i) {
    q.next().value = i;
    try {
      q.push();
    } catch (const std::runtime_error& e) {
      errors.push_back(e.what());
    }
  }
  try {
    q.drain();
  } catch (const std::runtime_error& e) {
    errors.push_back(e.what());
    ++on_worker;
  }
  EXPECT_EQ(errors, std::vector<std::string>{"launch 3 failed"});
  EXPECT_EQ(q.failures(), on_worker); // counts the worker's failures (the caller saw its own)
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 4, 5}));
  EXPECT_NO_THROW(q.drain()); // reported once
  q.next().value = 7;
  q.push();
  EXPECT_NO_THROW(q.drain());
  EXPECT_EQ(seen.back(), 7);
}

TEST(IssueQueue, StartHookRunsOnTheWorkerFirst) {
  std::atomic<bool> started{false};
  std::atomic<int> issued_before_start{0};
  std::thread::id caller = std::this_thread::get_id(), worker;
  IssueQueue<Item> q(
      4,
      [&](Item&) {
        if (std::this_thread::get_id() != caller && !started) ++issued_before_start;
      },
      std::chrono::microseconds(200),
      [&] {
        worker = std::this_thread::get_id();
        started = true;
      });
  for (int i = 0; i < 20; ++i) {
    q.next().value = i;
    q.push();
  }
  q.drain();
  while (!started) std::this_thread::yield();
  EXPECT_NE(worker, caller);
  EXPECT_EQ(issued_before_start, 0);
}

TEST(IssueQueue, DestructorIssuesWhatWasPushed) {
  std::vector<int> seen;
  {
    IssueQueue<Item> q(16, [&](Item& it) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      seen.push_back(it.value);
    });
    for (int i = 0; i < 10; ++i) {
      q.next().value = i;
      q.push();
    }
  }
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen.back(), 9);
}

} // namespace
} // namespace kiln::detail

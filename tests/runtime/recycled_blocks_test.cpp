// The blocks a backend keeps for the next allocation of the same size (runtime/recycled_blocks.h):
// the hinted block first, else the last one freed; within the byte bound the blocks freed longest
// ago go first, so that a loop's sizes stay recyclable after an earlier phase filled the bound.
#include "runtime/recycled_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace kiln::detail {
namespace {

void* at(uintptr_t a) {
  return reinterpret_cast<void*>(a);
}

TEST(RecycledBlocks, TakesTheHintedBlockElseTheLastFreed) {
  RecycledBlocks r(1000, 10000);
  std::vector<void*> freed;
  auto give_back = [&](void* p, size_t) { freed.push_back(p); };
  for (uintptr_t a : {0x100, 0x200, 0x300}) EXPECT_TRUE(r.keep(at(a), 64, give_back));
  EXPECT_EQ(r.take(64, at(0x100)), at(0x100));
  EXPECT_EQ(r.take(64, at(0x999)), at(0x300));
  EXPECT_EQ(r.take(32, nullptr), nullptr) << "no block of that size";
  EXPECT_EQ(r.bytes(), 64u);
  EXPECT_FALSE(r.keep(at(0x400), 2000, give_back)) << "larger than a kept block may be";
  EXPECT_TRUE(freed.empty());
}

// A phase that freed blocks of sizes nobody asks for again filled the bound: the loop after it
// still gets its own blocks back, at the addresses it hints (which a CUDA graph's update needs),
// and the oldest blocks are the ones given back.
TEST(RecycledBlocks, TheOldestBlocksMakeRoomForNewOnes) {
  RecycledBlocks r(1000, 1000);
  std::vector<std::pair<void*, size_t>> freed;
  auto give_back = [&](void* p, size_t n) { freed.push_back({p, n}); };
  for (uintptr_t a = 1; a <= 10; ++a) EXPECT_TRUE(r.keep(at(a * 0x1000), 100, give_back));
  EXPECT_EQ(r.bytes(), 1000u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_TRUE(r.keep(at(0xA0000), 64, give_back));
    EXPECT_TRUE(r.keep(at(0xB0000), 64, give_back));
    EXPECT_LE(r.bytes(), 1000u);
    EXPECT_EQ(r.take(64, at(0xA0000)), at(0xA0000)) << "step " << step;
    EXPECT_EQ(r.take(64, at(0xB0000)), at(0xB0000)) << "step " << step;
  }
  ASSERT_EQ(freed.size(), 2u) << "two blocks of 100 make room for two of 64, once";
  EXPECT_EQ(freed[0], std::make_pair(at(0x1000), size_t(100)));
  EXPECT_EQ(freed[1], std::make_pair(at(0x2000), size_t(100)));
  std::vector<void*> rest;
  r.release_all([&](void* p, size_t) { rest.push_back(p); });
  EXPECT_EQ(rest.size(), 8u);
  EXPECT_EQ(r.bytes(), 0u);
}

TEST(RecycledBlocks, AnEmptiedSizeIsKeptButNotWithoutBound) {
  RecycledBlocks r(1 << 20, 1 << 20);
  auto never = [](void*, size_t) { FAIL() << "nothing is evicted below the bound"; };
  for (int step = 0; step < 3; ++step) { // a loop: the same size kept and taken every step
    EXPECT_TRUE(r.keep(at(0x100), 64, never));
    EXPECT_EQ(r.take(64, at(0x100)), at(0x100));
    EXPECT_EQ(r.take(64, nullptr), nullptr) << "its entry is empty";
    EXPECT_EQ(r.sizes(), 1u) << "step " << step;
  }
  // Sizes that never come back: their empty entries are dropped once there are many.
  for (size_t n = 1; n <= 5000; ++n) {
    EXPECT_TRUE(r.keep(at(0x1000 * n), n, never));
    EXPECT_EQ(r.take(n, nullptr), at(0x1000 * n));
  }
  EXPECT_LE(r.sizes(), 1025u);
  EXPECT_EQ(r.bytes(), 0u);
}

// Random keeps and takes against a plain list of the blocks in the order they were freed: the
// same block comes back (the hinted one, else the last freed of its size), the same blocks are
// evicted, and the same bytes are kept.
TEST(RecycledBlocks, MatchesAListInFreedOrder) {
  struct Block {
    void* p;
    size_t n;
  };
  std::mt19937_64 rng(5);
  RecycledBlocks r(64, 512);
  std::vector<Block> list; // oldest first
  std::vector<void*> out;  // blocks handed out (taken, or never kept yet)
  uintptr_t next = 0x1000;
  std::vector<Block> evicted, evicted_ref;
  auto give_back = [&](void* p, size_t n) { evicted.push_back({p, n}); };
  for (int op = 0; op < 20000; ++op) {
    const size_t n = size_t(8) << rng() % 4; // 8, 16, 32, 64
    if (rng() % 2 == 0 || out.empty()) {     // take, hinting at a block handed out before
      void* hint = out.empty() || rng() % 4 == 0 ? nullptr : out[rng() % out.size()];
      void* want = nullptr;
      auto it = std::find_if(list.begin(), list.end(),
                             [&](const Block& b) { return b.p == hint && b.n == n; });
      if (it == list.end())
        for (auto b = list.rbegin(); b != list.rend(); ++b)
          if (b->n == n) {
            it = std::prev(b.base());
            break;
          }
      if (it != list.end()) {
        want = it->p;
        list.erase(it);
      }
      void* got = r.take(n, hint);
      ASSERT_EQ(got, want) << "op " << op;
      out.push_back(got ? got : reinterpret_cast<void*>(next += 0x100));
    } else { // keep a block handed out
      const size_t k = rng() % out.size();
      void* p = out[k];
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(k));
      size_t bytes = 0;
      for (const Block& b : list) bytes += b.n;
      while (bytes + n > 512) {
        evicted_ref.push_back(list.front());
        bytes -= list.front().n;
        list.erase(list.begin());
      }
      list.push_back({p, n});
      ASSERT_TRUE(r.keep(p, n, give_back));
      ASSERT_EQ(evicted.size(), evicted_ref.size()) << "op " << op;
      ASSERT_EQ(r.bytes(), bytes + n);
    }
  }
  for (size_t i = 0; i < evicted.size(); ++i) {
    EXPECT_EQ(evicted[i].p, evicted_ref[i].p) << i;
    EXPECT_EQ(evicted[i].n, evicted_ref[i].n) << i;
  }
}

} // namespace
} // namespace kiln::detail

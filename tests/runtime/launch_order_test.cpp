// The edges of a batch's CUDA graph (runtime/launch_order.h): each launch follows exactly the
// launches it must (read after write, write after read, write after write, through any slot of
// a shared buffer, GEMMs in order), and nothing else, so that independent work runs side by
// side. Backend-independent: tested on any machine.
#include "runtime/launch_order.h"

#include "ir/fused_kernel.h"
#include "ir/index_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace kiln::detail {
namespace {

using Deps = std::vector<std::vector<int>>;

// A batch under construction: kernels and GEMMs over slots, each slot with a buffer of its own
// (4 KiB apart, 2 KiB each: no byte in common) unless made a view of another's with view().
struct Batch {
  std::deque<FusedKernel> kernels;
  std::deque<GemmStep> gemms;
  std::deque<IndexStep> indexes;
  std::vector<BatchItem> items;
  std::vector<std::unique_ptr<Buffer>> owned;
  std::vector<Buffer*> buffers;

  explicit Batch(int slots) {
    for (int i = 0; i < slots; ++i)
      buffers.push_back(buffer(reinterpret_cast<char*>(uintptr_t(4096) * (i + 1)), 2048));
  }
  Buffer* buffer(char* data, size_t bytes) {
    owned.push_back(std::make_unique<Buffer>());
    owned.back()->data = data;
    owned.back()->bytes = bytes;
    return owned.back().get();
  }
  // Slot `slot` sees the memory of slot `of` from `offset` bytes on, through a Buffer of its own
  // (as the executor binds a realized node that sits at another offset than when planned).
  void view(int slot, int of, size_t offset) {
    buffers[slot] = buffer(static_cast<char*>(buffers[of]->data) + offset, buffers[of]->bytes);
  }
  void index(int x, int idx, int out) {
    IndexStep& s = indexes.emplace_back();
    s.x_slot = x;
    s.index_slot = idx;
    s.out_slot = out;
    items.push_back(BatchItem{.index = &s});
  }
  void kernel(std::vector<int> reads, std::vector<int> writes) {
    FusedKernel& k = kernels.emplace_back();
    for (int r : reads) k.inputs.push_back(KernelInput{.slot = r});
    for (int w : writes) k.outputs.push_back(KernelOutput{.slot = w});
    items.push_back(BatchItem{.kernel = &k});
  }
  void gemm(int a, int b, int out) {
    GemmStep& g = gemms.emplace_back();
    g.a_slot = a;
    g.b_slot = b;
    g.out_slot = out;
    items.push_back(BatchItem{.gemm = &g});
  }
  // launch_dependencies over the items (every one launched unless `launched` says otherwise).
  std::vector<llvm::SmallVector<int, 4>> raw_deps(std::vector<bool> launched, bool chain) const {
    if (launched.empty()) launched.assign(items.size(), true);
    std::unique_ptr<bool[]> l(new bool[launched.size()]); // (no LLVM in the tests' link)
    std::copy(launched.begin(), launched.end(), l.get());
    return launch_dependencies(items, buffers, llvm::ArrayRef<bool>(l.get(), launched.size()),
                               chain);
  }
  Deps deps(std::vector<bool> launched = {}, bool chain = false) const {
    Deps out;
    for (const auto& d : raw_deps(launched, chain)) out.emplace_back(d.begin(), d.end());
    return out;
  }
  // Per item, per dependency: whether the edge is a chain link (chain_links).
  std::vector<std::vector<bool>> links() const {
    std::vector<std::vector<bool>> out;
    for (const auto& l : chain_links(raw_deps({}, false), items))
      out.emplace_back(l.begin(), l.end());
    return out;
  }
};

TEST(LaunchOrder, ReadAfterWriteOnlyWhereAValueFlows) {
  Batch b(5);
  b.kernel({0}, {1});    // 0: s1 = f(s0)
  b.kernel({0}, {2});    // 1: s2 = g(s0), independent of 0
  b.kernel({1, 2}, {3}); // 2: reads both
  b.kernel({0}, {4});    // 3: independent again
  EXPECT_EQ(b.deps(), (Deps{{}, {}, {0, 1}, {}}));
}

TEST(LaunchOrder, OverwritingWaitsForEveryReaderAndTheLastWriter) {
  Batch b(4);
  b.kernel({0}, {1}); // 0: writes s1
  b.kernel({1}, {2}); // 1: reads s1
  b.kernel({1}, {3}); // 2: reads s1
  b.kernel({0}, {1}); // 3: writes s1 again: after both reads (which follow the first write)
  b.kernel({1}, {2}); // 4: reads the new s1, overwrites s2 (written by 1, which 3 follows)
  EXPECT_EQ(b.deps(), (Deps{{}, {0}, {0}, {1, 2}, {3}}));
}

TEST(LaunchOrder, SlotsOverOneMemoryAreOneMemory) {
  // Slot 3 sees slot 1's buffer from 512 bytes on (a row of a sequence, bound as a Buffer of
  // its own); slot 4 starts where slot 2's buffer ends (no byte in common).
  Batch b(5);
  b.view(3, 1, 512);
  b.buffers[4] = b.buffer(static_cast<char*>(b.buffers[2]->data) + 2048, 64);
  b.kernel({3}, {2}); // 0: reads the buffer through slot 3
  b.kernel({0}, {1}); // 1: overwrites it through slot 1: after 0
  b.kernel({3}, {0}); // 2: reads it again: after 1; overwrites s0, which 1 read
  b.kernel({0}, {4}); // 3: writes the memory just past slot 2's: after 2 only (reads s0)
  EXPECT_EQ(b.deps(), (Deps{{}, {0}, {1}, {2}}));
}

TEST(LaunchOrder, AViewInsideALongerBufferJoinsItsMemory) {
  // Slot 1: a long buffer; slot 2 a short one inside it; slot 3 starts inside slot 1 past slot
  // 2's end: all one memory. Slot 4 has no bytes (an empty tensor): a memory of its own.
  Batch b(5);
  b.buffers[1] = b.buffer(static_cast<char*>(b.buffers[1]->data), 8192);
  b.buffers[2] = b.buffer(static_cast<char*>(b.buffers[1]->data) + 1024, 512);
  b.buffers[3] = b.buffer(static_cast<char*>(b.buffers[1]->data) + 4096, 8192);
  b.buffers[4] = b.buffer(nullptr, 0);
  b.kernel({0}, {3}); // 0: writes slot 3
  b.kernel({2}, {4}); // 1: reads slot 2: one memory with slot 3, so after 0
  b.kernel({0}, {4}); // 2: writes slot 4 again: after 1, which wrote it
  EXPECT_EQ(b.deps(), (Deps{{}, {0}, {1}}));
}

TEST(LaunchOrder, IndexKernelsFollowEachOtherForTheirErrorRecord) {
  Batch b(6);
  b.index(0, 1, 2); // 0
  b.index(3, 4, 5); // 1: independent data, but one record of an index out of range
  EXPECT_EQ(b.deps(), (Deps{{}, {0}}));
}

TEST(LaunchOrder, EdgesThatOthersImplyAreDropped) {
  // A recurrence reads the weight w (slot 0) at every step; the update of w in place waits for
  // the last step only, which follows all the others.
  Batch b(5);
  b.kernel({0, 1}, {2}); // 0: h1 = f(w, h0)
  b.kernel({0, 2}, {3}); // 1: h2 = f(w, h1)
  b.kernel({0, 3}, {4}); // 2: h3 = f(w, h2)
  b.kernel({0, 4}, {0}); // 3: w -= g(h3): reads and overwrites w after every reader
  EXPECT_EQ(b.deps(), (Deps{{}, {0}, {1}, {2}}));
}

TEST(LaunchOrder, GemmsFollowEachOtherForTheirWorkspace) {
  Batch b(6);
  b.gemm(0, 1, 2);    // 0
  b.kernel({0}, {3}); // 1: independent of the GEMM
  b.gemm(0, 1, 4);    // 2: independent data, but cuBLAS's workspace: after 0
  b.kernel({4}, {5}); // 3: reads the second GEMM's result
  EXPECT_EQ(b.deps(), (Deps{{}, {}, {0}, {2}}));
}

TEST(LaunchOrder, ItemsThatLaunchNothingAreSkipped) {
  Batch b(3);
  b.kernel({0}, {1}); // 0
  b.kernel({1}, {2}); // 1: empty, runs nothing (and so neither reads nor writes)
  b.kernel({2}, {0}); // 2: its write over s0 still follows 0's read
  EXPECT_EQ(b.deps({true, false, true}), (Deps{{}, {}, {0}}));
}

TEST(LaunchOrder, ChainFollowsPlanOrder) {
  Batch b(4);
  b.kernel({0}, {1});
  b.kernel({0}, {2});
  b.kernel({0}, {3});
  EXPECT_EQ(b.deps({true, false, true}, true), (Deps{{}, {}, {0}}));
  EXPECT_EQ(b.deps({}, true), (Deps{{}, {0}, {1}}));
}

TEST(LaunchOrder, ARecurrenceWithAReadOutPerStep) {
  // h_{t+1} = cell(h_t); y_t = head(h_t): the heads depend on their step's cell only, so the
  // next cell need not wait for them; the loss reads every head.
  Batch b(8);
  b.kernel({0}, {1});    // 0: h1 = cell(h0)
  b.kernel({1}, {4});    // 1: y1 = head(h1)
  b.kernel({1}, {2});    // 2: h2 = cell(h1)
  b.kernel({2}, {5});    // 3: y2 = head(h2)
  b.kernel({2}, {3});    // 4: h3 = cell(h2)
  b.kernel({4, 5}, {6}); // 5: loss
  EXPECT_EQ(b.deps(), (Deps{{}, {0}, {0}, {2}, {2}, {1, 3}}));
}

TEST(LaunchOrder, OnlyLinksOfChainsAreProgrammatic) {
  // 0 -> 1 -> 2 a chain; 2 forks to 3 and 4; 5 joins them; 6 follows a GEMM (5 -> G 6 -> 7).
  using Links = std::vector<std::vector<bool>>;
  Batch b(9);
  b.kernel({0}, {1});    // 0
  b.kernel({1}, {2});    // 1: link from 0
  b.kernel({2}, {3});    // 2: link from 1
  b.kernel({3}, {4});    // 3: 2 forks (2 has two successors): plain
  b.kernel({3}, {5});    // 4: plain
  b.kernel({4, 5}, {6}); // 5: a join: plain
  b.gemm(6, 6, 7);       // 6: into a GEMM: plain
  b.kernel({7}, {8});    // 7: out of a GEMM: plain
  ASSERT_EQ(b.deps(), (Deps{{}, {0}, {1}, {2}, {2}, {3, 4}, {5}, {6}}));
  EXPECT_EQ(b.links(),
            (Links{{}, {true}, {true}, {false}, {false}, {false, false}, {false}, {false}}));
}

} // namespace
} // namespace kiln::detail

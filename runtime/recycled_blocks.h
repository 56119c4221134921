// Blocks released by their last handle, kept for the next allocation of the same size.
//
// A loop step allocates and frees the same sizes every time. Keeping them saves the
// allocator's calls: on a GPU two stream-ordered pool calls per buffer; on the host, malloc's
// habit of returning freed memory at the top of the heap to the kernel (and faulting it back in,
// zeroed, at the next step), which cost a CPU training step a third of its time. Bounded in
// block size and total bytes (the blocks freed longest ago go first); the owner gives
// everything back when an allocation fails.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

namespace kiln::detail {

class RecycledBlocks {
public:
  RecycledBlocks(size_t max_block, size_t max_bytes)
      : max_block_(max_block), max_bytes_(max_bytes) {}

  // The block at `hint` if it is free, else the last one freed of `n` bytes; null if none.
  void* take(size_t n, const void* hint) {
    auto it = free_.find(n);
    if (it == free_.end() || it->second.empty()) return nullptr;
    std::deque<Kept>& blocks = it->second;
    auto at =
        std::find_if(blocks.begin(), blocks.end(), [&](const Kept& k) { return k.p == hint; });
    if (at == blocks.end()) at = blocks.end() - 1;
    void* p = at->p;
    blocks.erase(at); // the rest stay in the order they were freed
    bytes_ -= n;      // an emptied size stays: a loop keeps and takes it again every step
    return p;
  }
  // Keeps `p`, handing the blocks freed longest ago to `free_block(q, n)` while the bytes kept
  // would exceed the bound: the sizes a loop frees every step stay recyclable when an earlier
  // phase of the program left the bound full of sizes nobody asks for again. False: `p` is
  // larger than a kept block may be, and the caller frees it.
  template <class Free> bool keep(void* p, size_t n, Free free_block) {
    if (n > max_block_ || n > max_bytes_) return false;
    while (bytes_ + n > max_bytes_) evict_oldest(free_block);
    if (free_.size() >= kMaxSizes && !free_.contains(n)) drop_empty_sizes();
    free_[n].push_back({p, ++clock_});
    bytes_ += n;
    return true;
  }
  // Hands every kept block to `free_block(p, n)` and forgets them.
  template <class Free> void release_all(Free free_block) {
    for (auto& [n, blocks] : free_)
      for (const Kept& k : blocks) free_block(k.p, n);
    free_.clear();
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }
  size_t sizes() const { return free_.size(); } // sizes with an entry, empty ones included

private:
  struct Kept {
    void* p;
    uint64_t freed; // when it was kept, in keep() calls
  };

  // Entries of sizes with no block left: kept so that a loop's sizes are not erased and
  // allocated again every step, but not without bound (a program whose sizes keep changing).
  static constexpr size_t kMaxSizes = 1024;
  void drop_empty_sizes() {
    std::erase_if(free_, [](const auto& entry) { return entry.second.empty(); });
  }

  // The oldest block is the first of its size: a scan over the sizes kept, which drops the
  // sizes left empty (bytes_ > 0 here, so some size is not).
  template <class Free> void evict_oldest(Free free_block) {
    auto oldest = free_.end();
    for (auto it = free_.begin(); it != free_.end();) {
      if (it->second.empty()) {
        it = free_.erase(it);
        continue;
      }
      if (oldest == free_.end() || it->second.front().freed < oldest->second.front().freed)
        oldest = it;
      ++it;
    }
    const size_t n = oldest->first;
    const Kept k = oldest->second.front();
    oldest->second.pop_front();
    if (oldest->second.empty()) free_.erase(oldest);
    bytes_ -= n;
    free_block(k.p, n);
  }

  size_t max_block_, max_bytes_;
  std::unordered_map<size_t, std::deque<Kept>> free_; // per size, oldest first; may be empty
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
};

} // namespace kiln::detail

// Blocks released by their last handle, kept for the next allocation of the same size.
//
// A loop step allocates and frees the same sizes every time. Keeping them saves the
// allocator's calls: on a GPU two stream-ordered pool calls per buffer; on the host, malloc's
// habit of returning freed memory at the top of the heap to the kernel (and faulting it back in,
// zeroed, at the next step), which cost a CPU training step a third of its time. Bounded in
// block size and total bytes (the blocks freed longest ago go first); the owner gives
// everything back when an allocation fails.
//
// Every operation is O(1): a training step allocates hundreds of blocks of one size, each with
// a hint (the address the cached plan used last time, which a CUDA graph's update needs), and a
// scan of the size's blocks for it was 7% of a small LSTM's training step on the host. Each
// kept block is in two lists, its size's (for the last one freed) and all sizes' (for the
// oldest), threaded through a slab of entries; a map finds a hinted address, reusing its nodes
// (no allocation per block kept).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kiln::detail {

class RecycledBlocks {
public:
  RecycledBlocks(size_t max_block, size_t max_bytes)
      : max_block_(max_block), max_bytes_(max_bytes) {}

  // The block at `hint` if it is free, else the last one freed of `n` bytes; null if none.
  void* take(size_t n, const void* hint) {
    if (hint) {
      auto at = where_.find(hint);
      if (at != where_.end() && slab_[at->second].n == n) return remove(at->second);
    }
    auto it = sizes_.find(n);
    if (it == sizes_.end() || it->second.last == kNone) return nullptr;
    return remove(it->second.last); // an emptied size stays: a loop takes it again every step
  }
  // Keeps `p`, handing the blocks freed longest ago to `free_block(q, n)` while the bytes kept
  // would exceed the bound: the sizes a loop frees every step stay recyclable when an earlier
  // phase of the program left the bound full of sizes nobody asks for again. False: `p` is
  // larger than a kept block may be, and the caller frees it.
  template <class Free> bool keep(void* p, size_t n, Free free_block) {
    if (n > max_block_ || n > max_bytes_) return false;
    while (bytes_ + n > max_bytes_) {
      const Entry oldest = slab_[oldest_];
      remove(oldest_);
      free_block(oldest.p, oldest.n);
    }
    if (sizes_.size() >= kMaxSizes && !sizes_.contains(n)) drop_empty_sizes();
    const uint32_t i = new_entry();
    slab_[i].p = p;
    slab_[i].n = n;
    SizeList& s = sizes_[n];
    slab_[i].prev_of_size = s.last;
    (s.last != kNone ? slab_[s.last].next_of_size : s.first) = i;
    s.last = i;
    slab_[i].older = newest_;
    (newest_ != kNone ? slab_[newest_].newer : oldest_) = i;
    newest_ = i;
    if (spare_nodes_.empty()) {
      where_.emplace(p, i);
    } else {
      auto node = std::move(spare_nodes_.back());
      spare_nodes_.pop_back();
      node.key() = p;
      node.mapped() = i;
      where_.insert(std::move(node));
    }
    bytes_ += n;
    return true;
  }
  // Hands every kept block to `free_block(p, n)` and forgets them.
  template <class Free> void release_all(Free free_block) {
    for (uint32_t i = oldest_; i != kNone; i = slab_[i].newer) free_block(slab_[i].p, slab_[i].n);
    slab_.clear();
    spare_.clear();
    sizes_.clear();
    where_.clear();
    spare_nodes_.clear();
    oldest_ = newest_ = kNone;
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }
  size_t sizes() const { return sizes_.size(); } // sizes with an entry, empty ones included

private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Entry {
    void* p = nullptr;
    size_t n = 0;
    uint32_t prev_of_size = kNone, next_of_size = kNone; // its size's blocks, oldest first
    uint32_t older = kNone, newer = kNone;               // all blocks, oldest first
  };
  struct SizeList {
    uint32_t first = kNone, last = kNone;
  };

  // Entries of sizes with no block left: kept so that a loop's sizes are not erased and
  // allocated again every step, but not without bound (a program whose sizes keep changing).
  static constexpr size_t kMaxSizes = 1024;
  void drop_empty_sizes() {
    std::erase_if(sizes_, [](const auto& entry) { return entry.second.first == kNone; });
  }

  uint32_t new_entry() {
    if (!spare_.empty()) {
      const uint32_t i = spare_.back();
      spare_.pop_back();
      slab_[i] = Entry{};
      return i;
    }
    slab_.emplace_back();
    return static_cast<uint32_t>(slab_.size() - 1);
  }

  // Unlinks entry i from both lists and the map; returns its block.
  void* remove(uint32_t i) {
    const Entry e = slab_[i];
    SizeList& s = sizes_[e.n];
    (e.prev_of_size != kNone ? slab_[e.prev_of_size].next_of_size : s.first) = e.next_of_size;
    (e.next_of_size != kNone ? slab_[e.next_of_size].prev_of_size : s.last) = e.prev_of_size;
    (e.older != kNone ? slab_[e.older].newer : oldest_) = e.newer;
    (e.newer != kNone ? slab_[e.newer].older : newest_) = e.older;
    spare_nodes_.push_back(where_.extract(e.p));
    spare_.push_back(i);
    bytes_ -= e.n;
    return e.p;
  }

  size_t max_block_, max_bytes_;
  std::vector<Entry> slab_;
  std::vector<uint32_t> spare_; // entries of slab_ not in use
  std::unordered_map<size_t, SizeList> sizes_;
  std::unordered_map<const void*, uint32_t> where_;
  std::vector<std::unordered_map<const void*, uint32_t>::node_type> spare_nodes_;
  uint32_t oldest_ = kNone, newest_ = kNone;
  size_t bytes_ = 0;
};

} // namespace kiln::detail

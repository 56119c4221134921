// Blocks released by their last handle, kept for the next allocation of the same size.
//
// A loop step allocates and frees the same sizes every time. Keeping them saves the
// allocator's calls: on a GPU two stream-ordered pool calls per buffer; on the host, malloc's
// habit of returning freed memory at the top of the heap to the kernel (and faulting it back in,
// zeroed, at the next step), which cost a CPU training step a third of its time. Bounded in
// block size and total bytes; the owner gives everything back when an allocation fails.
#pragma once

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <algorithm>
#include <cstddef>

namespace kiln::detail {

class RecycledBlocks {
public:
  RecycledBlocks(size_t max_block, size_t max_bytes)
      : max_block_(max_block), max_bytes_(max_bytes) {}

  // The block at `hint` if it is free, else the last one freed of `n` bytes; null if none.
  void* take(size_t n, const void* hint) {
    auto it = free_.find(n);
    if (it == free_.end() || it->second.empty()) return nullptr;
    llvm::SmallVector<void*, 4>& blocks = it->second;
    auto at = std::find(blocks.begin(), blocks.end(), hint);
    if (at != blocks.end()) std::swap(*at, blocks.back());
    bytes_ -= n;
    return blocks.pop_back_val();
  }
  // Keeps `p` if it fits the bounds; false: the caller frees it.
  bool keep(void* p, size_t n) {
    if (n > max_block_ || bytes_ + n > max_bytes_) return false;
    free_[n].push_back(p);
    bytes_ += n;
    return true;
  }
  // Hands every kept block to `free_block(p, n)` and forgets them.
  template <class Free> void release_all(Free free_block) {
    for (auto& [n, blocks] : free_)
      for (void* p : blocks) free_block(p, n);
    free_.clear();
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }

private:
  size_t max_block_, max_bytes_;
  llvm::DenseMap<size_t, llvm::SmallVector<void*, 4>> free_;
  size_t bytes_ = 0;
};

} // namespace kiln::detail

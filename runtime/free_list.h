#pragma once
// Blocks of one size for objects made and freed by the thousand per step (nodes, gradient
// records, buffers): a freed block is kept (up to MaxFree of them) and handed out again instead of a
// malloc and a free each. kiln's contract is one thread at a time (tensor.h), so a list is a
// plain global. It is never torn down: an object freed during static destruction still finds
// it, and the blocks it holds at exit are the process's to reclaim.
#include <cstddef>
#include <new>

namespace kiln::detail {

template <std::size_t Size, int MaxFree> class FreeList {
#if defined(__SANITIZE_ADDRESS__)
  static constexpr int kKept = 0; // AddressSanitizer then still sees every use after free
#else
  static constexpr int kKept = MaxFree;
#endif
  struct Block {
    Block* next;
  };
  static_assert(Size >= sizeof(Block));

public:
  constexpr FreeList() = default;

  void* allocate(std::size_t bytes) {
    if (bytes == Size && head_) {
      Block* b = head_;
      head_ = b->next;
      --count_;
      return b;
    }
    return ::operator new(bytes);
  }

  void release(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    if (bytes == Size && count_ < kKept) {
      auto* b = static_cast<Block*>(p);
      b->next = head_;
      head_ = b;
      ++count_;
      return;
    }
    ::operator delete(p);
  }

private:
  Block* head_ = nullptr;
  int count_ = 0;
};

} // namespace kiln::detail

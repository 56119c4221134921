// Node allocation from a free list. A loop of small steps creates and destroys one node per op
// call (17 per LSTM step), each a 456-byte malloc + free; freed nodes are kept (up to
// kMaxFree, ~1.9 MB) and handed out again. kiln's contract is one thread at a time
// (tensor.h), so the list is a plain global. It is never torn down: a node freed during static
// destruction still finds it, and the blocks it holds at exit are the process's to reclaim.
#include "engine/node.h"

#include <new>

namespace kiln::detail {

namespace {

struct FreeNode {
  FreeNode* next;
};
static_assert(sizeof(Node) >= sizeof(FreeNode));

#if defined(__SANITIZE_ADDRESS__)
constexpr int kMaxFree = 0; // AddressSanitizer then still sees every use after free
#else
constexpr int kMaxFree = 4096;
#endif
FreeNode* free_head = nullptr;
int free_count = 0;

} // namespace

void* Node::operator new(std::size_t bytes) {
  if (bytes == sizeof(Node) && free_head) {
    FreeNode* f = free_head;
    free_head = f->next;
    --free_count;
    return f;
  }
  return ::operator new(bytes);
}

void Node::operator delete(void* p) noexcept {
  if (!p) return;
  if (free_count < kMaxFree) {
    auto* f = static_cast<FreeNode*>(p);
    f->next = free_head;
    free_head = f;
    ++free_count;
    return;
  }
  ::operator delete(p);
}

} // namespace kiln::detail

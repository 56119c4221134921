// Node allocation from a free list (runtime/free_list.h): a loop of small steps creates and
// destroys one node per op call (17 per LSTM step), each a 456-byte malloc + free otherwise.
// Up to 4096 freed nodes are kept (~1.9 MB).
#include "engine/node.h"
#include "runtime/free_list.h"

namespace kiln::detail {

namespace {

constinit FreeList<sizeof(Node), 4096> free_nodes;

} // namespace

void* Node::operator new(std::size_t bytes) {
  return free_nodes.allocate(bytes);
}

void Node::operator delete(void* p, std::size_t bytes) noexcept {
  free_nodes.release(p, bytes);
}

} // namespace kiln::detail

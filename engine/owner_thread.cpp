#include "engine/owner_thread.h"

#include "ir/errors.h"

#include <kiln/engine.h>

namespace kiln::detail {

namespace {

// Gives up ownership when the owning thread exits, so that a thread that built tensors and
// ended hands them on without a call.
struct ReleaseAtExit {
  bool armed = false;
  ~ReleaseAtExit() {
    if (armed) release_thread();
  }
};

} // namespace

std::atomic<uintptr_t>& owner_thread() {
  static std::atomic<uintptr_t> owner{0};
  return owner;
}

void claim_owner_thread(const char* op) {
  uintptr_t none = 0;
  // acquire: see every write the previous owner made before it released the graph.
  if (!owner_thread().compare_exchange_strong(none, this_thread_tag(), std::memory_order_acquire))
    fail(op, "called from a second thread while another thread is using kiln. kiln's graph is "
             "used by one thread at a time: finish with it in the other thread (its use ends "
             "when it exits or calls kiln::release_thread()), then use it here");
  static thread_local ReleaseAtExit release;
  release.armed = true;
}

} // namespace kiln::detail

namespace kiln {

void release_thread() {
  uintptr_t me = detail::this_thread_tag();
  // release: the next owner sees every write this thread made to the graph.
  detail::owner_thread().compare_exchange_strong(me, 0, std::memory_order_release);
}

} // namespace kiln

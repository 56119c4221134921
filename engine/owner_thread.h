#pragma once
// One thread at a time records ops and evaluates: kiln's graph and its handle counts are not
// synchronized, so two threads using it at once corrupt it. The first thread that records
// becomes the owner; another thread that records or evaluates while the owner is alive gets a
// clear kiln::Error instead of a corrupted graph. Ownership ends when the owning thread exits
// or calls kiln::release_thread(). Checked where nodes are made and where evaluation starts:
// one relaxed load and a compare on the hot path.
#include <atomic>
#include <cstdint>

namespace kiln::detail {

#if defined(__has_builtin) && (defined(__x86_64__) || defined(__aarch64__))
#if __has_builtin(__builtin_thread_pointer)
#define KILN_HAVE_THREAD_POINTER 1
#endif
#endif

/// The calling thread's tag, distinct among live threads: its thread pointer (the TLS base
/// register) where the compiler can read it, which costs one instruction; else the address of a
/// thread-local byte, which in a shared library is a call to __tls_get_addr on every op.
inline uintptr_t this_thread_tag() {
#ifdef KILN_HAVE_THREAD_POINTER
  return reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
#else
  static thread_local char tag;
  return reinterpret_cast<uintptr_t>(&tag);
#endif
}

std::atomic<uintptr_t>& owner_thread();
/// Makes the calling thread the owner if there is none, else throws "[op] ...".
void claim_owner_thread(const char* op);

inline void check_owner_thread(const char* op) {
  if (owner_thread().load(std::memory_order_relaxed) != this_thread_tag()) claim_owner_thread(op);
}

} // namespace kiln::detail

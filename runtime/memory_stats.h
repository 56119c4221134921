#pragma once
// Counters kept by the backends (allocators, copies), read by kiln::stats().
#include <cstdint>

namespace kiln::detail {

struct MemoryStats {
  int64_t allocated = 0; // total bytes handed out since the last reset
  int64_t in_use = 0;
  int64_t peak = 0;
  int64_t copies_overlapped = 0; // host <-> GPU copies issued on a copy stream
  void on_alloc(int64_t bytes) {
    allocated += bytes;
    in_use += bytes;
    if (in_use > peak) peak = in_use;
  }
  void on_free(int64_t bytes) { in_use -= bytes; }
};

MemoryStats& memory_stats();

} // namespace kiln::detail

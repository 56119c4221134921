#pragma once
// The two hashes kiln uses. fnv1a64 is the same in every process, build and machine: names
// and checksums that land on disk (kernel names, disk cache entries). hash_mix is one
// multiply-xorshift round for in-memory tables (CSE, the plan key), where speed matters and a
// collision costs only a comparison.
#include <cstdint>
#include <string_view>

namespace kiln::detail {

/// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
inline uint64_t fnv1a64(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : data) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// Folds v into h.
inline uint64_t hash_mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

} // namespace kiln::detail

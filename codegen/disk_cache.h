#pragma once
// The on-disk kernel cache (format: docs/kernel-cache.md). Keys are structural (see
// cuda_codegen.h); an entry holds the binary, the source and a metadata record. Writes are
// atomic (temp file + rename), so concurrent processes never see half an entry; a corrupt,
// truncated or foreign-version entry is reported once, removed and rebuilt by the caller; an
// unwritable directory degrades to no disk cache with one warning.
#include "codegen/nvrtc_compiler.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::detail {

struct DiskCacheEntry {
  CudaBinary binary;
  std::string source;
  std::string key;
  int arch = 0;
  int nvrtc_version = 0;
  int codegen_version = 0;
  int64_t created_unix = 0;
  int64_t last_used_unix = 0;
  int64_t hits = 0;
};

class DiskCache {
public:
  /// dir empty: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. max_bytes:
  /// the size the directory's entries are kept within, least recently used out first (unset:
  /// $KILN_CACHE_MAX_BYTES, else 1 GiB; 0: no limit).
  explicit DiskCache(std::string dir = {}, std::optional<uint64_t> max_bytes = std::nullopt);
  /// The entry for `src.key` if present and valid (bumps hits and last_used). A miss is
  /// appended to the miss log when KILN_CACHE_MISS_LOG names one (`kiln-cache why` reads it).
  std::optional<DiskCacheEntry> load(const CudaKernelSource& src, const CudaTarget& t);
  void store(const CudaKernelSource& src, const CudaTarget& t, const CudaBinary& bin);
  bool enabled() const { return enabled_; }
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }

  /// Tests only: called while a damaged entry is being removed, after it has been moved out
  /// of its name and before it is deleted (where a concurrent writer may store a fresh entry).
  static inline void (*during_removal_for_tests)(const std::string& path) = nullptr;

private:
  std::optional<DiskCacheEntry> load_entry(const CudaKernelSource& src, const CudaTarget& t,
                                           std::string& missed);
  void log_miss(const CudaKernelSource& src, const CudaTarget& t, std::string_view why) const;

  std::string dir_;
  std::string miss_log_;
  uint64_t max_bytes_ = 0;
  bool enabled_ = false;
};

} // namespace kiln::detail

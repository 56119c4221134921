#pragma once
// Byte format of kernel cache entries (<hash>.kce) and use records (<hash>.kcu); specified in
// docs/kernel-cache.md. Internal to codegen/disk_cache*.cpp (and its tests); pure C++.
#include "ir/hash.h"
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::detail {

// 2: file names hash the format version with the key, so that kilns of different format
// versions sharing a directory use different files (format 1 hashed the key alone).
inline constexpr int kCacheFormatVersion = 2;
inline constexpr std::string_view kEntryMagic = "kiln-kernel-cache";
inline constexpr std::string_view kUseMagic = "kiln-kernel-cache-use";
inline constexpr char kEntrySuffix[] = ".kce";
inline constexpr char kUseSuffix[] = ".kcu";
inline constexpr std::string_view kTempPrefix = ".tmp-";
inline constexpr uint64_t kMaxEntryBytes = uint64_t(1) << 30;
inline constexpr size_t kMaxHeaderBytes = 64 * 1024;

/// An entry's file name without its suffix: 16 lowercase hex digits of
/// fnv1a64("kiln-kernel-cache <format version>\n" + key).
std::string entry_base_name(std::string_view key);
/// Whether `name` is one of kiln's temp files: ".tmp-" + (an entry or use file name, "probe"
/// or "removed") + "-<pid>-<counter>-<8 hex digits>". The stale-temp sweep removes only these.
bool is_temp_name(std::string_view name);

struct EntryMeta {
  std::string name; // kernel entry point, for humans and tools (control characters -> '_')
  int64_t arch = 0, nvrtc = 0, codegen = 0;
  bool is_cubin = true;
  int64_t compile_us = 0, created = 0;
};

/// The header (through its "header" checksum line) of an entry with these sections.
std::string format_header(const EntryMeta& m, std::string_view key, std::string_view source,
                          std::string_view log, std::string_view binary);

struct EntryView : EntryMeta {
  std::string_view key, source, log, binary; // point into the parsed file
  uint64_t header_sum = 0;                   // identifies this write of the entry
};

/// "" if `file` is a complete, intact entry of this format version (and fills `v`), else a
/// short reason (empty, not an entry, other format version, truncated, checksum mismatch...).
std::string parse_entry(std::string_view file, EntryView& v);
/// The format version an entry's first line declares, if it is a kiln cache entry at all.
std::optional<int64_t> entry_format_version(std::string_view file);

struct UseRecord {
  int64_t hits = 0, last_used = 0;
};
std::string format_use(uint64_t entry_header_sum, int64_t hits, int64_t last_used);
/// The record in `text` if it is a valid use record of the entry whose header checksum is
/// `entry_header_sum`, else zeros (no record yet, a stale one from a replaced entry, garbage).
UseRecord parse_use(std::string_view text, uint64_t entry_header_sum);

} // namespace kiln::detail

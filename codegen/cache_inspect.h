#pragma once
// The kernel cache directory as a whole (docs/kernel-cache.md), for the kiln-cache tool and
// its tests: every entry with its metadata, use record and validity; removals that never
// delete a fresh entry a concurrent writer put in place; archives of entries. Pure C++.
#include "codegen/disk_cache_format.h"

#include <cstdint>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace kiln::detail::cache_inspect {

/// One `<hash>.kce` file.
struct Entry {
  std::string hash; // the file name's 16 hex digits
  std::string path;
  uint64_t file_bytes = 0;
  uint64_t use_bytes = 0; // its use record's, if any
  std::string problem;    // "" when valid: every check of "Validation", and the name's hash
  EntryMeta meta;         // valid entries
  uint64_t key_bytes = 0, source_bytes = 0, log_bytes = 0, binary_bytes = 0;
  int64_t hits = 0, last_used = 0; // from the use record; last_used = created without one
  struct stat read_stat = {};      // the file as read, for remove()

  bool valid() const { return problem.empty(); }
};

/// What an entry holds beyond its metadata (read again, and checked again).
struct Sections {
  std::string key, source, log, binary;
};

struct Directory {
  std::string dir;
  bool exists = false;
  std::vector<Entry> entries;           // by hash
  std::vector<std::string> orphan_uses; // use records without an entry (paths)
  std::vector<std::string> stale_temps; // kiln's temp files older than an hour (paths)
  std::vector<std::string> unreadable;  // `*.kce` names that are not regular files (paths)
};

/// Reads every entry of `dir` (a missing directory is an empty one).
Directory scan(const std::string& dir);
/// The entries whose hash starts with `what` (at least 4 hex digits) or whose kernel name is
/// `what`.
std::vector<const Entry*> find(const Directory& d, const std::string& what);
/// e's sections, or a problem ("" and the sections when it is still the entry scanned).
std::string read_sections(const Entry& e, Sections& out);
/// Removes e and its use record, unless a writer replaced it since it was scanned.
void remove(const Directory& d, const Entry& e);
/// Removes a use record, temp file or other file of kiln's by path; false if it could not.
bool remove_file(const std::string& path);

/// An archive of entries for another machine of the same kind (docs/kernel-cache.md,
/// "Archives"). Returns "" or a problem.
std::string write_archive(const std::string& path, const std::vector<const Entry*>& entries);

struct ImportReport {
  int added = 0, unchanged = 0;
  std::vector<std::string> skipped; // "<hash>: why"
};
/// Adds the archive's entries to `dir` (created if missing), each checked as `verify` checks
/// and written atomically; entries not built by this kiln's code generator are skipped unless
/// `all`. Returns "" or why the archive could not be read (nothing is added then).
std::string import_archive(const std::string& path, const std::string& dir, bool all,
                           ImportReport& report);

} // namespace kiln::detail::cache_inspect

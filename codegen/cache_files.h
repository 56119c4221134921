#pragma once
// Files of the kernel cache directory (docs/kernel-cache.md): its location, atomic writes,
// safe reads and removals. Shared by the cache (disk_cache.cpp) and the kiln-cache tool.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <sys/stat.h>

namespace kiln::detail::cache_files {

std::string errno_text(int e);
/// dir, else $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln ("" without a home).
std::string resolve_dir(std::string dir);
/// mkdir -p, creating missing directories 0700; "" on success, else why not.
std::string make_dirs(const std::string& dir);
/// A fresh temp file name in dir for a file to be renamed to `final_name` (kiln's pattern).
std::string temp_name(const std::string& dir, const std::string& final_name);
/// Writes the concatenation of `parts` to dir/name through a temp file + rename(2).
/// "" on success, else why not (the temp file is removed either way).
std::string write_atomic(const std::string& dir, const std::string& name,
                         std::initializer_list<std::string_view> parts);
/// Whole file through an open fd; false on a read error or when larger than `limit`.
bool read_fd(int fd, std::string& out, uint64_t limit);
/// Opens `path` for reading if it is a regular file: never blocks (a FIFO), never follows a
/// symbolic link. -1 with errno set otherwise (EINVAL for a file that is not regular).
int open_regular(const std::string& path, struct stat& st);
bool same_file(const struct stat& a, const struct stat& b);
/// Removes the entry file we read (`read`, its stat) at `path` and its use record, but never a
/// fresh entry a concurrent writer renamed over it since. `during_removal` (tests): called
/// after the name was moved aside, before the moved file is deleted.
void remove_entry(const std::string& dir, const std::string& path, const std::string& use_path,
                  const struct stat& read, void (*during_removal)(const std::string&) = nullptr);
/// Removes kiln's temp files (exact name pattern) in dir older than an hour.
void remove_stale_temps(const std::string& dir);
/// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
std::string json_quote(std::string_view s);
/// Appends `line` to the file at `path` (created 0600) with one write(2) in append mode, so the
/// lines of concurrent processes never interleave; "" or why not.
std::string append_line(const std::string& path, std::string_view line);
/// When the entries and use records in dir take more than `limit` bytes, removes entries
/// (with their use records) least recently used first until they take at most 90% of it,
/// never `keep` (the name of an entry just written). Last use is the later of the entry's
/// and its use record's modification times (a hit rewrites the use record). A process that
/// has an entry open keeps reading it; one about to open it sees a miss. Returns the number
/// of entries removed.
int evict_least_recently_used(const std::string& dir, uint64_t limit, const std::string& keep);

} // namespace kiln::detail::cache_files

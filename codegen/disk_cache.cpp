// The on-disk kernel cache. One file per entry (<fnv1a64(key)>.kce: text header, then key,
// source, log and binary, each with its size and checksum), written to a temp file in the
// same directory and renamed over the final name, so readers see a whole old entry or a whole
// new one. Hits/last-used live in a small sidecar (<hash>.kcu), also replaced atomically, so
// bumping them never touches the entry. Format: docs/kernel-cache.md. Pure C++: no CUDA.
#include "codegen/disk_cache.h"
#include "ir/settings.h"

#include "codegen/cache_files.h"
#include "codegen/disk_cache_format.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::detail {
namespace {

using namespace cache_files;

// Writes are line-sized single fprintf calls on unbuffered stderr.
void warn(const std::string& msg) {
  std::fprintf(stderr, "kiln: %s\n", msg.c_str());
}

/// Once per process per `what` (an entry path, or a warning class).
bool first_time(const std::string& what) {
  // Never destroyed: the background compile thread may ask while the process exits.
  static auto* mu = new std::mutex;
  static auto* seen = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(*mu);
  return seen->insert(what).second;
}

void report_once(const std::string& path, const std::string& why) {
  if (first_time("entry:" + path))
    warn(fmt::format("kernel cache entry {} ignored and removed: {}; the kernel is rebuilt", path,
                     why));
}

// Anyone who can write the directory can plant a kernel that kiln loads and runs.
void warn_if_others_can_write(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) &&
      first_time("shared-dir"))
    std::fprintf(stderr,
                 "kiln: kernel cache directory '%s' is writable by other users, who could plant "
                 "kernels that kiln runs; use a directory only you can write (KILN_CACHE_DIR)\n",
                 dir.c_str());
}

} // namespace

DiskCache::DiskCache(std::string dir, std::optional<uint64_t> max_bytes)
    : dir_(resolve_dir(std::move(dir))),
      max_bytes_(max_bytes
                     ? *max_bytes
                     : uint64_t(setting_int(Setting::cache_max_bytes).value_or(int64_t(1) << 30))) {
  std::string why = dir_.empty() ? "no HOME to put ~/.cache/kiln in" : make_dirs(dir_);
  if (why.empty()) { // the real test (access(2) says yes to root on a read-only mount)
    std::string probe = temp_name(dir_, "probe");
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
      why = fmt::format("cannot create files in it: {}", errno_text(errno));
    else
      ::close(fd), ::unlink(probe.c_str());
  }
  enabled_ = why.empty();
  miss_log_ = setting_text(Setting::cache_miss_log).value_or("");
  if (enabled_) warn_if_others_can_write(dir_);
  if (!enabled_) {
    if (first_time("unusable-dir"))
      warn(fmt::format("kernel cache directory '{}' is not usable ({}); compiled kernels are "
                       "cached in memory only (set KILN_CACHE_DIR to a writable directory)",
                       dir_, why));
    return;
  }
  remove_stale_temps(dir_);
}

// One JSON line per miss, appended with one write(2) (O_APPEND: lines of concurrent processes
// do not interleave); kiln-cache why reads it.
void DiskCache::log_miss(const CudaKernelSource& src, const CudaTarget& t,
                         std::string_view why) const {
  if (miss_log_.empty()) return;
  const std::string standin =
      src.standin.empty() ? "" : fmt::format("\"standin\":{},", json_quote(src.standin));
  const std::string line =
      fmt::format("{{\"time\":{},\"name\":{},\"arch\":{},\"nvrtc\":{},\"codegen\":{},\"why\":{},"
                  "{}\"key\":{}}}\n",
                  int64_t(std::time(nullptr)), json_quote(src.name), t.arch, t.nvrtc_version,
                  kCodegenVersion, json_quote(why), standin, json_quote(src.key));
  if (std::string err = append_line(miss_log_, line); !err.empty() && first_time("miss-log"))
    warn(fmt::format("cannot write the miss log: {}", err));
}

std::optional<DiskCacheEntry> DiskCache::load(const CudaKernelSource& src, const CudaTarget& t) {
  std::string missed;
  std::optional<DiskCacheEntry> e = load_entry(src, t, missed);
  if (!e) log_miss(src, t, missed);
  return e;
}

// `missed`: why, when it returns nothing.
std::optional<DiskCacheEntry> DiskCache::load_entry(const CudaKernelSource& src,
                                                    const CudaTarget& t, std::string& missed) {
  missed = "disk cache disabled";
  if (!enabled_) return std::nullopt;
  missed = "not in the cache";
  const std::string base = entry_base_name(src.key);
  const std::string path = dir_ + "/" + base + kEntrySuffix;
  const std::string use_path = dir_ + "/" + base + kUseSuffix;
  struct stat st {};
  int fd = open_regular(path, st);
  if (fd < 0) {
    if (errno != ENOENT && first_time("entry:" + path))
      warn(fmt::format("kernel cache entry {} not used: {}", path,
                       errno == EINVAL || errno == ELOOP ? "not a regular file"
                                                         : errno_text(errno)));
    return std::nullopt;
  }
  std::string file;
  bool read_ok = read_fd(fd, file, kMaxEntryBytes);
  ::close(fd);
  EntryView v;
  std::string why = read_ok ? parse_entry(file, v) : "unreadable or larger than 1 GiB";
  if (auto version = entry_format_version(file); version && *version != kCacheFormatVersion) {
    if (first_time("entry:" + path)) // another kiln's file: its names differ, so a collision
      warn(fmt::format("kernel cache entry {} has format version {} (this kiln writes {}); left "
                       "in place, not used",
                       path, *version, kCacheFormatVersion));
    missed = "an entry of another cache format under its name";
    return std::nullopt;
  }
  if (!why.empty()) {
    report_once(path, why);
    remove_entry(dir_, path, use_path, st, during_removal_for_tests);
    missed = "damaged entry removed: " + why;
    return std::nullopt;
  }
  if (v.key != src.key) { // an FNV-1a collision: a valid entry of another kernel; leave it
    if (first_time("entry:" + path))
      warn(fmt::format("kernel cache entry {} holds another key (hash collision); not used", path));
    missed = "another key under its name (hash collision)";
    return std::nullopt;
  }
  if (v.arch != t.arch || v.nvrtc != t.nvrtc_version || v.codegen != kCodegenVersion) {
    report_once(path,
                fmt::format("built for sm_{} nvrtc {} codegen {}, expected sm_{} nvrtc {} "
                            "codegen {}",
                            v.arch, v.nvrtc, v.codegen, t.arch, t.nvrtc_version, kCodegenVersion));
    remove_entry(dir_, path, use_path, st, during_removal_for_tests);
    missed = "foreign entry removed";
    return std::nullopt;
  }

  DiskCacheEntry e;
  e.binary.image.assign(v.binary.begin(), v.binary.end());
  e.binary.is_cubin = v.is_cubin;
  e.binary.log = std::string(v.log);
  e.binary.compile_ms = double(v.compile_us) / 1000.0;
  e.source = std::string(v.source);
  e.key = std::string(v.key);
  e.arch = int(v.arch);
  e.nvrtc_version = int(v.nvrtc);
  e.codegen_version = int(v.codegen);
  e.created_unix = v.created;

  // Use record: read-modify-write of the sidecar, replaced atomically. Concurrent loads may
  // lose an increment (hits is a statistic), never corrupt anything.
  UseRecord use;
  struct stat ust;
  int ufd = open_regular(use_path, ust);
  if (ufd >= 0) {
    std::string text;
    if (read_fd(ufd, text, 4096)) use = parse_use(text, v.header_sum);
    ::close(ufd);
  }
  e.hits = use.hits + 1;
  e.last_used_unix = int64_t(std::time(nullptr));
  std::string rec = format_use(v.header_sum, e.hits, e.last_used_unix);
  if (std::string err = write_atomic(dir_, base + std::string(kUseSuffix), {rec}); !err.empty())
    if (first_time("use-write")) warn(fmt::format("kernel cache: {}", err));
  return e;
}

void DiskCache::store(const CudaKernelSource& src, const CudaTarget& t, const CudaBinary& bin) {
  if (!enabled_) return;
  EntryMeta m;
  m.name = src.name;
  m.arch = t.arch;
  m.nvrtc = t.nvrtc_version;
  m.codegen = kCodegenVersion;
  m.is_cubin = bin.is_cubin;
  m.compile_us = bin.compile_ms > 0 ? int64_t(bin.compile_ms * 1000.0 + 0.5) : 0;
  m.created = int64_t(std::time(nullptr));
  std::string_view binary(bin.image.data(), bin.image.size());
  std::string header = format_header(m, src.key, src.source, bin.log, binary);
  const std::string name = entry_base_name(src.key) + std::string(kEntrySuffix);
  if (std::string err = write_atomic(dir_, name, {header, src.key, src.source, bin.log, binary});
      !err.empty()) {
    if (first_time("entry-write"))
      warn(
          fmt::format("kernel cache: {} (kernels still run; further write errors not shown)", err));
    return;
  }
  if (max_bytes_ > 0) evict_least_recently_used(dir_, max_bytes_, name);
}

} // namespace kiln::detail

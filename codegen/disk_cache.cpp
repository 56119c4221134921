// The on-disk kernel cache. One file per entry (<fnv1a64(key)>.kce: text header, then key,
// source, log and binary, each with its size and checksum), written to a temp file in the
// same directory and renamed over the final name, so readers see a whole old entry or a whole
// new one. Hits/last-used live in a small sidecar (<hash>.kcu), also replaced atomically, so
// bumping them never touches the entry. Format: docs/kernel-cache.md. Pure C++: no CUDA.
#include "codegen/disk_cache.h"
#include "ir/settings.h"

#include "codegen/disk_cache_format.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <random>
#include <set>
#include <system_error>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::detail {
namespace {

std::string errno_text(int e) {
  return std::generic_category().message(e);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string resolve_dir(std::string dir) {
  if (!dir.empty()) return dir;
  if (auto d = setting_text(Setting::cache_dir)) return *d;
  // XDG: a relative $XDG_CACHE_HOME is invalid and ignored.
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty() && d[0] == '/') return d + "/kiln";
  std::string home = env("HOME");
  if (home.empty())
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  return home.empty() ? std::string() : home + "/.cache/kiln";
}

/// mkdir -p, creating missing directories 0700 (the cache holds code kiln runs: see
/// docs/kernel-cache.md, "Trust"); "" on success, else why not.
std::string make_dirs(const std::string& dir) {
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    std::string part = dir.substr(0, pos);
    if (!part.empty() && ::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return fmt::format("cannot create {}: {}", part, errno_text(errno));
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno_text(errno);
  if (!S_ISDIR(st.st_mode)) return "not a directory";
  return {};
}

// Writes are line-sized single fprintf calls on unbuffered stderr.
void warn(const std::string& msg) {
  std::fprintf(stderr, "kiln: %s\n", msg.c_str());
}

/// Once per process per `what` (an entry path, or a warning class).
bool first_time(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(what).second;
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

std::string temp_name(const std::string& dir, const std::string& final_name) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^ (uint64_t(::getpid()) << 32) ^
                                   uint64_t(std::time(nullptr)));
  return fmt::format("{}/{}{}-{}-{}-{:08x}", dir, kTempPrefix, final_name, ::getpid(),
                     counter.fetch_add(1), uint32_t(rng()));
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

/// Writes the concatenation of `parts` to dir/name through a temp file + rename(2).
/// "" on success, else why not (the temp file is removed either way).
std::string write_atomic(const std::string& dir, const std::string& name,
                         std::initializer_list<std::string_view> parts) {
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp = temp_name(dir, name);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return fmt::format("cannot create a temp file in {}: {}", dir, errno_text(errno));
  bool ok = true;
  for (std::string_view p : parts) ok = ok && write_all(fd, p);
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    return fmt::format("cannot write {}/{}: {}", dir, name, errno_text(err));
  }
  return {};
}

/// Whole file through an open fd; false on a read error or when larger than `limit`.
bool read_fd(int fd, std::string& out, uint64_t limit) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) > limit) return false;
  out.resize(size_t(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break; // shrank under us (not one of our writers): validation catches it
    got += size_t(n);
  }
  out.resize(got);
  return true;
}

/// Opens `path` for reading if it is a regular file: never blocks (a FIFO), never follows a
/// symbolic link. -1 with errno set otherwise (EINVAL for a file that is not regular).
int open_regular(const std::string& path, struct stat& st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  int err = ::fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
  if (err == 0) return fd;
  ::close(fd);
  errno = err;
  return -1;
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// Removes the damaged entry we read (`read`) from `path`, and its use sidecar, but never a
/// fresh entry a concurrent writer renamed over it since. Checking the inode and then
/// unlinking the name would race with such a writer; instead the name is atomically moved
/// aside, and the moved file is deleted only if it is the one we read. If it is not, it is
/// moved back unless an even newer entry has taken the name meanwhile.
void remove_entry(const std::string& dir, const std::string& path, const std::string& use_path,
                  const struct stat& read) {
  const std::string aside = temp_name(dir, "removed");
  if (::rename(path.c_str(), aside.c_str()) != 0) return; // gone already, or not ours to move
  if (DiskCache::during_removal_for_tests) DiskCache::during_removal_for_tests(path);
  struct stat moved;
  if (::lstat(aside.c_str(), &moved) == 0 && !same_file(moved, read)) {
    if (::renameat2(AT_FDCWD, aside.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) return;
  } else {
    ::unlink(use_path.c_str());
  }
  ::unlink(aside.c_str());
}

/// Temp files of writers that died between create and rename; an hour is far longer than any
/// write takes.
void remove_stale_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const time_t cutoff = std::time(nullptr) - 3600;
  while (const dirent* e = ::readdir(d)) {
    if (!is_temp_name(e->d_name)) continue; // never another program's files
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        st.st_mtime < cutoff)
      ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

} // namespace

DiskCache::DiskCache(std::string dir) : dir_(resolve_dir(std::move(dir))) {
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

std::optional<DiskCacheEntry> DiskCache::load(const CudaKernelSource& src, const CudaTarget& t) {
  if (!enabled_) return std::nullopt;
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
    return std::nullopt;
  }
  if (!why.empty()) {
    report_once(path, why);
    remove_entry(dir_, path, use_path, st);
    return std::nullopt;
  }
  if (v.key != src.key) { // an FNV-1a collision: a valid entry of another kernel; leave it
    if (first_time("entry:" + path))
      warn(fmt::format("kernel cache entry {} holds another key (hash collision); not used", path));
    return std::nullopt;
  }
  if (v.arch != t.arch || v.nvrtc != t.nvrtc_version || v.codegen != kCodegenVersion) {
    report_once(path,
                fmt::format("built for sm_{} nvrtc {} codegen {}, expected sm_{} nvrtc {} "
                            "codegen {}",
                            v.arch, v.nvrtc, v.codegen, t.arch, t.nvrtc_version, kCodegenVersion));
    remove_entry(dir_, path, use_path, st);
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
      !err.empty() && first_time("entry-write"))
    warn(fmt::format("kernel cache: {} (kernels still run; further write errors not shown)", err));
}

} // namespace kiln::detail

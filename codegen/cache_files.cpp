// Files of the kernel cache directory (format: docs/kernel-cache.md): where it is, atomic
// writes (temp file + rename), safe reads, and the removals that never delete a fresh entry a
// concurrent writer put in place. Shared by the cache (disk_cache.cpp) and the kiln-cache
// tool (codegen/cache_inspect.cpp). Pure C++ and POSIX.
#include "codegen/cache_files.h"
#include "codegen/disk_cache_format.h"
#include "ir/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <random>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

namespace kiln::detail::cache_files {

std::string errno_text(int e) {
  return std::generic_category().message(e);
}

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

} // namespace

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

std::string temp_name(const std::string& dir, const std::string& final_name) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^ (uint64_t(::getpid()) << 32) ^
                                   uint64_t(std::time(nullptr)));
  return fmt::format("{}/{}{}-{}-{}-{:08x}", dir, kTempPrefix, final_name, ::getpid(),
                     counter.fetch_add(1), uint32_t(rng()));
}

namespace {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

} // namespace

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
                  const struct stat& read, void (*during_removal)(const std::string&)) {
  const std::string aside = temp_name(dir, "removed");
  if (::rename(path.c_str(), aside.c_str()) != 0) return; // gone already, or not ours to move
  if (during_removal) during_removal(path);
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

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += char(c);
    else if (c < 0x20)
      out += fmt::format("\\u{:04x}", c);
    else
      out += char(c);
  }
  return out + "\"";
}

std::string append_line(const std::string& path, std::string_view line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return fmt::format("{}: {}", path, errno_text(errno));
  const bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size());
  const int err = errno;
  ::close(fd);
  return ok ? std::string() : fmt::format("{}: {}", path, errno_text(err));
}

namespace {

struct Resident {
  std::string name;
  struct stat st;
  uint64_t bytes = 0; // entry and use record
  int64_t last_use = 0;
};

bool entry_name(std::string_view name) {
  return name.size() == 16 + 4 && name.substr(16) == kEntrySuffix &&
         name.find_first_not_of("0123456789abcdef") == 16;
}

} // namespace

int evict_least_recently_used(const std::string& dir, uint64_t limit, const std::string& keep) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  std::vector<Resident> rs;
  uint64_t total = 0;
  while (const dirent* e = ::readdir(d)) {
    Resident r;
    r.name = e->d_name;
    if (!entry_name(r.name) || ::fstatat(::dirfd(d), e->d_name, &r.st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(r.st.st_mode))
      continue;
    r.bytes = uint64_t(r.st.st_size);
    r.last_use = r.st.st_mtime;
    struct stat use;
    const std::string use_name = r.name.substr(0, 16) + kUseSuffix;
    if (::fstatat(::dirfd(d), use_name.c_str(), &use, AT_SYMLINK_NOFOLLOW) == 0) {
      r.bytes += uint64_t(use.st_size);
      r.last_use = std::max<int64_t>(r.last_use, use.st_mtime);
    }
    total += r.bytes;
    rs.push_back(std::move(r));
  }
  ::closedir(d);
  if (total <= limit) return 0;
  std::sort(rs.begin(), rs.end(),
            [](const Resident& a, const Resident& b) { return a.last_use < b.last_use; });
  const uint64_t goal = limit - limit / 10;
  int removed = 0;
  for (const Resident& r : rs) {
    if (total <= goal) break;
    if (r.name == keep) continue;
    const std::string base = dir + "/" + r.name.substr(0, 16);
    remove_entry(dir, base + kEntrySuffix, base + kUseSuffix, r.st);
    total -= r.bytes;
    ++removed;
  }
  return removed;
}

} // namespace kiln::detail::cache_files

// The kernel cache directory as a whole, for kiln-cache (cache_inspect.h). Reading goes
// through the same checks as the cache's own loads (parse_entry), plus the file name's hash;
// removal through cache_files' rename-aside, so that a fresh entry a kiln process renamed
// into place meanwhile survives.
#include "codegen/cache_inspect.h"

#include "codegen/cache_files.h"
#include "codegen/codegen_version.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace kiln::detail::cache_inspect {

namespace {

namespace fs = std::filesystem;
using namespace cache_files;

constexpr std::string_view kArchiveMagic = "kiln-cache-archive 1";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool hex16(std::string_view s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string read_small(const std::string& path) {
  struct stat st;
  int fd = open_regular(path, st);
  std::string text;
  if (fd >= 0) {
    if (!read_fd(fd, text, 4096)) text.clear();
    ::close(fd);
  }
  return text;
}

// Reads and checks the entry file at e.path; fills e's metadata, or e.problem.
void read_entry(Entry& e, std::string& file, EntryView& v) {
  int fd = open_regular(e.path, e.read_stat);
  if (fd < 0) {
    e.problem = errno == EINVAL ? "not a regular file" : errno_text(errno);
    return;
  }
  const bool ok = read_fd(fd, file, kMaxEntryBytes);
  ::close(fd);
  e.file_bytes = file.size();
  if (!ok) {
    e.problem = "cannot be read, or larger than 1 GiB";
  } else if (auto version = entry_format_version(file);
             version && *version != kCacheFormatVersion) {
    e.problem =
        fmt::format("cache format {}, this kiln reads format {}", *version, kCacheFormatVersion);
  } else if (std::string why = parse_entry(file, v); !why.empty()) {
    e.problem = why;
  } else if (entry_base_name(v.key) != e.hash) {
    e.problem = "its name is not the hash of its key";
  }
}

Entry scan_entry(const std::string& dir, const std::string& name) {
  Entry e;
  e.hash = name.substr(0, name.size() - 4);
  e.path = dir + "/" + name;
  std::string file;
  EntryView v;
  read_entry(e, file, v);
  if (!e.valid()) return e;
  e.meta = v; // the EntryMeta part
  e.key_bytes = v.key.size();
  e.source_bytes = v.source.size();
  e.log_bytes = v.log.size();
  e.binary_bytes = v.binary.size();
  const std::string use = read_small(dir + "/" + e.hash + kUseSuffix);
  e.use_bytes = use.size();
  const UseRecord r = parse_use(use, v.header_sum);
  e.hits = r.hits;
  e.last_used = r.last_used ? r.last_used : v.created;
  return e;
}

} // namespace

Directory scan(const std::string& dir) {
  Directory d;
  d.dir = dir;
  std::error_code ec;
  d.exists = fs::is_directory(dir, ec);
  if (!d.exists) return d;
  std::vector<std::string> names;
  for (const fs::directory_entry& de : fs::directory_iterator(dir, ec))
    names.push_back(de.path().filename().string());
  std::sort(names.begin(), names.end());
  const time_t hour_ago = std::time(nullptr) - 3600;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (ends_with(name, kEntrySuffix) && hex16(name.substr(0, name.size() - 4))) {
      Entry e = scan_entry(dir, name);
      if (e.problem == "not a regular file")
        d.unreadable.push_back(path);
      else
        d.entries.push_back(std::move(e));
    } else if (ends_with(name, kUseSuffix) && hex16(name.substr(0, name.size() - 4))) {
      if (!fs::exists(dir + "/" + name.substr(0, name.size() - 4) + kEntrySuffix, ec))
        d.orphan_uses.push_back(path);
    } else if (is_temp_name(name)) {
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime < hour_ago)
        d.stale_temps.push_back(path);
    }
  }
  return d;
}

std::vector<const Entry*> find(const Directory& d, const std::string& what) {
  std::vector<const Entry*> found;
  for (const Entry& e : d.entries)
    if ((what.size() >= 4 && e.hash.compare(0, what.size(), what) == 0) ||
        (e.valid() && e.meta.name == what))
      found.push_back(&e);
  return found;
}

std::string read_sections(const Entry& e, Sections& out) {
  Entry again = e;
  again.problem.clear();
  std::string file;
  EntryView v;
  read_entry(again, file, v);
  if (!again.valid()) return again.problem;
  if (!same_file(again.read_stat, e.read_stat)) return "replaced since it was listed";
  out.key = v.key;
  out.source = v.source;
  out.log = v.log;
  out.binary = v.binary;
  return {};
}

void remove(const Directory& d, const Entry& e) {
  remove_entry(d.dir, e.path, d.dir + "/" + e.hash + kUseSuffix, e.read_stat);
}

bool remove_file(const std::string& path) {
  return ::unlink(path.c_str()) == 0 || errno == ENOENT;
}

// ---- archives: the magic line, "cache-format F", "codegen C", "entries N", then per entry
// "entry <hash> <bytes>\n" and the entry file's bytes, then "end\n" ----------------------------

std::string write_archive(const std::string& path, const std::vector<const Entry*>& entries) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fmt::format("cannot create {}: {}", path, errno_text(errno));
  out << kArchiveMagic << "\ncache-format " << kCacheFormatVersion << "\ncodegen "
      << kCodegenVersion << "\nentries " << entries.size() << "\n";
  for (const Entry* e : entries) {
    std::string file;
    EntryView v;
    Entry again = *e;
    read_entry(again, file, v);
    if (!again.valid()) return fmt::format("{}: {}", e->path, again.problem);
    out << "entry " << e->hash << " " << file.size() << "\n";
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  out << "end\n";
  out.close();
  if (!out) return fmt::format("cannot write {}: {}", path, errno_text(errno));
  return {};
}

namespace {

// "<word> <number>" at the start of `in`, consuming the line.
bool header_line(std::string_view& in, std::string_view word, int64_t& value) {
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos) return false;
  std::string_view line = in.substr(0, nl);
  if (line.substr(0, word.size() + 1) != std::string(word) + " ") return false;
  line.remove_prefix(word.size() + 1);
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), value);
  if (ec != std::errc() || end != line.data() + line.size()) return false;
  in.remove_prefix(nl + 1);
  return true;
}

// One "entry <hash> <bytes>" record: its hash and the entry's bytes.
bool entry_record(std::string_view& in, std::string& hash, std::string_view& bytes) {
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos || in.substr(0, 6) != "entry ") return false;
  std::string_view line = in.substr(6, nl - 6);
  const size_t sp = line.find(' ');
  if (sp != 16 || !hex16(line.substr(0, 16))) return false;
  uint64_t size = 0;
  auto [end, ec] = std::from_chars(line.data() + 17, line.data() + line.size(), size);
  if (ec != std::errc() || end != line.data() + line.size() || size > in.size() - nl - 1)
    return false;
  hash = std::string(line.substr(0, 16));
  bytes = in.substr(nl + 1, size);
  in.remove_prefix(nl + 1 + size);
  return true;
}

// "" when `file`, named `hash`, may be added here, else why not.
std::string check_import(const std::string& hash, std::string_view file, bool all) {
  EntryView v;
  if (std::string why = parse_entry(file, v); !why.empty()) return why;
  if (entry_base_name(v.key) != hash) return "its name is not the hash of its key";
  if (!all && v.codegen != kCodegenVersion)
    return fmt::format("built by codegen {}, this kiln generates codegen {}", v.codegen,
                       kCodegenVersion);
  return {};
}

} // namespace

std::string import_archive(const std::string& path, const std::string& dir, bool all,
                           ImportReport& report) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fmt::format("cannot open {}: {}", path, errno_text(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  std::string_view rest = data;
  int64_t format = 0, codegen = 0, count = 0;
  if (rest.substr(0, kArchiveMagic.size() + 1) != std::string(kArchiveMagic) + "\n")
    return fmt::format("{} is not a kiln-cache archive", path);
  rest.remove_prefix(kArchiveMagic.size() + 1);
  if (!header_line(rest, "cache-format", format) || !header_line(rest, "codegen", codegen) ||
      !header_line(rest, "entries", count))
    return fmt::format("{}: damaged archive header", path);
  if (format != kCacheFormatVersion)
    return fmt::format("{} holds cache format {} entries, this kiln reads format {}", path, format,
                       kCacheFormatVersion);
  std::vector<std::pair<std::string, std::string_view>> files;
  for (int64_t i = 0; i < count; ++i) {
    std::string hash;
    std::string_view bytes;
    if (!entry_record(rest, hash, bytes))
      return fmt::format("{}: damaged or truncated at entry {} of {}", path, i + 1, count);
    files.emplace_back(hash, bytes);
  }
  if (rest != "end\n") return fmt::format("{}: damaged or truncated (no end record)", path);
  if (std::string why = make_dirs(dir); !why.empty())
    return fmt::format("cannot use {}: {}", dir, why);
  for (const auto& [hash, file] : files) {
    if (std::string why = check_import(hash, file, all); !why.empty()) {
      report.skipped.push_back(fmt::format("{}: {}", hash, why));
      continue;
    }
    const std::string name = hash + kEntrySuffix;
    Entry existing = scan_entry(dir, name);
    if (existing.valid() && existing.file_bytes == file.size()) {
      std::string current;
      EntryView v;
      read_entry(existing, current, v);
      if (current == file) {
        report.unchanged++;
        continue;
      }
    }
    if (std::string why = write_atomic(dir, name, {file}); !why.empty()) {
      report.skipped.push_back(fmt::format("{}: {}", hash, why));
      continue;
    }
    report.added++;
  }
  return {};
}

} // namespace kiln::detail::cache_inspect

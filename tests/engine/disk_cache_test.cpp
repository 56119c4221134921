// The on-disk kernel cache (codegen/disk_cache.h, docs/kernel-cache.md) with hand-made sources
// and fake binaries: no GPU, no NVRTC. Multi-process cases use fork().
// The test binary does not link LLVMSupport (libkiln keeps it private); the LLVM ADT headers
// that codegen/cuda_codegen.h pulls in are header-only once their link-time ABI check is off.
#define LLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING 1
#include "../scoped_env.h"
#include "codegen/disk_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kiln::detail;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-dc-XXXXXX").string();
    path = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    ::chmod(path.c_str(), 0755);
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

using kt::ScopedEnv;

uint64_t fnv(std::string_view s) { // independent of the implementation, per the doc
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

CudaTarget target(int arch = 90, int nvrtc = 12080) {
  return {arch, 132, nvrtc};
}

CudaKernelSource source(const std::string& key, int writer = 0) {
  return {"kiln_test_" + std::to_string(fnv(key) % 1000), key,
          "extern \"C\" __global__ void k() {}\n// writer " + std::to_string(writer) + "\n" + key};
}

/// Deterministic fake cubin of (key, writer): its first byte names the writer, so a reader can
/// check that what it got is exactly one writer's whole binary; every byte value occurs.
CudaBinary binary(const std::string& key, int writer = 0) {
  CudaBinary b;
  size_t n = 300 + size_t(writer) * 1700 + fnv(key) % 500;
  uint64_t x = fnv(key) + uint64_t(writer);
  b.image.push_back(char(writer));
  for (size_t i = 1; i < n; ++i)
    b.image.push_back(char(i < 257 ? i - 1 : (x = x * 6364136223846793005ull + 1) >> 56));
  b.compile_ms = 12.5 + writer;
  b.log = writer % 2 ? "warning: writer " + std::to_string(writer) : "";
  return b;
}

/// "" if `e` is exactly what some writer stored for `key`, else what is wrong.
std::string check(const DiskCacheEntry& e, const std::string& key) {
  if (e.key != key) return "key";
  if (e.binary.image.empty()) return "empty binary";
  int w = e.binary.image[0];
  if (e.binary.image != binary(key, w).image) return "binary";
  if (e.source != source(key, w).source) return "source";
  if (e.binary.log != binary(key, w).log) return "log";
  return {};
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_file(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}
/// An entry's file name without suffix, per the doc: FNV-1a of the format line and the key.
std::string base_name(const std::string& key) {
  return hex(fnv("kiln-kernel-cache 2\n" + key));
}
std::string entry_path(const std::string& dir, const std::string& key) {
  return dir + "/" + base_name(key) + ".kce";
}
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

/// Replaces header line `field ...` (or the magic line, field "kiln-kernel-cache") with
/// `line` and recomputes the header checksum as the doc says.
void rewrite_header(const std::string& path, const std::string& field, const std::string& line) {
  std::string f = read_file(path);
  size_t hdr = f.find("\nheader ") + 1, end = f.find('\n', hdr) + 1;
  std::string head = f.substr(0, hdr), body = f.substr(end);
  size_t at =
      head.compare(0, field.size() + 1, field + " ") == 0 ? 0 : head.find("\n" + field + " ") + 1;
  head.replace(at, head.find('\n', at) - at, line);
  write_file(path, head + "header " + hex(fnv(head)) + "\n" + body);
}

/// Runs `fn` in a child process with stderr going to a file; returns (exit code, stderr).
template <class F> std::pair<int, std::string> in_child(const std::string& dir, F fn) {
  std::string err = dir + "/child-stderr";
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(err.c_str(), "w", stderr)) std::_Exit(99);
    int rc = fn();
    std::fflush(stderr);
    std::_Exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string text = read_file(err);
  fs::remove(err);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

} // namespace

TEST(DiskCache, RoundTrip) {
  TempDir d;
  DiskCache cache(d.path);
  ASSERT_TRUE(cache.enabled());
  EXPECT_EQ(cache.dir(), d.path);
  const std::string key = std::string("ew r2 in:f32:contiguous\nodd key\twith\0 bytes", 42);
  EXPECT_FALSE(cache.load(source(key), target()));
  CudaBinary bin = binary(key, 3);
  int64_t t0 = int64_t(std::time(nullptr));
  cache.store(source(key, 3), target(), bin);
  auto e = cache.load(source(key, 3), target());
  ASSERT_TRUE(e);
  EXPECT_EQ(check(*e, key), "");
  EXPECT_TRUE(e->binary.is_cubin);
  EXPECT_DOUBLE_EQ(e->binary.compile_ms, 15.5);
  EXPECT_EQ(e->arch, 90);
  EXPECT_EQ(e->nvrtc_version, 12080);
  EXPECT_EQ(e->codegen_version, kCodegenVersion);
  EXPECT_GE(e->created_unix, t0);
  EXPECT_LE(e->created_unix, int64_t(std::time(nullptr)));
  EXPECT_EQ(e->hits, 1);

  const std::string ptx_key = "ptx key";
  CudaBinary ptx;
  std::string text = ".version 8.0\n.target sm_120\n";
  ptx.image.assign(text.begin(), text.end());
  ptx.image.push_back('\0');
  ptx.is_cubin = false;
  cache.store(source(ptx_key), target(120), ptx);
  auto p = cache.load(source(ptx_key), target(120));
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->binary.is_cubin);
  EXPECT_EQ(p->binary.image, ptx.image);
  EXPECT_EQ(p->binary.compile_ms, 0);

  // One entry file plus one use record per key; no temp files.
  std::string h = base_name(key), hp = base_name(ptx_key);
  std::vector<std::string> want = {h + ".kce", h + ".kcu", hp + ".kce", hp + ".kcu"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(files_in(d.path), want);
}

TEST(DiskCache, FileNamesAreStableFnv1a) {
  EXPECT_EQ(hex(fnv("a")), "af63dc4c8601ec8c"); // published FNV-1a 64 vectors
  EXPECT_EQ(hex(fnv("foobar")), "85944171f73967e8");
  TempDir d;
  DiskCache cache(d.path);
  const std::string key =
      "ew r1 in:f32:contiguous mul:f32:0,0 out:1:f32 | index32 sm_90 nvrtc 12080 codegen 1";
  cache.store(source(key), target(), binary(key));
  EXPECT_TRUE(fs::exists(d.path + "/" + base_name(key) + ".kce"));
  cache.store(source("a"), target(), binary("a"));
  EXPECT_EQ(base_name("a"), "4f27ba151f4b2a47");
  EXPECT_TRUE(fs::exists(d.path + "/4f27ba151f4b2a47.kce"));
  // Another process (another address space, another ASLR seed) finds the same entries.
  auto [rc, err] = in_child(d.path, [&] {
    DiskCache other(d.path);
    auto e = other.load(source(key), target());
    return e && check(*e, key).empty() ? 0 : 1;
  });
  EXPECT_EQ(rc, 0) << err;
}

TEST(DiskCache, HitsAndLastUsed) {
  TempDir d;
  const std::string key = "hits key";
  DiskCache cache(d.path);
  cache.store(source(key), target(), binary(key));
  ASSERT_EQ(cache.load(source(key), target())->hits, 1);
  // Age the use record (documented text format), then load again.
  std::string use = d.path + "/" + base_name(key) + ".kcu";
  std::string rec = read_file(use);
  size_t at = rec.find("last_used ");
  ASSERT_NE(at, std::string::npos) << rec;
  write_file(use, rec.substr(0, at) + "last_used 1000\n");
  int64_t t0 = int64_t(std::time(nullptr));
  auto e = DiskCache(d.path).load(source(key), target()); // persisted across instances
  ASSERT_TRUE(e);
  EXPECT_EQ(e->hits, 2);
  EXPECT_GE(e->last_used_unix, t0);
  EXPECT_NE(read_file(use).find("hits 2\n"), std::string::npos);
  // A garbage use record only resets the statistics.
  write_file(use, "garbage");
  EXPECT_EQ(cache.load(source(key), target())->hits, 1);
  // Replacing the entry starts its statistics afresh.
  cache.store(source(key, 1), target(), binary(key, 1));
  e = cache.load(source(key), target());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->hits, 1);
  EXPECT_EQ(e->binary.image[0], 1);
}

TEST(DiskCache, ForeignVersionsAreRejected) {
  TempDir d;
  DiskCache cache(d.path);
  struct Case {
    std::string key;
    CudaTarget stored, asked;
    std::string field, line; // header edit, if any
  };
  std::vector<Case> cases = {
      {"arch", target(90), target(80), "", ""},
      {"nvrtc", target(90, 12080), target(90, 13000), "", ""},
      {"codegen", target(), target(), "codegen", "codegen " + std::to_string(kCodegenVersion + 1)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    cache.store(source(c.key), c.stored, binary(c.key));
    if (!c.field.empty()) rewrite_header(entry_path(d.path, c.key), c.field, c.line);
    testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.load(source(c.key), c.asked));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(count(err, entry_path(d.path, c.key)), 1) << err;
    EXPECT_FALSE(fs::exists(entry_path(d.path, c.key)));
    cache.store(source(c.key), c.asked, binary(c.key));
    auto e = cache.load(source(c.key), c.asked);
    ASSERT_TRUE(e);
    EXPECT_EQ(check(*e, c.key), "");
  }
}

TEST(DiskCache, OtherFormatVersionsAreLeftInPlace) {
  // Two kiln versions with different cache formats share a directory: their entries have
  // different names (the format version is hashed into them), and a file of another format
  // found at this version's name is not used but never deleted.
  TempDir d;
  DiskCache cache(d.path);
  const std::string key = "shared dir";
  cache.store(source(key), target(), binary(key));
  const std::string path = entry_path(d.path, key);
  rewrite_header(path, "kiln-kernel-cache", "kiln-kernel-cache 3");
  const std::string other = read_file(path);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(source(key), target()));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("has format version 3 (this kiln writes 2); left in place"), std::string::npos)
      << err;
  EXPECT_EQ(read_file(path), other);
  EXPECT_NE(base_name(key), hex(fnv(key))); // format 1's name for the same key
}

TEST(DiskCache, CorruptEntriesAreReportedOnceRemovedAndRebuilt) {
  TempDir d;
  DiskCache cache(d.path);
  using Mutate = std::string (*)(std::string);
  std::vector<std::pair<std::string, Mutate>> cases = {
      {"flip-binary", [](std::string f) { return f.back() ^= 0x40, f; }},
      {"flip-source", [](std::string f) { return f[f.size() / 2] ^= 0x01, f; }},
      {"flip-header", [](std::string f) { return f[f.find("arch ") + 5] ^= 0x01, f; }},
      {"flip-key", [](std::string f) { return f[f.find("\nheader ") + 26] ^= 0x04, f; }},
      {"truncated-1", [](std::string f) { return f.substr(0, f.size() - 1); }},
      {"truncated-half", [](std::string f) { return f.substr(0, f.size() / 2); }},
      {"truncated-header", [](std::string f) { return f.substr(0, 30); }},
      {"trailing", [](std::string f) { return f + "x"; }},
      {"zero-length", [](std::string) { return std::string(); }},
      {"garbage",
       [](std::string f) {
         for (size_t i = 0; i < f.size(); ++i) f[i] = char(i * 131 + 7);
         return f;
       }},
  };
  for (auto& [key, mutate] : cases) {
    SCOPED_TRACE(key);
    std::string path = entry_path(d.path, key);
    cache.store(source(key), target(), binary(key));
    write_file(path, mutate(read_file(path)));
    testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.load(source(key), target()));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(count(err, path), 1) << err;
    EXPECT_FALSE(fs::exists(path));
    cache.store(source(key), target(), binary(key)); // the caller rebuilds
    auto e = cache.load(source(key), target());
    ASSERT_TRUE(e);
    EXPECT_EQ(check(*e, key), "");
    // Reported once per process per entry.
    write_file(path, mutate(read_file(path)));
    testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.load(source(key), target()));
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  }
}

TEST(DiskCache, HashCollisionIsAMissNotALoad) {
  TempDir d;
  DiskCache cache(d.path);
  cache.store(source("key A"), target(), binary("key A"));
  fs::copy_file(entry_path(d.path, "key A"), entry_path(d.path, "key B"));
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(source("key B"), target()));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("another key"), std::string::npos);
  EXPECT_TRUE(cache.load(source("key A"), target()));
  cache.store(source("key B"), target(), binary("key B")); // the caller's rebuild wins
  auto e = cache.load(source("key B"), target());
  ASSERT_TRUE(e);
  EXPECT_EQ(check(*e, "key B"), "");
}

TEST(DiskCache, ConcurrentWriterProcesses) {
  TempDir d;
  constexpr int kChildren = 8, kIters = 100, kShared = 4, kPrivate = 3;
  auto shared = [](int i) { return "shared key " + std::to_string(i); };
  auto priv = [](int c, int i) { return "private " + std::to_string(c) + "/" + std::to_string(i); };
  testing::internal::CaptureStderr(); // children inherit it: nothing may be reported
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      int bad = 0;
      DiskCache cache(d.path);
      for (int it = 0; it < kIters; ++it) {
        std::string k = shared(it % kShared), p = priv(c, it % kPrivate);
        cache.store(source(k, c + 1), target(), binary(k, c + 1));
        if (auto e = cache.load(source(shared((it + 1) % kShared)), target()))
          bad += !check(*e, shared((it + 1) % kShared)).empty();
        cache.store(source(p, c + 1), target(), binary(p, c + 1));
        auto e = cache.load(source(p), target());
        bad += !e || !check(*e, p).empty();
      }
      std::_Exit(bad > 100 ? 100 : bad);
    }
    pids.push_back(pid);
  }
  DiskCache cache(d.path);
  int parent_loads = 0, parent_bad = 0;
  for (size_t done = 0; done < pids.size();) {
    for (int i = 0; i < kShared; ++i)
      if (auto e = cache.load(source(shared(i)), target()))
        ++parent_loads, parent_bad += !check(*e, shared(i)).empty();
    done = 0;
    for (pid_t& pid : pids) {
      int status = 0;
      if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
        pid = -1;
      }
      done += pid < 0;
    }
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(parent_bad, 0) << "of " << parent_loads << " loads";
  for (int i = 0; i < kShared; ++i) {
    auto e = cache.load(source(shared(i)), target());
    ASSERT_TRUE(e) << shared(i);
    EXPECT_EQ(check(*e, shared(i)), "");
    EXPECT_GE(e->hits, 1);
  }
  for (int c = 0; c < kChildren; ++c)
    for (int i = 0; i < kPrivate; ++i) {
      auto e = cache.load(source(priv(c, i)), target());
      ASSERT_TRUE(e) << priv(c, i);
      EXPECT_EQ(check(*e, priv(c, i)), "");
    }
  for (const std::string& name : files_in(d.path)) EXPECT_NE(name[0], '.') << name;
  EXPECT_EQ(files_in(d.path).size(), size_t(2 * (kShared + kChildren * kPrivate)));
}

namespace {
// In a child: three caches on `dir`, all disabled, no-op store/load; the warnings on stderr.
std::pair<int, std::string> open_unwritable(const std::string& scratch, const std::string& dir) {
  return in_child(scratch, [&] {
    ScopedEnv env("KILN_CACHE_DIR", dir.c_str());
    for (int i = 0; i < 3; ++i) {
      DiskCache cache(i == 0 ? dir : "");
      if (cache.enabled() || cache.dir() != dir) return 1;
      cache.store(source("k"), target(), binary("k"));
      if (cache.load(source("k"), target())) return 2;
    }
    return 0;
  });
}
} // namespace

TEST(DiskCache, UncreatableDirectoryDisablesWithOneWarning) {
  TempDir d;
  write_file(d.path + "/file", "a regular file"); // no directory can be made under it, even by root
  auto [rc, err] = open_unwritable(d.path, d.path + "/file/sub/kiln");
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(count(err, "kiln: "), 1) << err;
  EXPECT_EQ(count(err, "memory only"), 1) << err;
}

TEST(DiskCache, ReadOnlyDirectoryDisablesWithOneWarning) {
  TempDir d;
  std::string ro = d.path + "/ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  ::chmod(ro.c_str(), 0555);
  if (std::FILE* f = std::fopen((ro + "/probe").c_str(), "w")) {
    std::fclose(f);
    GTEST_SKIP() << "chmod 0555 does not stop this user (root): covered by the uncreatable case";
  }
  auto [rc, err] = open_unwritable(d.path, ro);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(count(err, "kiln: "), 1) << err;
  EXPECT_TRUE(files_in(ro).empty());
}

TEST(DiskCache, DirectoryResolution) {
  TempDir d;
  const std::string kiln = d.path + "/k/nested", xdg = d.path + "/xdg", home = d.path + "/home";
  {
    ScopedEnv a("KILN_CACHE_DIR", kiln.c_str()), b("XDG_CACHE_HOME", xdg.c_str()),
        c("HOME", home.c_str());
    DiskCache cache;
    EXPECT_EQ(cache.dir(), kiln);
    EXPECT_TRUE(cache.enabled());
    EXPECT_TRUE(fs::is_directory(kiln));
    EXPECT_EQ(DiskCache(d.path + "/explicit").dir(), d.path + "/explicit");
  }
  {
    ScopedEnv a("KILN_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", xdg.c_str()),
        c("HOME", home.c_str());
    EXPECT_EQ(DiskCache().dir(), xdg + "/kiln");
    EXPECT_TRUE(fs::is_directory(xdg + "/kiln"));
  }
  {
    ScopedEnv a("KILN_CACHE_DIR", ""), b("XDG_CACHE_HOME", "relative/ignored"),
        c("HOME", home.c_str());
    EXPECT_EQ(DiskCache().dir(), home + "/.cache/kiln");
    EXPECT_TRUE(fs::is_directory(home + "/.cache/kiln"));
  }
  EXPECT_FALSE(fs::exists("relative"));
}

TEST(DiskCache, StaleTempFilesAreSweptFreshOnesKept) {
  TempDir d;
  std::string stale = d.path + "/.tmp-0123456789abcdef.kce-99-0-deadbeef";
  std::string fresh = d.path + "/.tmp-0123456789abcdef.kce-98-0-deadbeef";
  write_file(stale, "half an entry");
  write_file(fresh, "an entry being written");
  timeval old[2] = {{std::time(nullptr) - 7200, 0}, {std::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimes(stale.c_str(), old), 0);
  DiskCache cache(d.path);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

TEST(DiskCache, TheSweepRemovesOnlyKilnsOwnTempFiles) {
  // KILN_CACHE_DIR=/tmp must not delete other programs' files that happen to start ".tmp-".
  TempDir d;
  timeval old[2] = {{std::time(nullptr) - 7200, 0}, {std::time(nullptr) - 7200, 0}};
  std::vector<std::string> theirs = {".tmp-foo",
                                     ".tmp-0123456789abcdef.kce",
                                     ".tmp-0123456789abcdef.kce-1-2-deadbee",
                                     ".tmp-0123456789abcdef.txt-1-2-deadbeef",
                                     ".tmp-probe-1-2-deadbeef.bak",
                                     ".tmp-probe-x-2-deadbeef"};
  std::vector<std::string> ours = {".tmp-0123456789abcdef.kcu-12-0-0badf00d",
                                   ".tmp-probe-7-3-12345678", ".tmp-removed-7-4-abcdef01"};
  for (const auto& names : {theirs, ours})
    for (const std::string& n : names) {
      write_file(d.path + "/" + n, "x");
      ASSERT_EQ(::utimes((d.path + "/" + n).c_str(), old), 0);
    }
  DiskCache cache(d.path);
  for (const std::string& n : theirs) EXPECT_TRUE(fs::exists(d.path + "/" + n)) << n;
  for (const std::string& n : ours) EXPECT_FALSE(fs::exists(d.path + "/" + n)) << n;
}

TEST(DiskCache, AFifoOrSymlinkAtAnEntryPathIsNeverOpened) {
  TempDir d;
  const std::string key = "fifo";
  ASSERT_EQ(::mkfifo(entry_path(d.path, key).c_str(), 0600), 0);
  // In a child with an alarm: reading a FIFO with no writer would block forever.
  auto [rc, err] = in_child(d.path, [&] {
    ::alarm(10);
    DiskCache cache(d.path);
    return cache.load(source(key), target()) ? 1 : 0;
  });
  EXPECT_EQ(rc, 0) << "load() hung or returned an entry: " << err;
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;

  // A symbolic link to a valid entry elsewhere is not followed.
  TempDir elsewhere;
  DiskCache there(elsewhere.path);
  there.store(source("link"), target(), binary("link"));
  ASSERT_EQ(
      ::symlink(entry_path(elsewhere.path, "link").c_str(), entry_path(d.path, "link").c_str()), 0);
  DiskCache here(d.path);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(here.load(source("link"), target()));
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

TEST(DiskCache, RemovingADamagedEntryNeverDeletesAFreshOne) {
  // A writer renames a fresh entry over the damaged one while it is being removed: the fresh
  // entry must survive. (Checking the inode, then unlinking the name, deleted it.)
  TempDir d;
  DiskCache cache(d.path);
  const std::string key = "race";
  cache.store(source(key), target(), binary(key, 1));
  write_file(entry_path(d.path, key), "kiln-kernel-cache 2\ntruncated");
  static DiskCache* writer;
  static const std::string* race_key;
  writer = &cache;
  race_key = &key;
  DiskCache::during_removal_for_tests = [](const std::string&) {
    writer->store(source(*race_key, 2), target(), binary(*race_key, 2));
  };
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.load(source(key), target()));
  testing::internal::GetCapturedStderr();
  DiskCache::during_removal_for_tests = nullptr;
  auto e = cache.load(source(key), target());
  ASSERT_TRUE(e) << "the fresh entry was deleted";
  EXPECT_EQ(check(*e, key), "");
  EXPECT_EQ(e->binary.image[0], 2); // writer 2's entry
  for (const std::string& n : files_in(d.path)) EXPECT_NE(n.substr(0, 5), ".tmp-") << n;
}

TEST(DiskCache, TheDirectoryIsPrivateAndASharedOneIsReported) {
  TempDir d;
  const std::string dir = d.path + "/new/cache";
  DiskCache cache(dir);
  ASSERT_TRUE(cache.enabled());
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // A directory others can write: a warning (once per process, so in a child).
  const std::string shared = d.path + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  auto [rc, err] = in_child(d.path, [&] {
    DiskCache c(shared);
    return c.enabled() ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_NE(err.find("is writable by other users"), std::string::npos) << err;
}

TEST(DiskCache, EntryFileMatchesDocumentedFormat) {
  TempDir d;
  DiskCache cache(d.path);
  const std::string key = "doc key";
  CudaKernelSource src = source(key);
  CudaBinary bin = binary(key, 1);
  cache.store(src, target(), bin);
  std::string f = read_file(entry_path(d.path, key));
  size_t hdr = f.find("\nheader ") + 1, end = f.find('\n', hdr) + 1;
  ASSERT_GT(hdr, 0u);
  EXPECT_EQ(f.substr(hdr, end - hdr), "header " + hex(fnv(f.substr(0, hdr))) + "\n");
  auto line = [&](const std::string& field, const std::string& data) {
    return field + " " + std::to_string(data.size()) + " " + hex(fnv(data)) + "\n";
  };
  std::string log = bin.log, image(bin.image.begin(), bin.image.end());
  std::string want = "kiln-kernel-cache 2\nname " + src.name + "\narch 90\nnvrtc 12080\ncodegen " +
                     std::to_string(kCodegenVersion) + "\nformat cubin\ncompile_us 13500\n";
  EXPECT_EQ(f.substr(0, want.size()), want);
  size_t created = f.find("created ");
  EXPECT_EQ(f.substr(f.find('\n', created) + 1, hdr - f.find('\n', created) - 1),
            line("key", key) + line("source", src.source) + line("log", log) +
                line("binary", image));
  EXPECT_EQ(f.substr(end), key + src.source + log + image);
}

namespace {

uint64_t bytes_in(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kce" || e.path().extension() == ".kcu") n += e.file_size();
  return n;
}

// Sets an entry's (and its use record's) modification time: its last use.
void used_at(const std::string& dir, const std::string& key, time_t when) {
  const timeval tv[2] = {{when, 0}, {when, 0}};
  for (const char* suffix : {".kce", ".kcu"})
    ::utimes((dir + "/" + base_name(key) + suffix).c_str(), tv);
}

} // namespace

TEST(DiskCache, PastTheLimitLeastRecentlyUsedEntriesGo) {
  TempDir d;
  DiskCache unlimited(d.path, 0);
  const time_t now = std::time(nullptr);
  for (int i = 0; i < 6; ++i) {
    unlimited.store(source("k" + std::to_string(i)), target(), binary("k" + std::to_string(i)));
    used_at(d.path, "k" + std::to_string(i), now - 1000 + 100 * i); // k0 oldest ... k5 newest
  }
  ASSERT_TRUE(unlimited.load(source("k1"), target())); // a hit makes k1 the most recent
  const uint64_t six = bytes_in(d.path);
  EXPECT_EQ(unlimited.max_bytes(), 0u);
  DiskCache limited(d.path, six * 2 / 3); // room for about four of the six, then a seventh
  limited.store(source("k6"), target(), binary("k6"));
  EXPECT_LE(bytes_in(d.path), six * 2 / 3 * 9 / 10 + 1);
  // Gone oldest first: k0, k2, k3 (k1 was used just now); the new entry is never evicted.
  EXPECT_FALSE(limited.load(source("k0"), target()));
  EXPECT_FALSE(limited.load(source("k2"), target()));
  for (const char* k : {"k1", "k5", "k6"}) {
    auto e = limited.load(source(k), target());
    ASSERT_TRUE(e) << k;
    EXPECT_EQ(check(*e, k), "");
  }
  for (const std::string& name : files_in(d.path)) EXPECT_NE(name[0], '.') << name;
  // The default limit: 1 GiB, or the setting.
  EXPECT_EQ(DiskCache(d.path).max_bytes(), uint64_t(1) << 30);
  ScopedEnv env("KILN_CACHE_MAX_BYTES", "12345");
  EXPECT_EQ(DiskCache(d.path).max_bytes(), 12345u);
}

// A process reading an entry (its file open) when another evicts it reads the whole entry.
TEST(DiskCache, AnEntryBeingReadSurvivesItsEviction) {
  TempDir d;
  DiskCache cache(d.path, 0);
  cache.store(source("read me"), target(), binary("read me", 3));
  const std::string path = entry_path(d.path, "read me");
  const std::string whole = read_file(path);
  std::ifstream reader(path, std::ios::binary); // opened, not yet read
  used_at(d.path, "read me", std::time(nullptr) - 5000);
  DiskCache tiny(d.path, 1);
  tiny.store(source("newer"), target(), binary("newer"));
  EXPECT_FALSE(fs::exists(path)) << "evicted";
  const std::string got{std::istreambuf_iterator<char>(reader), std::istreambuf_iterator<char>()};
  EXPECT_EQ(got, whole);
}

// Writer processes storing and loading under a limit that keeps evicting: every load returns
// an intact entry of the right key, nothing is reported, no temp file is left, and the cache
// ends within the limit.
TEST(DiskCache, EvictionUnderConcurrentWriterProcessesLosesNothingBeingRead) {
  TempDir d;
  constexpr int kChildren = 6, kIters = 60;
  const uint64_t limit = 40 * 1024;
  testing::internal::CaptureStderr();
  std::vector<pid_t> pids;
  for (int c = 0; c < kChildren; ++c) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      int bad = 0;
      DiskCache cache(d.path, limit);
      for (int it = 0; it < kIters; ++it) {
        const std::string k = "key " + std::to_string((c * 7 + it) % 25);
        cache.store(source(k, c + 1), target(), binary(k, c + 1));
        for (int j = 0; j < 3; ++j) {
          const std::string other = "key " + std::to_string((it + j * 5) % 25);
          if (auto e = cache.load(source(other), target())) bad += !check(*e, other).empty();
        }
      }
      std::_Exit(bad > 100 ? 100 : bad);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  for (const std::string& name : files_in(d.path)) EXPECT_NE(name[0], '.') << name;
  // Entries are at most ~13 KB: the last writers to evict left it within the limit, or one
  // entry over it when two stored at once.
  EXPECT_LE(bytes_in(d.path), limit + 16 * 1024);
  DiskCache cache(d.path, 0);
  for (int i = 0; i < 25; ++i)
    if (auto e = cache.load(source("key " + std::to_string(i)), target()))
      EXPECT_EQ(check(*e, "key " + std::to_string(i)), "");
}

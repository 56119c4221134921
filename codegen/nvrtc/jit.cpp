#include "codegen/jit.h"

#include "codegen/cache_files.h"
#include "codegen/nvrtc/compile_workers.h"
#include "ir/errors.h"
#include "ir/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

namespace kiln::detail {

namespace {

// KILN_CACHE_MANIFEST: one JSON line per kernel the process used (each key once), with the
// source, for `kiln-cache warm` to compile them all in parallel on another machine.
void add_to_manifest(const CudaKernelSource& src, const CudaTarget& t) {
  const std::string path = setting_text(Setting::cache_manifest).value_or("");
  if (path.empty()) return;
  static auto* mu = new std::mutex; // never destroyed: the compile thread may run at exit
  static auto* written = new std::set<std::string>; // (path, key) pairs
  {
    std::lock_guard<std::mutex> lock(*mu);
    if (!written->insert(path + '\n' + src.key).second) return;
  }
  if (std::string err = cache_files::append_line(path, manifest_line(src, t)); !err.empty()) {
    static std::once_flag once;
    std::call_once(
        once, [&] { std::fprintf(stderr, "kiln: cannot write the manifest %s\n", err.c_str()); });
  }
}

} // namespace

Jit::Jit(const CudaTarget& target, std::string cache_dir)
    : target_(target), disk_(std::move(cache_dir)) {}

JitKernel Jit::build(const FusedKernel& k, const CudaVariant& v) {
  return build(render_cuda(k, v, target_));
}

std::optional<JitKernel> Jit::from_disk(const CudaKernelSource& src) {
  std::optional<DiskCacheEntry> entry = disk_.load(src, target_);
  if (!entry) return std::nullopt;
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.disk_hits++;
  return JitKernel{src.name, std::move(entry->binary), true};
}

JitKernel Jit::build(const CudaKernelSource& src, bool fresh) {
  JitKernel out{src.name, {}};
  add_to_manifest(src, target_);
  if (!fresh)
    if (std::optional<JitKernel> k = from_disk(src)) return std::move(*k);
  // KILN_COMPILE=0: a deployment that must be warm (its cache shipped with kiln-cache export)
  // fails loudly rather than stalling on NVRTC.
  if (compile_mode() == CompileMode::off)
    fail("compile",
         "kernel {} is not in the disk cache {} and KILN_COMPILE=0 forbids compiling it; run the "
         "workload once with compiling allowed, or `kiln-cache import` a warm cache (set "
         "KILN_CACHE_MISS_LOG and run `kiln-cache why` to see how it differs from the cached "
         "kernels)",
         src.name, disk_.enabled() ? disk_.dir() : std::string("(disabled)"));
  out.binary = compile_cuda(src, target_);
  disk_.store(src, target_, out.binary);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.compiles++;
  stats_.compile_ms += out.binary.compile_ms;
  return out;
}

JitStats Jit::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

std::optional<JitKernel> Jit::cached(const CudaKernelSource& src) {
  add_to_manifest(src, target_);
  return from_disk(src);
}

std::vector<JitKernel> Jit::build_all(llvm::ArrayRef<CudaKernelSource> srcs) {
  return build_all(srcs, Round{nullptr, /*shared_workers=*/true});
}

std::vector<JitKernel> Jit::build_missing(llvm::ArrayRef<CudaKernelSource> srcs,
                                          CompileWorkers* workers, const std::atomic<bool>* cancel,
                                          void (*after_compile)()) {
  return build_all(
      srcs, Round{workers, /*shared_workers=*/false, /*missed=*/true, cancel, after_compile});
}

namespace {
bool cancelled(const std::atomic<bool>* cancel) {
  return cancel && cancel->load(std::memory_order_relaxed);
}
} // namespace

std::vector<JitKernel> Jit::build_all(llvm::ArrayRef<CudaKernelSource> srcs, const Round& round) {
  std::vector<JitKernel> out(srcs.size());
  std::vector<bool> done(srcs.size(), false), missed(srcs.size(), round.missed);
  compile_in_workers(srcs, round, out, done, missed);
  std::vector<std::exception_ptr> errors(srcs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < srcs.size();) {
      if (done[i]) continue;
      try {
        if (cancelled(round.cancel))
          fail("compile", "{}: not compiled, the builds were cancelled", srcs[i].name);
        out[i] = build(srcs[i], /*fresh=*/missed[i]); // a miss looked up (and logged) once
      } catch (...) {
        errors[i] = std::current_exception();
      }
      if (round.after_compile) round.after_compile();
    }
  };
  const size_t n = std::min<size_t>(static_cast<size_t>(compile_threads()), srcs.size());
  std::vector<std::thread> helpers;
  try {
    for (size_t t = 1; t < n; ++t) helpers.emplace_back(work);
  } catch (const std::system_error&) { // no more threads to be had: those started suffice
  }
  work(); // the calling thread compiles too
  for (std::thread& t : helpers) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

// With compile workers, the disk cache's kernels are loaded first (out[i], done[i]); the ones it
// lacks (missed[i]), when there are several, go to the workers, and each one they compiled is
// loaded from the cache. What they could not do is left to build(), which compiles it here or
// reports its error.
void Jit::compile_in_workers(llvm::ArrayRef<CudaKernelSource> srcs, const Round& round,
                             std::vector<JitKernel>& out, std::vector<bool>& done,
                             std::vector<bool>& missed) {
  CompileWorkers* workers = round.workers;
  const int processes = round.shared_workers ? compile_processes() : 0;
  if (srcs.size() < 2 || (!workers && processes < 2) || !disk_.enabled() ||
      compile_mode() == CompileMode::off)
    return;
  std::vector<size_t> missing;
  for (size_t i = 0; i < srcs.size(); ++i) {
    add_to_manifest(srcs[i], target_);
    if (std::optional<JitKernel> k = missed[i] ? std::nullopt : from_disk(srcs[i]))
      out[i] = std::move(*k), done[i] = true;
    else
      missing.push_back(i), missed[i] = true;
  }
  if (missing.size() < 2) return;
  if (!workers) workers = CompileWorkers::shared(processes, disk_.dir());
  if (!workers) return;
  std::vector<CudaKernelSource> todo;
  for (size_t i : missing) todo.push_back(srcs[i]);
  const std::vector<CompileWorkers::Result> results = workers->compile(todo, target_, round.cancel);
  for (size_t m = 0; m < missing.size(); ++m) {
    if (!results[m].ok) continue;
    const size_t i = missing[m];
    std::optional<DiskCacheEntry> entry = disk_.load(srcs[i], target_);
    if (!entry) continue;
    // "ok 0": the worker found it cached (another process compiled it): a disk hit, which is
    // rebuilt if the driver rejects it
    const bool cached = results[m].compile_ms == 0;
    out[i] = JitKernel{srcs[i].name, std::move(entry->binary), cached};
    done[i] = true;
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (cached) {
      stats_.disk_hits++;
      continue;
    }
    stats_.compiles++;
    stats_.worker_compiles++;
    stats_.compile_ms += results[m].compile_ms;
  }
}

// Asked at every kernel launch that is not a graph replay: the variable is parsed again only
// when its text changed (tests switch it at run time).
CompileMode compile_mode() {
  static auto* mu = new std::mutex; // never destroyed: the compile thread may ask at exit
  static auto* seen = new std::string("\x01"); // never a value: parsed on the first call
  static CompileMode mode = CompileMode::background;
  const char* v = std::getenv("KILN_COMPILE");
  std::lock_guard<std::mutex> lock(*mu);
  if (*seen != (v ? v : "")) {
    *seen = v ? v : "";
    std::string m = *seen; // in any case, as the flag this setting was is read
    std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
    static const char* const known[] = {"background", "sync", "standin", "1",   "0", "on",
                                        "off",        "true", "false",   "yes", "no"};
    if (std::none_of(std::begin(known), std::end(known), [&](const char* k) { return m == k; })) {
      if (!m.empty()) (void)setting_text(Setting::compile); // says on stderr what it accepts
      m = "background";
    }
    const bool no = m == "0" || m == "off" || m == "false" || m == "no";
    mode = m == "sync"      ? CompileMode::sync
           : m == "standin" ? CompileMode::standin
           : no             ? CompileMode::off
                            : CompileMode::background; // "background", "1", "on", ...
  }
  return mode;
}

int compile_threads() {
  return static_cast<int>(setting_int(Setting::compile_threads).value_or(1));
}

} // namespace kiln::detail

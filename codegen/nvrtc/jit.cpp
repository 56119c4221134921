#include "codegen/jit.h"

#include "codegen/cache_files.h"
#include "ir/errors.h"
#include "ir/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
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
  static std::mutex mu;
  static std::set<std::string> written; // (path, key) pairs
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!written.insert(path + '\n' + src.key).second) return;
  }
  const std::string line = fmt::format(
      "{{\"name\":{},\"arch\":{},\"nvrtc\":{},\"codegen\":{},\"key\":{},\"source\":{}}}\n",
      cache_files::json_quote(src.name), t.arch, t.nvrtc_version, kCodegenVersion,
      cache_files::json_quote(src.key), cache_files::json_quote(src.source));
  if (std::string err = cache_files::append_line(path, line); !err.empty()) {
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

JitKernel Jit::build(const CudaKernelSource& src, bool fresh) {
  JitKernel out{src.name, {}};
  add_to_manifest(src, target_);
  if (auto entry = fresh ? std::nullopt : disk_.load(src, target_)) {
    out.binary = std::move(entry->binary);
    out.from_disk = true;
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.disk_hits++;
    return out;
  }
  // KILN_COMPILE=0: a deployment that must be warm (its cache shipped with kiln-cache export)
  // fails loudly rather than stalling on NVRTC.
  if (!setting_flag(Setting::compile).value_or(true))
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

std::vector<JitKernel> Jit::build_all(llvm::ArrayRef<CudaKernelSource> srcs) {
  std::vector<JitKernel> out(srcs.size());
  std::vector<std::exception_ptr> errors(srcs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < srcs.size();) {
      try {
        out[i] = build(srcs[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
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

int compile_threads() {
  return static_cast<int>(setting_int(Setting::compile_threads).value_or(1));
}

} // namespace kiln::detail

#include "codegen/jit.h"

#include "ir/errors.h"
#include "ir/settings.h"

namespace kiln::detail {

Jit::Jit(const CudaTarget& target, std::string cache_dir)
    : target_(target), disk_(std::move(cache_dir)) {}

JitKernel Jit::build(const FusedKernel& k, const CudaVariant& v) {
  return build(render_cuda(k, v, target_));
}

JitKernel Jit::build(const CudaKernelSource& src) {
  JitKernel out{src.name, {}};
  if (auto entry = disk_.load(src, target_)) {
    out.binary = std::move(entry->binary);
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
  stats_.compiles++;
  stats_.compile_ms += out.binary.compile_ms;
  disk_.store(src, target_, out.binary);
  return out;
}

} // namespace kiln::detail

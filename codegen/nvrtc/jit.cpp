#include "codegen/jit.h"

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
  out.binary = compile_cuda(src, target_);
  stats_.compiles++;
  stats_.compile_ms += out.binary.compile_ms;
  disk_.store(src, target_, out.binary);
  return out;
}

} // namespace kiln::detail

#include "runtime/cuda/kernel_cache.h"

#include "ir/kernel_key.h"
#include "runtime/cuda/cuda_check.h"

#include <llvm/ADT/SmallString.h>

#include <chrono>
#include <vector>

namespace kiln::detail {

namespace {

std::vector<const CudaKernelCache*>& caches() {
  static auto* c = new std::vector<const CudaKernelCache*>;
  return *c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

KernelCacheStats cuda_kernel_cache_stats() {
  KernelCacheStats s;
  for (const CudaKernelCache* c : caches()) {
    const KernelCacheStats cs = c->stats();
    s.memory_hits += cs.memory_hits;
    s.disk_hits += cs.disk_hits;
    s.compiles += cs.compiles;
    s.compile_ms += cs.compile_ms;
    s.load_ms += cs.load_ms;
  }
  return s;
}

namespace {

CudaTarget target_of(int device) {
  CudaTarget t;
  int major = 0, minor = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cuda",
             "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cuda",
             "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&t.sm_count, cudaDevAttrMultiProcessorCount, device), "cuda",
             "cudaDeviceGetAttribute");
  t.arch = major * 10 + minor;
  t.nvrtc_version = nvrtc_version();
  return t;
}

} // namespace

CudaKernelCache::CudaKernelCache(int device) : device_(device), jit_(target_of(device)) {
  caches().push_back(this);
}

KernelCacheStats CudaKernelCache::stats() const {
  KernelCacheStats s = stats_;
  const JitStats j = jit_.stats();
  s.disk_hits = j.disk_hits;
  s.compiles = j.compiles;
  s.compile_ms = j.compile_ms;
  return s;
}

namespace {
// The in-memory key: the structural signature plus the variant (the target is fixed per
// device). Building it costs tens of nanoseconds, far less than the text key.
void memory_key(const FusedKernel& k, const CudaVariant& v, llvm::SmallString<256>& key) {
  kernel_signature(k, key);
  append_variant(k, v, key);
}
} // namespace

const CudaKernelCache* cuda_kernel_cache(int device) {
  for (const CudaKernelCache* c : caches())
    if (c->device() == device) return c;
  return nullptr;
}

cudaKernel_t CudaKernelCache::find(const FusedKernel& k, const CudaVariant& v) const {
  llvm::SmallString<256> key;
  memory_key(k, v, key);
  auto it = loaded_.find(key);
  return it == loaded_.end() ? nullptr : it->second;
}

cudaKernel_t CudaKernelCache::get(const FusedKernel& k, const CudaVariant& v) {
  llvm::SmallString<256> key;
  memory_key(k, v, key);
  auto it = loaded_.find(key);
  if (it != loaded_.end()) {
    stats_.memory_hits++;
    return it->second;
  }
  cudaKernel_t kernel = load(render_cuda(k, v, target()));
  loaded_[key] = kernel;
  return kernel;
}

void CudaKernelCache::prefetch(llvm::ArrayRef<std::pair<const FusedKernel*, CudaVariant>> kernels,
                               llvm::ArrayRef<const IndexStep*> index_steps) {
  struct Missing {
    CudaKernelSource src;
    std::string key;
    bool index = false; // a key of index_kernels_, else of loaded_
  };
  std::vector<Missing> missing;
  llvm::StringMap<bool> listed; // a plan often runs one kernel many times
  llvm::SmallString<256> key;
  for (const auto& [k, v] : kernels) {
    key.clear();
    memory_key(*k, v, key);
    if (!loaded_.count(key) && listed.insert({key, true}).second)
      missing.push_back({render_cuda(*k, v, target()), std::string(key), false});
  }
  for (const IndexStep* s : index_steps) {
    std::string id = index_kernel_id(*s);
    if (!index_kernels_.count(id) && listed.insert({id, true}).second)
      missing.push_back({render_index_cuda(*s, target()), std::move(id), true});
  }
  if (missing.size() < 2) return; // nothing to overlap: get() builds it when asked
  std::vector<CudaKernelSource> srcs;
  for (const Missing& m : missing) srcs.push_back(m.src);
  std::vector<JitKernel> built = jit_.build_all(srcs);
  for (size_t i = 0; i < missing.size(); ++i) {
    cudaKernel_t kernel = load(missing[i].src, std::move(built[i]));
    (missing[i].index ? index_kernels_ : loaded_)[missing[i].key] = kernel;
  }
}

// A binary from the disk cache that the driver rejects (written by a broken toolchain, damaged
// in a way its checksums cannot see) is compiled again and its entry replaced: the cache heals
// itself and the step goes on. A binary compiled just now that the driver rejects is an error.
cudaKernel_t CudaKernelCache::load(const CudaKernelSource& src) {
  return load(src, jit_.build(src));
}

cudaKernel_t CudaKernelCache::load(const CudaKernelSource& src, JitKernel built) {
  std::string why;
  if (cudaKernel_t kernel = try_load(built, why)) return kernel;
  if (!built.from_disk) fail("eval", "the driver rejected kernel {}: {}", built.name, why);
  std::fprintf(stderr,
               "kiln: the driver rejected kernel %s from the disk cache (%s); compiled "
               "again and its entry replaced\n",
               built.name.c_str(), why.c_str());
  built = jit_.build(src, /*fresh=*/true);
  if (cudaKernel_t kernel = try_load(built, why)) return kernel;
  fail("eval", "the driver rejected kernel {}: {}", built.name, why);
}

cudaKernel_t CudaKernelCache::try_load(const JitKernel& built, std::string& why) {
  auto t0 = std::chrono::steady_clock::now();
  cudaLibrary_t lib = nullptr;
  cudaKernel_t kernel = nullptr;
  cudaError_t e = cudaLibraryLoadData(&lib, built.binary.image.data(), nullptr, nullptr, 0, nullptr,
                                      nullptr, 0);
  if (e == cudaSuccess) {
    e = cudaLibraryGetKernel(&kernel, lib, built.name.c_str());
    if (e != cudaSuccess) (void)cudaLibraryUnload(lib);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // not sticky: the context stays usable
    why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return nullptr;
  }
  stats_.load_ms += ms_since(t0);
  return kernel;
}

cudaKernel_t CudaKernelCache::get_index(const IndexStep& s) {
  cudaKernel_t& kernel = index_kernels_[index_kernel_id(s)];
  if (kernel)
    stats_.memory_hits++;
  else
    kernel = load(render_index_cuda(s, target()));
  return kernel;
}

void CudaKernelCache::launch_index(const IndexStep& s, llvm::ArrayRef<void*> slot_base,
                                   IndexError* err, cudaStream_t stream) {
  CudaLaunch l = index_launch(s, target());
  if (l.grid == 0) return; // nothing to do (no element, or no fiber)
  cudaKernel_t kernel = get_index(s);
  std::vector<std::byte> params = pack_index_params(s, slot_base, err);
  void* args[] = {params.data()};
  cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid_dims(l), dim3(l.block),
                              args, 0, stream),
             s.name(), "cudaLaunchKernel");
}

void CudaKernelCache::launch(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                             cudaStream_t stream) {
  CudaVariant v = choose_variant(k, slot_base, target());
  CudaLaunch l = launch_for(k, v, target());
  if (l.grid == 0) return; // nothing to do (empty iteration space)
  cudaKernel_t kernel = get(k, v);
  std::vector<std::byte> params = pack_params(k, v, slot_base);
  void* args[] = {params.data()};
  cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid_dims(l), dim3(l.block),
                              args, l.shared_bytes, stream),
             "eval", "cudaLaunchKernel");
}

} // namespace kiln::detail

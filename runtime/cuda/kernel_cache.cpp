#include "runtime/cuda/kernel_cache.h"

#include "codegen/kernel_key.h"
#include "codegen/nvrtc_compiler.h"
#include "runtime/cuda/cuda_check.h"

#include <llvm/ADT/SmallString.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>
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
    s.memory_hits += c->stats().memory_hits;
    s.disk_hits += c->stats().disk_hits;
    s.compiles += c->stats().compiles;
    s.compile_ms += c->stats().compile_ms;
    s.load_ms += c->stats().load_ms;
  }
  return s;
}

CudaKernelCache::CudaKernelCache(int device) : device_(device) {
  int major = 0, minor = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cuda",
             "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cuda",
             "cudaDeviceGetAttribute");
  cuda_check(cudaDeviceGetAttribute(&target_.sm_count, cudaDevAttrMultiProcessorCount, device),
             "cuda", "cudaDeviceGetAttribute");
  target_.arch = major * 10 + minor;
  target_.nvrtc_version = nvrtc_version();
  caches().push_back(this);
}

namespace {
// The in-memory key: the structural signature plus the variant (the target is fixed per
// device). Building it costs tens of nanoseconds, far less than the text key.
void memory_key(const FusedKernel& k, const CudaVariant& v, llvm::SmallString<256>& key) {
  kernel_signature(k, key);
  append_variant(v, key);
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
  return get_many({Request{&k, v}})[0];
}

namespace {

int compile_threads() {
  static const int n = [] {
    const char* v = std::getenv("KILN_COMPILE_THREADS");
    int x = v && *v ? std::atoi(v) : 0;
    if (x <= 0) x = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, x);
  }();
  return n;
}

// Compile the sources at `todo` (indices into srcs) on up to compile_threads() threads. NVRTC
// compiles distinct programs concurrently. The first failure (in request order) is rethrown
// once every thread has finished.
void compile_all(const std::vector<CudaKernelSource>& srcs, const std::vector<size_t>& todo,
                 const CudaTarget& target, std::vector<CudaBinary>& out) {
  std::vector<std::exception_ptr> errors(todo.size());
  auto one = [&](size_t i) {
    try {
      out[todo[i]] = compile_cuda(srcs[todo[i]], target);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  const size_t nthreads = std::min<size_t>(todo.size(), compile_threads());
  if (nthreads <= 1) {
    for (size_t i = 0; i < todo.size(); ++i) one(i);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t t = 0; t < nthreads; ++t)
      pool.emplace_back([&] {
        for (size_t i = next++; i < todo.size(); i = next++) one(i);
      });
    for (std::thread& t : pool) t.join();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

} // namespace

std::vector<cudaKernel_t> CudaKernelCache::get_many(llvm::ArrayRef<Request> requests) {
  std::vector<cudaKernel_t> found(requests.size(), nullptr);
  std::vector<llvm::SmallString<256>> keys(requests.size());
  // Requests not in memory, each key once: render, then the disk cache, then NVRTC.
  std::vector<size_t> missing;
  llvm::StringMap<size_t> first_missing;
  for (size_t i = 0; i < requests.size(); ++i) {
    memory_key(*requests[i].kernel, requests[i].variant, keys[i]);
    auto it = loaded_.find(keys[i]);
    if (it != loaded_.end()) {
      stats_.memory_hits++;
      found[i] = it->second;
    } else if (first_missing.try_emplace(keys[i], i).second) {
      missing.push_back(i);
    }
  }
  if (missing.empty()) return found;
  std::vector<CudaKernelSource> srcs;
  std::vector<CudaBinary> bins(missing.size());
  std::vector<size_t> todo;
  for (size_t m = 0; m < missing.size(); ++m) {
    const Request& r = requests[missing[m]];
    srcs.push_back(render_cuda(*r.kernel, r.variant, target_));
    if (auto entry = disk_.load(srcs[m], target_)) {
      bins[m] = std::move(entry->binary);
      stats_.disk_hits++;
    } else {
      todo.push_back(m);
    }
  }
  compile_all(srcs, todo, target_, bins);
  for (size_t m : todo) {
    stats_.compiles++;
    stats_.compile_ms += bins[m].compile_ms;
    disk_.store(srcs[m], target_, bins[m]);
  }
  for (size_t m = 0; m < missing.size(); ++m) {
    auto t0 = std::chrono::steady_clock::now();
    cudaLibrary_t lib = nullptr;
    cuda_check(
        cudaLibraryLoadData(&lib, bins[m].image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "eval", "cudaLibraryLoadData");
    cudaKernel_t kernel = nullptr;
    cuda_check(cudaLibraryGetKernel(&kernel, lib, srcs[m].name.c_str()), "eval",
               "cudaLibraryGetKernel");
    stats_.load_ms += ms_since(t0);
    loaded_[keys[missing[m]]] = kernel;
  }
  for (size_t i = 0; i < requests.size(); ++i)
    if (!found[i]) found[i] = loaded_.find(keys[i])->second;
  return found;
}

void CudaKernelCache::launch(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                             cudaStream_t stream) {
  CudaVariant v = choose_variant(k, slot_base);
  CudaLaunch l = launch_for(k, v, target_);
  if (l.grid == 0) return; // nothing to do (empty iteration space)
  cudaKernel_t kernel = get(k, v);
  std::vector<std::byte> params = pack_params(k, v, slot_base);
  void* args[] = {params.data()};
  cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(l.grid), dim3(l.block),
                              args, l.shared_bytes, stream),
             "eval", "cudaLaunchKernel");
}

} // namespace kiln::detail

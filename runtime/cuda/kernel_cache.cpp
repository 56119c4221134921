#include "runtime/cuda/kernel_cache.h"

#include "ir/kernel_key.h"
#include "runtime/cuda/cuda_check.h"

#include <fmt/format.h>
#include <llvm/ADT/SmallString.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace kiln::detail {

namespace {

std::vector<CudaKernelCache*>& caches() {
  static auto* c = new std::vector<CudaKernelCache*>;
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
    s.background_builds += cs.background_builds;
    s.standin_launches += cs.standin_launches;
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

int64_t cuda_background_builds_outstanding() {
  int64_t n = 0;
  for (CudaKernelCache* c : caches()) n += c->background_outstanding();
  return n;
}

void cuda_finish_background_builds() {
  for (CudaKernelCache* c : caches()) c->finish_background_builds();
}

std::string cuda_standin_unavailable_reason(int device) {
  for (CudaKernelCache* c : caches())
    if (c->device() == device) return c->standin_available() ? "" : c->standin_why();
  return "no CUDA backend for this device";
}

cudaKernel_t CudaKernelCache::find(const FusedKernel& k, const CudaVariant& v) const {
  llvm::SmallString<256> key;
  memory_key(k, v, key);
  auto it = loaded_.find(key);
  if (it != loaded_.end()) return it->second;
  if (auto f = failed_.find(key); f != failed_.end()) throw Error(f->second);
  return nullptr;
}

void launch_kernel(cudaKernel_t fn, const CudaLaunch& shape, void** args, cudaStream_t stream) {
  if (shape.cluster <= 1) {
    cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(fn), grid_dims(shape),
                                dim3(shape.block), args, shape.shared_bytes, stream),
               "eval", "cudaLaunchKernel");
    return;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid_dims(shape);
  config.blockDim = dim3(shape.block);
  config.dynamicSmemBytes = shape.shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute cluster[1];
  cluster[0].id = cudaLaunchAttributeClusterDimension;
  cluster[0].val.clusterDim.x = shape.cluster;
  cluster[0].val.clusterDim.y = 1;
  cluster[0].val.clusterDim.z = 1;
  config.attrs = cluster;
  config.numAttrs = 1;
  cuda_check(cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(fn), args), "eval",
             "cudaLaunchKernelEx (a cluster)");
}

// The interpreter's fatbin is loaded once; it serves only where NVRTC is the toolkit version
// that built it (the same math library, so the same bits) and the fatbin has this GPU's arch.
cudaKernel_t CudaKernelCache::standin_kernel(bool large) {
  if (!standin_tried_) {
    standin_tried_ = true;
    const std::span<const std::byte> fatbin = standin_fatbin();
    if (fatbin.empty()) {
      standin_why_ = "libkiln was built without the interpreter";
    } else if (standin_cuda_version() != target().nvrtc_version) {
      standin_why_ = fmt::format("the interpreter was built by CUDA {} and NVRTC is {}: their "
                                 "math could round differently",
                                 standin_cuda_version(), target().nvrtc_version);
    } else if (!nvrtc_makes_cubin(target().arch)) {
      standin_why_ = fmt::format("NVRTC compiles sm_{} to PTX, which the driver's compiler "
                                 "finishes: not the compiler that built the interpreter",
                                 target().arch);
    } else {
      std::vector<uint64_t> aligned((fatbin.size() + 7) / 8);
      std::memcpy(aligned.data(), fatbin.data(), fatbin.size());
      cudaError_t e = cudaLibraryLoadData(&standin_lib_, aligned.data(), nullptr, nullptr, 0,
                                          nullptr, nullptr, 0);
      for (int i = 0; i < 2 && e == cudaSuccess; ++i)
        e = cudaLibraryGetKernel(&standin_fns_[i], standin_lib_, standin_entry(i == 1));
      if (e != cudaSuccess) { // no binary for this GPU: kernels compile before they run
        (void)cudaGetLastError();
        standin_fns_[0] = standin_fns_[1] = nullptr;
        standin_why_ = fmt::format("the driver does not load it for sm_{}: {}", target().arch,
                                   cudaGetErrorString(e));
      }
    }
  }
  return standin_fns_[large ? 1 : 0];
}

// Whether the stand-in may serve: the mode asks for it and its fatbin has not failed to load
// (it is loaded when a kernel first needs it, so a warm disk cache never pays for it).
bool CudaKernelCache::stands_in() const {
  const CompileMode mode = compile_mode();
  return (mode == CompileMode::background || mode == CompileMode::standin) &&
         (!standin_tried_ || standin_fns_[0] != nullptr);
}

// A kernel the stand-in covers (`standin`) and memory does not have: loaded from the disk cache
// when it is there (loading beats interpreting), else queued for the background thread (into
// `jobs`) if the interpreter runs here, else compiled now.
CudaKernelCache::Start CudaKernelCache::start_background(llvm::StringRef key, const FusedKernel& k,
                                                         const CudaVariant& v,
                                                         const StandinLaunch& standin,
                                                         std::vector<BackgroundBuilds::Job>& jobs) {
  CudaKernelSource src = render_cuda(k, v, target());
  src.standin = "covered";
  if (std::optional<JitKernel> disk = jit_.cached(src)) {
    loaded_[key] = load(src, std::move(*disk));
    return Start::loaded;
  }
  if (!standin_kernel(standin.large)) return Start::unavailable;
  pending_[key] = true;
  stats_.background_builds++;
  jobs.push_back({std::string(key), std::move(src)});
  return Start::pending;
}

KernelChoice CudaKernelCache::choose(const FusedKernel& k, const CudaVariant& v) {
  const CompileMode mode = compile_mode();
  if (mode == CompileMode::standin && stands_in()) // even where a binary is loaded
    if (std::optional<StandinLaunch> standin = plan_standin(k, v, target()))
      if (cudaKernel_t fn = standin_kernel(standin->large)) return {fn, std::move(standin)};
  llvm::SmallString<256> key;
  memory_key(k, v, key);
  if (!pending_.empty()) collect_background_builds();
  if (auto it = loaded_.find(key); it != loaded_.end()) {
    stats_.memory_hits++;
    return {it->second, std::nullopt};
  }
  if (auto f = failed_.find(key); f != failed_.end()) throw Error(f->second);
  const bool pending = pending_.count(key) > 0;
  std::string not_covered; // why the stand-in cannot run it, for the miss log
  if (pending || (mode == CompileMode::background && stands_in())) {
    if (std::optional<StandinLaunch> standin = plan_standin(k, v, target(), &not_covered)) {
      std::vector<BackgroundBuilds::Job> jobs;
      const Start start = pending ? Start::pending : start_background(key, k, v, *standin, jobs);
      submit_background(std::move(jobs));
      if (auto f = failed_.find(key); f != failed_.end()) throw Error(f->second);
      if (start == Start::loaded) return {loaded_[key], std::nullopt};
      if (start == Start::pending) return {standin_kernel(standin->large), std::move(standin)};
    }
  }
  CudaKernelSource src = render_cuda(k, v, target());
  src.standin = std::move(not_covered);
  cudaKernel_t kernel = load(src);
  loaded_[key] = kernel;
  return {kernel, std::nullopt};
}

// Each finished build on its own: a binary the driver rejects (and that does not compile again)
// fails its kernel only, reported where the kernel next runs.
void CudaKernelCache::collect_background_builds() {
  for (BackgroundBuilds::Finished& f : background_.take_finished()) {
    pending_.erase(f.key);
    if (!f.error.empty()) {
      failed_[f.key] = f.error;
      continue;
    }
    if (loaded_.count(f.key)) continue;
    try {
      loaded_[f.key] = load(f.src, std::move(f.built));
    } catch (const std::exception& e) {
      failed_[f.key] = e.what();
    }
  }
}

// Jobs that cannot be queued (no thread to be had) fail their kernels, reported where each
// next runs, rather than stay pending. Never throws (prefetch calls it while unwinding).
void CudaKernelCache::submit_background(std::vector<BackgroundBuilds::Job> jobs) noexcept {
  if (jobs.empty()) return;
  std::vector<std::string> keys;
  try {
    for (const BackgroundBuilds::Job& j : jobs) keys.push_back(j.key);
    background_.submit(std::move(jobs));
  } catch (const std::exception& e) {
    for (const std::string& key : keys) {
      pending_.erase(key);
      failed_[key] = std::string("[compile] could not queue the kernel's compile: ") + e.what();
    }
  } catch (...) {
    for (const std::string& key : keys) pending_.erase(key);
  }
}

namespace {

// Whether a kernel compiled with its cluster's dimensions can run here: a cluster's blocks
// must all fit on the multiprocessors of one GPC at once. Above 8 blocks (not portable) the
// kernel must allow it first.
bool cluster_launchable(cudaKernel_t fn, const CudaLaunch& shape) {
  const unsigned blocks = shape.grid * shape.grid_y * shape.grid_z;
  if (blocks <= 1) return true;
  if (blocks > 8 &&
      cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                           cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid_dims(shape);
  config.blockDim = dim3(shape.block);
  config.dynamicSmemBytes = shape.shared_bytes;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(fn), &config) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return clusters > 0;
}

} // namespace

cudaKernel_t CudaKernelCache::repeat(const FusedKernel& k, const CudaRepeat& r, int count,
                                     bool& waiting) {
  waiting = false;
  const CompileMode mode = compile_mode();
  if (mode == CompileMode::standin) return nullptr; // the members' stand-ins, for A/B
  // The signature leaves sizes out, but the merged kernel's source holds its grid (the
  // cluster's dimensions): kernels of one structure over other sizes need kernels of their own.
  llvm::SmallString<256> key;
  memory_key(k, r.variant, key);
  key += "\x01repeat";
  const uint32_t words[4] = {static_cast<uint32_t>(count), r.shape.grid, r.shape.grid_y,
                             r.shape.grid_z};
  const char* c = reinterpret_cast<const char*>(words);
  key.append(c, c + sizeof words);
  // A cluster that cannot be launched here is not merged; an empty failure says so.
  auto usable = [&](cudaKernel_t fn) -> cudaKernel_t {
    if (cluster_launchable(fn, r.shape)) return fn;
    loaded_.erase(key);
    failed_[key] = "";
    return nullptr;
  };
  if (!pending_.empty()) collect_background_builds();
  if (auto it = loaded_.find(key); it != loaded_.end()) return usable(it->second);
  if (pending_.count(key)) return waiting = true, nullptr;
  if (auto f = failed_.find(key); f != failed_.end()) {
    // A failed compile is a bug rather than the user's error (the same body compiles alone):
    // said once, and the steps go on one launch each.
    static bool said = false;
    if (!said && !f->second.empty())
      std::fprintf(stderr,
                   "kiln: a merged launch's kernel failed (%s); its launches run one "
                   "by one\n",
                   f->second.c_str());
    said |= !f->second.empty();
    return nullptr;
  }
  CudaKernelSource src = render_cuda_repeat(k, r, target(), count);
  try {
    if (std::optional<JitKernel> disk = jit_.cached(src))
      return usable(loaded_[key] = load(src, std::move(*disk)));
    if (mode == CompileMode::sync) return usable(loaded_[key] = load(src));
  } catch (const std::exception& e) {
    failed_[key] = e.what();
    return repeat(k, r, count, waiting); // says so
  }
  if (mode != CompileMode::background) return nullptr;
  pending_[key] = true;
  stats_.background_builds++;
  std::vector<BackgroundBuilds::Job> jobs;
  jobs.push_back({std::string(key), std::move(src)});
  submit_background(std::move(jobs));
  waiting = pending_.count(key) > 0; // (not queued: failed)
  return nullptr;
}

bool CudaKernelCache::pending(const FusedKernel& k, const CudaVariant& v) const {
  llvm::SmallString<256> key;
  memory_key(k, v, key);
  return pending_.count(key) > 0;
}

void CudaKernelCache::finish_background_builds() {
  background_.wait_idle();
  collect_background_builds();
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

// Kernels the stand-in covers go to the background thread together (its compile workers take
// them in parallel); the others are built here, several at once.
void CudaKernelCache::prefetch(llvm::ArrayRef<std::pair<const FusedKernel*, CudaVariant>> kernels,
                               llvm::ArrayRef<const IndexStep*> index_steps) {
  struct Missing {
    CudaKernelSource src;
    std::string key;
    bool index = false; // a key of index_kernels_, else of loaded_
  };
  std::vector<Missing> missing;
  std::vector<BackgroundBuilds::Job> background;
  // Queued however this ends (the keys are pending), after the compiles below: the first run
  // waits for those, which then have the CPUs to themselves.
  struct Submit {
    CudaKernelCache& cache;
    std::vector<BackgroundBuilds::Job>& jobs;
    ~Submit() { cache.submit_background(std::move(jobs)); }
  } submit{*this, background};
  llvm::StringMap<bool> listed; // a plan often runs one kernel many times
  llvm::SmallString<256> key;
  const CompileMode mode = compile_mode();
  const bool standins = stands_in();
  for (const auto& [k, v] : kernels) {
    key.clear();
    memory_key(*k, v, key);
    if (loaded_.count(key) || pending_.count(key) || failed_.count(key) ||
        !listed.insert({key, true}).second)
      continue; // (a failed one throws its error when the batch chooses it)
    std::string not_covered;
    if (standins)
      if (std::optional<StandinLaunch> standin = plan_standin(*k, v, target(), &not_covered)) {
        if (mode == CompileMode::standin) continue; // interpreted, never compiled
        if (start_background(key, *k, v, *standin, background) != Start::unavailable) continue;
      }
    CudaKernelSource src = render_cuda(*k, v, target());
    src.standin = std::move(not_covered);
    missing.push_back({std::move(src), std::string(key), false});
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
  KernelChoice c = choose(k, v);
  if (c.standin) {
    c.standin->params.patch(slot_base);
    void* args[] = {c.standin->params.bytes.data()};
    launch_kernel(c.fn, c.standin->shape, args, stream);
    stats_.standin_launches++;
    return;
  }
  std::vector<std::byte> params = pack_params(k, v, slot_base);
  void* args[] = {params.data()};
  launch_kernel(c.fn, l, args, stream);
}

} // namespace kiln::detail

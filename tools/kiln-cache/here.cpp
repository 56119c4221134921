// Loads libcuda and libnvrtc with dlopen rather than linking them: kiln-cache must start on a
// machine without a GPU or the CUDA toolkit, where it still lists and prunes caches.
#include "here.h"

#include "codegen/codegen_version.h"

#include <dlfcn.h>

namespace kiln_cache {

namespace {

void* open_first(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

std::optional<int> nvrtc_version() {
  void* h = open_first({"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"});
  if (!h) return std::nullopt;
  using Fn = int (*)(int*, int*);
  auto fn = reinterpret_cast<Fn>(::dlsym(h, "nvrtcVersion"));
  int major = 0, minor = 0;
  if (!fn || fn(&major, &minor) != 0) return std::nullopt;
  return major * 1000 + minor * 10;
}

std::optional<int> gpu_arch() {
  void* h = open_first({"libcuda.so.1", "libcuda.so"});
  if (!h) return std::nullopt;
  using Init = int (*)(unsigned);
  using Get = int (*)(int*, int, int);
  auto init = reinterpret_cast<Init>(::dlsym(h, "cuInit"));
  auto get = reinterpret_cast<Get>(::dlsym(h, "cuDeviceGetAttribute"));
  constexpr int kMajor = 75, kMinor = 76; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR
  int major = 0, minor = 0;
  if (!init || !get || init(0) != 0 || get(&major, kMajor, 0) != 0 || get(&minor, kMinor, 0) != 0)
    return std::nullopt;
  return major * 10 + minor;
}

} // namespace

Here detect_here(std::optional<int> arch, std::optional<int> nvrtc) {
  Here h;
  h.arch = arch ? arch : gpu_arch();
  h.nvrtc = nvrtc ? nvrtc : nvrtc_version();
  h.codegen = kiln::detail::kCodegenVersion;
  return h;
}

} // namespace kiln_cache

#pragma once
// Loading a shared library at run time (dlopen), for the CUDA libraries kiln uses only on a
// GPU (NVRTC, cuBLAS): libkiln does not link them, so it starts on machines without them.
#include <mutex>
#include <string>
#include <vector>

namespace kiln::detail {

/// The first of `candidates` (names the loader searches for, or paths) that loads, or null;
/// `error` then says what each attempt gave (dlerror()).
void* open_shared_library(const std::vector<std::string>& candidates, std::string& error);
/// Where to look for a CUDA library `soname` (libnvrtc.so.13): $KILN_CUDA_LIBRARY_PATH/soname
/// alone when that is set, else the loader's search (LD_LIBRARY_PATH, ldconfig) and then
/// `toolkit_dir`/soname.
std::vector<std::string> cuda_library_candidates(const std::string& soname,
                                                 const std::string& toolkit_dir);
void close_shared_library(void* library);
/// The address of `symbol` in `library`, or null.
void* library_symbol(void* library, const char* symbol);

/// A library's function table as `Load` returns it: the functions, or why they are missing.
template <class Api> struct LoadedApi {
  Api api;
  std::string error;
};

/// The table `Load` fills, loaded on the first call that succeeds; until then each call tries
/// again (a library path may have been set meanwhile) and returns null with the reason in
/// `error`. Once loaded the table never changes, so callers read it without the lock.
template <class Api, LoadedApi<Api> (*Load)()> const Api* lazy_api(std::string* error) {
  static std::mutex mu;
  static LoadedApi<Api> l;
  static bool ok = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!ok) {
    l = Load();
    ok = l.error.empty();
  }
  if (!ok && error) *error = l.error;
  return ok ? &l.api : nullptr;
}

} // namespace kiln::detail

#pragma once
// Loading a shared library at run time (dlopen), for the CUDA libraries kiln uses only on a
// GPU (NVRTC, cuBLAS): libkiln does not link them, so it starts on machines without them.
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

} // namespace kiln::detail

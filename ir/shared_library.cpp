#include "ir/shared_library.h"
#include "ir/settings.h"

#include <dlfcn.h>

namespace kiln::detail {

void* open_shared_library(const std::vector<std::string>& candidates, std::string& error) {
  error.clear();
  for (const std::string& name : candidates) {
    // RTLD_LOCAL: the library's symbols stay out of the global namespace (no clash with a
    // user's own copy of the same library).
    if (void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* why = ::dlerror();
    error += (error.empty() ? "" : "; ") + std::string(why ? why : name + ": not loadable");
  }
  return nullptr;
}

std::vector<std::string> cuda_library_candidates(const std::string& soname,
                                                 const std::string& toolkit_dir) {
  if (auto dir = setting_text(Setting::cuda_library_path)) return {*dir + "/" + soname};
  return {soname, toolkit_dir + "/" + soname};
}

void close_shared_library(void* library) {
  if (library) ::dlclose(library);
}

void* library_symbol(void* library, const char* symbol) {
  return ::dlsym(library, symbol);
}

} // namespace kiln::detail

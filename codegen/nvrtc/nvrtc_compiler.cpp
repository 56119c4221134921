// NVRTC: CUDA source -> cubin (or PTX for an arch this NVRTC does not know). No driver calls,
// so this runs (and is tested) on machines without a GPU.
#include "codegen/nvrtc_compiler.h"

#include "ir/errors.h"

#include "codegen/nvrtc/nvrtc_api.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#ifndef KILN_CUDA_INCLUDE_DIR
#define KILN_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace kiln::detail {

namespace {

namespace fs = std::filesystem;

// The toolkit's include dir (cuda_fp16.h, cuda_bf16.h): $CUDA_HOME or $CUDA_PATH when set and
// present, else the dir of the toolkit kiln was built against, else /usr/local/cuda/include.
const std::string& cuda_include_dir() {
  static const std::string& dir = *new std::string([] { // never destroyed: see supported_archs
    std::error_code ec;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      const char* v = std::getenv(var);
      if (v && *v && fs::exists(fs::path(v) / "include" / "cuda_fp16.h", ec))
        return (fs::path(v) / "include").string();
    }
    if (fs::exists(fs::path(KILN_CUDA_INCLUDE_DIR) / "cuda_fp16.h", ec))
      return std::string(KILN_CUDA_INCLUDE_DIR);
    return std::string("/usr/local/cuda/include");
  }());
  return dir;
}

// Never destroyed: a compile on the background thread may read it while the process exits.
const std::vector<int>& supported_archs() {
  static const std::vector<int>& archs = *new std::vector<int>([] {
    std::vector<int> a;
    int n = 0;
    if (nvrtc_api().nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      a.resize(n);
      if (nvrtc_api().nvrtcGetSupportedArchs(a.data()) != NVRTC_SUCCESS) a.clear();
    }
    std::sort(a.begin(), a.end());
    return a;
  }());
  return archs;
}

// Save a source that failed to compile where a person can find it; returns the path. Written
// beside it first and renamed into place, so that a process failing on the same kernel at the
// same time never leaves the reader of the path a partly written file.
std::string save_failed_source(const CudaKernelSource& src) {
  std::error_code ec;
  fs::path dir = fs::temp_directory_path(ec) / "kiln-failed";
  fs::create_directories(dir, ec);
  fs::path path = dir / (src.name + ".cu");
  fs::path part = dir / fmt::format("{}.cu.{}.part", src.name, ::getpid());
  bool written = false;
  {
    std::ofstream f(part, std::ios::binary | std::ios::trunc);
    f << "// key: " << src.key << "\n" << src.source;
    written = static_cast<bool>(f);
  }
  if (written) fs::rename(part, path, ec);
  if (!written || ec) {
    fs::remove(part, ec);
    return "(could not save the source: " + path.string() + ")";
  }
  return path.string();
}

struct Program {
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog) nvrtc_api().nvrtcDestroyProgram(&prog);
  }
};

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtc_api().nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (nvrtc_api().nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

} // namespace

bool nvrtc_makes_cubin(int arch) {
  const std::vector<int>& archs = supported_archs();
  return archs.empty() || std::find(archs.begin(), archs.end(), arch) != archs.end();
}

int nvrtc_version() {
  static const int version = [] {
    int major = 0, minor = 0;
    if (!nvrtc_unavailable_reason().empty() ||
        nvrtc_api().nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
      return 0;
    return major * 1000 + minor * 10;
  }();
  return version;
}

CudaBinary compile_cuda(const CudaKernelSource& src, const CudaTarget& t) {
  auto t0 = std::chrono::steady_clock::now();
  // A cubin for the exact arch when NVRTC knows it; otherwise PTX for the newest known arch
  // not above the target, which the driver JIT-compiles for the device.
  const std::vector<int>& archs = supported_archs();
  const bool cubin = nvrtc_makes_cubin(t.arch);
  int arch = t.arch;
  if (!cubin) {
    auto it = std::upper_bound(archs.begin(), archs.end(), t.arch);
    if (it == archs.begin())
      fail("compile", "NVRTC {} supports no architecture at or below sm_{} (it knows sm_{}..sm_{})",
           nvrtc_version(), t.arch, archs.front(), archs.back());
    arch = *(it - 1);
  }
  std::string arch_opt = fmt::format("--gpu-architecture={}_{}", cubin ? "sm" : "compute", arch);
  std::string include_opt = "--include-path=" + cuda_include_dir();
  // --fmad=false: a*b+c stays two rounded ops, as on the CPU and in eager mode, so fusing a
  // chain never changes its result (the kernels are memory-bound; FMA buys nothing here).
  const char* opts[] = {arch_opt.c_str(), "-std=c++17", include_opt.c_str(), "-default-device",
                        "--fmad=false"};

  Program p;
  nvrtcResult r = nvrtc_api().nvrtcCreateProgram(&p.prog, src.source.c_str(),
                                                 (src.name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    fail("compile", "nvrtcCreateProgram failed for kernel {}: {}", src.name,
         nvrtc_api().nvrtcGetErrorString(r));
  r = nvrtc_api().nvrtcCompileProgram(p.prog, static_cast<int>(std::size(opts)), opts);
  CudaBinary out;
  out.log = program_log(p.prog);
  if (r != NVRTC_SUCCESS) {
    std::string path = save_failed_source(src);
    fail("compile", "NVRTC could not compile kernel {} for {} ({}); source saved to {}\n{}",
         src.name, arch_opt.substr(arch_opt.find('=') + 1), nvrtc_api().nvrtcGetErrorString(r),
         path, out.log);
  }
  size_t size = 0;
  if (cubin) {
    r = nvrtc_api().nvrtcGetCUBINSize(p.prog, &size);
    if (r == NVRTC_SUCCESS) {
      out.image.resize(size);
      r = nvrtc_api().nvrtcGetCUBIN(p.prog, out.image.data());
    }
  } else {
    r = nvrtc_api().nvrtcGetPTXSize(p.prog, &size); // includes the terminating NUL
    if (r == NVRTC_SUCCESS) {
      out.image.resize(size);
      r = nvrtc_api().nvrtcGetPTX(p.prog, out.image.data());
    }
  }
  if (r != NVRTC_SUCCESS || out.image.empty())
    fail("compile", "NVRTC produced no {} for kernel {}: {}", cubin ? "cubin" : "PTX", src.name,
         nvrtc_api().nvrtcGetErrorString(r));
  out.is_cubin = cubin;
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

} // namespace kiln::detail

// libkiln links no CUDA library but the static CUDA runtime: NVRTC and cuBLAS are loaded when a
// GPU is first used (codegen/nvrtc/nvrtc_api.h, runtime/cuda/cublas_api.h), so the library
// starts and the CPU backend runs where they are missing. The whole CPU suite also runs with
// them hidden (tests/CMakeLists.txt, cpu.WithoutCudaLibraries).
#include "codegen/nvrtc/nvrtc_api.h"
#include "runtime/cuda/cublas_api.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <dlfcn.h>

using namespace kiln;
using namespace kiln::detail;

namespace {

bool hidden() {
  const char* p = std::getenv("KILN_CUDA_LIBRARY_PATH");
  return p && std::string(p) == "/nonexistent";
}

TEST(CudaLibraries, LibkilnLinksNoCudaLibrary) {
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&kiln::default_device), &info), 0);
  std::string needed;
  if (std::FILE* p =
          ::popen(("readelf -d " + std::string(info.dli_fname) + " 2>&1").c_str(), "r")) {
    std::array<char, 4096> buf;
    for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;)
      needed.append(buf.data(), n);
    if (::pclose(p) != 0) GTEST_SKIP() << "no readelf: " << needed;
  }
  ASSERT_NE(needed.find("(NEEDED)"), std::string::npos) << needed;
  for (const char* lib : {"libnvrtc", "libcublas", "libcuda", "libcudart"})
    EXPECT_EQ(needed.find(lib), std::string::npos) << info.dli_fname << " needs " << lib;
}

TEST(CudaLibraries, NvrtcAndCublasLoadAtFirstUse) {
  if (hidden()) GTEST_SKIP() << "the libraries are hidden in this pass";
  ASSERT_EQ(nvrtc_unavailable_reason(), "");
  ASSERT_EQ(cublas_unavailable_reason(), "");
  int major = 0, minor = 0;
  ASSERT_EQ(nvrtc_api().nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
  EXPECT_GE(major, 12);
  const CublasApi& b = cublas_api();
#define KILN_LOADED(name, type) EXPECT_NE(b.name, nullptr) << #name;
  KILN_CUBLAS_FUNCTIONS(KILN_LOADED)
#undef KILN_LOADED
}

TEST(CudaLibraries, WithoutThemTheGpuIsUnusedAndTheErrorSaysWhy) {
  if (!hidden()) GTEST_SKIP() << "only with KILN_CUDA_LIBRARY_PATH=/nonexistent";
  EXPECT_NE(nvrtc_unavailable_reason().find("NVRTC"), std::string::npos);
  EXPECT_NE(nvrtc_unavailable_reason().find("/nonexistent/libnvrtc.so"), std::string::npos)
      << nvrtc_unavailable_reason();
  EXPECT_FALSE(is_available(Device::cuda()));
  try {
    (void)ones({2}, DType::f32, Device::cuda());
    FAIL() << "a CUDA tensor without NVRTC";
  } catch (const Error& e) {
    const std::string what = e.what();
    // Without a GPU the reason is the missing device; with one, the missing library.
    EXPECT_TRUE(what.find("NVRTC") != std::string::npos ||
                what.find("cudaGetDeviceCount") != std::string::npos ||
                what.find("no CUDA device") != std::string::npos)
        << what;
  }
  Tensor x = ones({3}) * 2.0f; // the CPU works
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>({2, 2, 2}));
}

} // namespace

#pragma once
// Shared by the codegen tests (codegen_test.cpp, codegen_catalogue_test.cpp): the fixture, a
// fixed target, and a way to capture the kernels an evaluation runs. The codegen headers use
// llvm::ArrayRef; libkiln keeps LLVM's symbols to itself, so do not reference LLVM's ABI-check
// symbol from the tests (LLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING, set by tests/CMakeLists.txt).
#include "codegen/cuda_codegen.h"
#include "codegen/nvrtc/nvrtc_api.h"
#include "engine/kernel_observer.h"

#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace kt_codegen {

using namespace kiln;
using namespace kiln::detail;

// Collects every FusedKernel run while it is alive.
struct Capture {
  std::vector<FusedKernel> kernels;
  KernelObserver prev;
  Capture() {
    prev = set_kernel_observer([this](const FusedKernel& k) { kernels.push_back(k); });
  }
  ~Capture() { set_kernel_observer(prev); }
};

struct Codegen : ::testing::Test {
  void SetUp() override {
    // NVRTC compiles without a GPU, but it may be hidden (KILN_CUDA_LIBRARY_PATH, the pass
    // that checks kiln without the CUDA libraries) or missing.
    if (std::string why = nvrtc_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    set_default_device(Device::cpu());
    set_eager(false);
    manual_seed(7);
  }
  void TearDown() override { set_eager(false); }
};

// Fixed target so that names and goldens do not depend on the installed NVRTC.
inline CudaTarget target(int arch = 90) {
  CudaTarget t;
  t.arch = arch;
  t.sm_count = 132;
  t.nvrtc_version = 13000;
  return t;
}

// Slot bases for choose_variant, which reads only their alignment: each 16-byte aligned, or
// `offset` bytes past that.
inline std::vector<void*> slot_bases(uintptr_t offset = 0) {
  return std::vector<void*>(64, reinterpret_cast<void*>((uintptr_t(1) << 20) + offset));
}

inline Tensor chain(const Tensor& x, const Tensor& y) { // the 9-op chain of the liveness tests
  Tensor t = x * y + 1;
  t = tanh(t);
  Tensor s = sigmoid(t);
  return relu(s * x + (1 - s) * y);
}

// The only kernel evaluating the tensor `f()` returns runs (its inputs are evaluated before;
// its intermediates died inside f, so they fuse).
template <class F> FusedKernel kernel_of(F&& f) {
  Capture c;
  Tensor r = f();
  eval(r);
  EXPECT_EQ(c.kernels.size(), 1u);
  return c.kernels.empty() ? FusedKernel{} : c.kernels.back();
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Compare (or, with KILN_UPDATE_GOLDEN=1, rewrite) tests/cuda/golden/<name>.cu.
inline void check_golden(const std::string& name, const CudaKernelSource& src) {
  namespace fs = std::filesystem;
  const fs::path path = fs::path(__FILE__).parent_path() / "golden" / (name + ".cu");
  const char* update = std::getenv("KILN_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << src.source;
    std::cout << "[codegen] rewrote " << path << "\n";
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; run with KILN_UPDATE_GOLDEN=1";
  EXPECT_EQ(src.source, read_file(path)) << "generated source differs from " << path
                                         << " (KILN_UPDATE_GOLDEN=1 rewrites it after review)";
}

} // namespace kt_codegen

#pragma once
// The device the suite runs on: the CPU, or CUDA when KILN_TEST_DEVICE=cuda (ctest registers
// every test a second time that way, prefixed "cuda."). Without a usable GPU those cases skip.
#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace kt {

inline kiln::Device test_device() {
  const char* v = std::getenv("KILN_TEST_DEVICE");
  return v && std::strncmp(v, "cuda", 4) == 0 ? kiln::Device::cuda(0) : kiln::Device::cpu();
}

} // namespace kt

/// In a fixture's SetUp: run on the test device, or skip when it is not available. Early
/// flushes while the GPU is idle (kiln::set_idle_flush) are off: where they cut depends on
/// timing, and many tests count kernels. tests/engine/adaptive_flush_test.cpp turns them on.
#define KILN_USE_TEST_DEVICE()                                                                     \
  do {                                                                                             \
    kiln::Device kt_dev = ::kt::test_device();                                                     \
    if (!kiln::is_available(kt_dev)) GTEST_SKIP() << kt_dev.str() << " is not available";          \
    kiln::set_default_device(kt_dev);                                                              \
    kiln::set_idle_flush(0);                                                                       \
  } while (0)

#pragma once
// The yardstick of the GPU benchmarks: device-to-device copy bandwidth, measured in the same
// run with CUDA events (median of 20 copies after 3 warm-ups), counting bytes read + written.
#include "bench_util.h"

#include <cuda_runtime.h>

#include <vector>

namespace bench {

inline double copy_bandwidth(size_t bytes) { // GB/s
  void *a = nullptr, *b = nullptr;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  std::vector<double> t;
  for (int r = 0; r < 20; ++r) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (median(t) * 1e6);
}

} // namespace bench

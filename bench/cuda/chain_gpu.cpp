// The 9-op chain on the GPU (issue 3): x*y+1, tanh, sigmoid, s*x + (1-s)*y, relu over 64M
// elements, f32/f16/bf16, plus a broadcast-heavy case (row vector + matrix), each against the
// device-to-device copy bandwidth measured in the same run; the chain also written with named
// temporaries held at the eval (issue 20), as a user writes it. kiln runs on its own stream, so
// iterations are timed on the host between device syncs: N evaluations are queued back to
// back (host planning overlaps the previous kernel), then one sync; median over batches.
#include "bench_util.h"
#include "cuda/copy_bandwidth.h"

#include <kiln/kiln.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

using namespace kiln;

namespace {

Tensor chain(const Tensor& x, const Tensor& y) {
  Tensor t = tanh(x * y + 1);
  Tensor s = sigmoid(t);
  return relu(s * x + (1 - s) * y);
}

} // namespace

int main(int argc, char** argv) {
  bench::time_compiled_kernels();
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  bench::print_header("GPU elementwise chain vs device copy bandwidth", argc, argv);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("- GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int64_t n = int64_t(64) << 20;
  double copy = bench::copy_bandwidth(static_cast<size_t>(n) * 4);
  std::printf("\ndevice-to-device copy of %lld MiB: %.0f GB/s (read + write)\n\n",
              (long long)(n * 4 >> 20), copy);
  std::printf("| case | elements | bytes moved | median us | min-max us | GB/s | %% of copy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  auto row = [&](const char* name, int64_t elems, double bytes, const bench::Spread& t) {
    double gbs = bytes / (t.median * 1e3);
    std::printf("| %s | %lld | %.0f MB | %.1f | %.1f-%.1f | %.0f | %.0f%% |\n", name,
                (long long)elems, bytes / 1e6, t.median, t.min, t.max, gbs, 100 * gbs / copy);
  };
  Device gpu = Device::cuda(0);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    manual_seed(1);
    Tensor x = randn({n}, t, gpu), y = randn({n}, t, gpu);
    eval(x, y);
    Tensor o;
    const bench::Spread us =
        bench::time_spread([&] { eval(o = chain(x, y)); }, [] { kiln::sync(); });
    reset_stats();
    eval(o = chain(x, y));
    Stats s = stats();
    char name[64];
    std::snprintf(name, sizeof name, "9-op chain %s (%lld kernel)", dtype_name(t),
                  (long long)s.kernels_run);
    row(name, n, 3.0 * n * itemsize(t), us);
    // The same chain as a user writes it (issue 20): named temporaries still held when eval
    // runs. They are cheap to recompute from x and y, so they stay pending, not written.
    const bench::Spread named = bench::time_spread(
        [&] {
          Tensor p = x * y + 1;
          Tensor q = tanh(p);
          Tensor s2 = sigmoid(q);
          o = relu(s2 * x + (1 - s2) * y);
          eval(o);
        },
        [] { kiln::sync(); });
    reset_stats();
    {
      Tensor p = x * y + 1;
      Tensor q = tanh(p);
      Tensor s2 = sigmoid(q);
      o = relu(s2 * x + (1 - s2) * y);
      eval(o);
    }
    s = stats();
    std::snprintf(name, sizeof name, "9-op chain %s, named temporaries (%lld kernel, %lld written)",
                  dtype_name(t), (long long)s.kernels_run, (long long)s.buffers_materialized);
    row(name, n, 3.0 * n * itemsize(t), named);
  }
  { // broadcast: (8192, 8192) matrix + row vector, then * column vector
    const int64_t r = 8192, c = 8192;
    Tensor m = randn({r, c}, DType::f32, gpu), row_v = randn({c}, DType::f32, gpu);
    Tensor col = randn({r, 1}, DType::f32, gpu);
    eval(m, row_v, col);
    Tensor o;
    // Not eval(o = tanh(m + row_v) * col): the temporaries m + row_v and tanh(..) would live
    // until the end of that statement, through the eval, and be written as live values (three
    // outputs instead of one; see docs/semantics.md, "What eval writes").
    const bench::Spread us = bench::time_spread(
        [&] {
          o = tanh(m + row_v) * col;
          eval(o);
        },
        [] { kiln::sync(); });
    row("broadcast (8192x8192 + row) * col, f32", r * c, 2.0 * r * c * 4 + (r + c) * 4, us);
  }
  return 0;
}

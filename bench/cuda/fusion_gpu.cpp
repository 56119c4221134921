// Fused reductions and transposes on the GPU (issue 4): softmax and layer_norm over the rows of
// 8192 x 8192 f32/bf16, the transpose materialization of a 16384 x 16384 f32 matrix, and sums
// over its last and its first axis, each against the device-to-device copy bandwidth measured
// in the same run, for the bytes that must move (inputs read once, outputs written once).
// Evaluations are queued back to back and timed on the host between device syncs (kiln runs on
// its own stream); median over batches. bench/torch/fusion_torch.py times PyTorch on the same
// cases.
#include "bench_util.h"
#include "cuda/copy_bandwidth.h"

#include <kiln/kiln.h>

#include <cstdio>
#include <functional>

using namespace kiln;

int main(int argc, char** argv) {
  bench::time_compiled_kernels();
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  bench::print_header("Fused reductions and transposes vs device copy bandwidth", argc, argv);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("- GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const double copy = bench::copy_bandwidth(size_t(1) << 30);
  std::printf("\ndevice-to-device copy of 1 GiB: %.0f GB/s (read + write)\n\n", copy);
  std::printf("| case | kernels | bytes moved | median us | min-max us | GB/s | %% of copy |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  Device gpu = Device::cuda(0);
  // `f` computes the output into its argument and evaluates it itself, so that temporaries it
  // names are still held at the eval, as in a user's code.
  auto run_held = [&](const char* name, double bytes, const std::function<void(Tensor&)>& f) {
    Tensor o;
    const bench::Spread t = bench::time_spread([&] { f(o); }, [] { kiln::sync(); }, 10, 7);
    reset_stats();
    f(o);
    kiln::sync();
    int64_t kernels = stats().kernels_run;
    double gbs = bytes / (t.median * 1e3);
    std::printf("| %s | %lld | %.0f MB | %.1f | %.1f-%.1f | %.0f | %.0f%% |\n", name,
                (long long)kernels, bytes / 1e6, t.median, t.min, t.max, gbs, 100 * gbs / copy);
    std::fflush(stdout);
  };
  auto run = [&](const char* name, double bytes, const std::function<Tensor()>& f) {
    run_held(name, bytes, [&](Tensor& o) { eval(o = f()); });
  };
  manual_seed(3);
  for (DType t : {DType::f32, DType::bf16}) {
    const int64_t r = 8192, c = 8192;
    Tensor x = randn({r, c}, t, gpu), w = randn({c}, t, gpu), b = randn({c}, t, gpu);
    eval(x, w, b);
    const double bytes = 2.0 * r * c * itemsize(t);
    char name[96];
    std::snprintf(name, sizeof name, "softmax rows 8192x8192 %s", dtype_name(t));
    run(name, bytes, [&] { return softmax(x, 1); });
    std::snprintf(name, sizeof name, "log_softmax rows 8192x8192 %s", dtype_name(t));
    run(name, bytes, [&] { return log_softmax(x, 1); });
    std::snprintf(name, sizeof name, "layer_norm rows 8192x8192 %s (weight, bias)", dtype_name(t));
    run(name, bytes + 2.0 * c * itemsize(t), [&] { return layer_norm(x, w, b); });
    // The same written from primitives with named temporaries held at the eval (issue 20):
    // mean and variance are reductions (written), the rest is recomputed where it is read.
    std::snprintf(name, sizeof name, "layer_norm from primitives, named, %s", dtype_name(t));
    run_held(name, bytes + 2.0 * c * itemsize(t), [&](Tensor& o) {
      Tensor mu = mean(x, {1}, true);
      Tensor d = x - mu;
      Tensor var = mean(d * d, {1}, true);
      Tensor inv = rsqrt(var + 1e-5f);
      o = d * inv * w + b;
      eval(o);
    });
  }
  {
    const int64_t n = 16384;
    Tensor m = randn({n, n}, DType::f32, gpu);
    eval(m);
    const double bytes = double(n) * n * 4;
    run("transpose materialized 16384x16384 f32", 2 * bytes,
        [&] { return contiguous(transpose(m, 0, 1)); });
    run("sum over the last axis 16384x16384 f32", bytes + n * 4.0, [&] { return sum(m, {1}); });
    run("sum over the first axis 16384x16384 f32", bytes + n * 4.0, [&] { return sum(m, {0}); });
    run("x - mean(x, 0) 16384x16384 f32", 2 * bytes, [&] { return m - mean(m, {0}, true); });
  }
  return 0;
}

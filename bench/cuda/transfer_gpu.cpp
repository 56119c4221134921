// Host <-> GPU transfers (issue 21): kiln's from_vector, to_vector and copy_to, pinned tensors and
// copies into the caller's page-locked memory, beside the raw link (cudaMemcpy from and to pinned
// memory) and cudaMemcpy from and to pageable memory, for
// one size (default 1 GiB of f32); and a copy overlapping a kernel (see overlap()). Each figure is
// GB/s: bytes / wall time of one transfer, median (min-max) of `reps` after one warm-up, the
// transfer complete when timed (kiln: the tensor evaluated and the stream synchronized; reads
// return when the data is there). Every kiln result is checked element for element against what
// went in.
//
//   transfer_gpu [MiB, default 1024] [reps, default 5]
#include "bench_util.h"

#include <kiln/kiln.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

using namespace kiln;

namespace {

struct Row {
  std::string what;
  std::vector<double> gbps;
};

Row timed(const std::string& what, size_t bytes, int reps, const std::function<void()>& once) {
  once(); // warm-up: first-touch of pinned pages, pool growth, the staging chunks
  Row r{what, {}};
  for (int i = 0; i < reps; ++i) {
    const double t0 = bench::now_ns();
    once();
    r.gbps.push_back(double(bytes) / (bench::now_ns() - t0));
  }
  return r;
}

void print(const Row& r) {
  const auto [lo, hi] = std::minmax_element(r.gbps.begin(), r.gbps.end());
  std::printf("| %s | %.1f (%.1f-%.1f) |\n", r.what.c_str(), bench::median(r.gbps), *lo, *hi);
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "transfer_gpu: wrong values after %s\n", what);
  std::exit(1);
}

// Milliseconds of wall time per call of `once` (which ends with a sync), after a warm-up.
std::vector<double> timed_ms(int reps, const std::function<void()>& once) {
  once();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const double t0 = bench::now_ns();
    once();
    ms.push_back((bench::now_ns() - t0) / 1e6);
  }
  return ms;
}

void print_ms(const char* what, const std::vector<double>& ms) {
  const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
  std::printf("| %s | %.2f (%.2f-%.2f) |\n", what, bench::median(ms), *lo, *hi);
}

// A copy and a kernel issued one after the other, independent of each other: an f32 matmul of
// about the copy's duration, then the upload, then one sync. With the copy on its own stream the
// pair takes about max(copy, kernel), not the sum. Both results are checked.
void overlap(const std::vector<float>& host, const Tensor& pinned_src, int reps) {
  const int64_t d = 8192;
  Tensor a = randn({d, d}, DType::f32, Device::cuda(0)) * (1.0f / 90.0f);
  eval(a);
  Tensor m, t;
  auto kernel = [&] {
    m = matmul(a, a);
    eval(m);
    kiln::sync();
  };
  auto pinned_copy = [&] {
    t = pinned_src.to(Device::cuda(0));
    eval(t);
    kiln::sync();
  };
  auto pinned_pair = [&] {
    m = matmul(a, a);
    t = pinned_src.to(Device::cuda(0));
    eval(m, t);
    kiln::sync();
  };
  Tensor down;
  auto download = [&] {
    down = t.to(Device::cpu());
    eval(down);
    kiln::sync();
  };
  auto download_pair = [&] { // the download is queued first: the matmul need not wait for it
    down = t.to(Device::cpu());
    eval(down);
    m = matmul(a, a);
    eval(m);
    kiln::sync();
  };
  auto pageable_copy = [&] {
    t = from_vector(host, {static_cast<int64_t>(host.size())}, Device::cuda(0));
    kiln::sync();
  };
  auto pageable_pair = [&] {
    m = matmul(a, a);
    eval(m);
    t = from_vector(host, {static_cast<int64_t>(host.size())}, Device::cuda(0));
    kiln::sync();
  };
  std::printf("\n- overlap: an f32 matmul (%lld^2, TF32 off) and the copy, issued one after the "
              "other, then one sync; ms per pair, median (min-max) of %d after a warm-up\n\n"
              "| work | ms |\n|---|---:|\n",
              static_cast<long long>(d), reps);
  const std::vector<double> k = timed_ms(reps, kernel), c = timed_ms(reps, pinned_copy),
                            p = timed_ms(reps, pinned_pair), pc = timed_ms(reps, pageable_copy),
                            pp = timed_ms(reps, pageable_pair), dc = timed_ms(reps, download),
                            dp = timed_ms(reps, download_pair);
  print_ms("matmul alone", k);
  print_ms("pinned tensor -> GPU alone", c);
  print_ms("matmul, then pinned tensor -> GPU", p);
  print_ms("from_vector (pageable) alone", pc);
  print_ms("matmul, then from_vector (pageable)", pp);
  print_ms("GPU -> pinned CPU tensor alone: t.to(cpu)", dc);
  print_ms("t.to(cpu), then matmul", dp);
  const double km = bench::median(k);
  auto hidden = [km](const std::vector<double>& copy, const std::vector<double>& pair) {
    const double c = bench::median(copy);
    return 100 * (km + c - bench::median(pair)) / std::min(km, c);
  };
  std::printf("\n- hidden: (kernel + copy - pair) / min(kernel, copy): pinned upload %.0f%%, "
              "pageable upload %.0f%%, download %.0f%%\n",
              hidden(c, p), hidden(pc, pp), hidden(dc, dp));
  check(down.to_vector<float>() == host, "the overlapped download");
  check(t.to_vector<float>() == host, "the overlapped upload");
  const std::vector<float> av = a.to_vector<float>(), mv = m.to_vector<float>();
  for (int64_t i : {int64_t(0), d / 2, d - 1}) {
    double want = 0;
    for (int64_t q = 0; q < d; ++q) want += double(av[size_t(i * d + q)]) * av[size_t(q * d + i)];
    check(std::abs(mv[size_t(i * d + i)] - want) <= 1e-3 * (1 + std::abs(want)),
          "the overlapped matmul");
  }
}

} // namespace

int main(int argc, char** argv) {
  if (!is_available(Device::cuda(0))) {
    std::printf("no CUDA device\n");
    return 1;
  }
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const size_t bytes = mib << 20, n = bytes / sizeof(float);
  bench::print_header("host <-> GPU transfers", argc, argv);
  std::printf("- %zu MiB of f32; GB/s = bytes / wall time of one transfer, median (min-max) of %d "
              "after a warm-up\n\n| transfer | GB/s |\n|---|---:|\n",
              mib, reps);

  std::vector<float> host(n), back(n);
  for (size_t i = 0; i < n; ++i) host[i] = float(i % 4099) * 0.25f;
  std::memset(back.data(), 0xff, bytes); // touched (pages present) and poisoned
  void *pinned = nullptr, *dev = nullptr;
  cudaMallocHost(&pinned, bytes);
  cudaMalloc(&dev, bytes);
  std::memcpy(pinned, host.data(), bytes);

  print(timed("link: cudaMemcpy pinned -> GPU", bytes, reps,
              [&] { cudaMemcpy(dev, pinned, bytes, cudaMemcpyHostToDevice); }));
  print(timed("link: cudaMemcpy GPU -> pinned", bytes, reps,
              [&] { cudaMemcpy(pinned, dev, bytes, cudaMemcpyDeviceToHost); }));
  print(timed("cudaMemcpy pageable -> GPU", bytes, reps,
              [&] { cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice); }));
  print(timed("cudaMemcpy GPU -> pageable", bytes, reps,
              [&] { cudaMemcpy(back.data(), dev, bytes, cudaMemcpyDeviceToHost); }));
  cudaFree(dev);
  cudaFreeHost(pinned);

  const Shape shape{static_cast<int64_t>(n)};
  Tensor t;
  print(timed("kiln from_vector: std::vector -> GPU", bytes, reps, [&] {
    t = from_vector(host, shape, Device::cuda(0));
    eval(t);
    kiln::sync();
  }));
  std::memset(back.data(), 0xff, bytes);
  print(timed("kiln copy_to: GPU -> the caller's buffer", bytes, reps, [&] { t.copy_to(back); }));
  check(back == host, "copy_to");
  Tensor pinned_src = from_vector(host, shape, Device::cpu()).pin_memory();
  print(timed("kiln pinned tensor -> GPU: p.to(cuda)", bytes, reps, [&] {
    t = pinned_src.to(Device::cuda(0));
    eval(t);
    kiln::sync();
  }));
  void* locked = nullptr;
  cudaMallocHost(&locked, bytes);
  std::span<float> locked_span(static_cast<float*>(locked), n);
  std::memset(locked, 0xff, bytes);
  print(timed("kiln copy_to: GPU -> the caller's page-locked memory", bytes, reps,
              [&] { t.copy_to(locked_span); }));
  check(std::equal(host.begin(), host.end(), locked_span.begin()), "copy_to (page-locked)");
  cudaFreeHost(locked);
  print(timed("kiln pin_memory: CPU tensor -> pinned CPU tensor", bytes, reps,
              [&] { Tensor p = from_blob(host.data(), bytes, DType::f32, shape).pin_memory(); }));
  Tensor down;
  const double cold0 = bench::now_ns(); // the pool has no block of this size yet: it pins one
  down = t.to(Device::cpu());
  (void)down.data_ptr(); // waits for the download
  std::printf("| kiln t.to(cpu): GPU -> a pinned CPU tensor, first (pins a new block) | %.1f |\n",
              double(bytes) / (bench::now_ns() - cold0));
  print(timed("kiln t.to(cpu): GPU -> a pinned CPU tensor (pool warm)", bytes, reps, [&] {
    down = t.to(Device::cpu());
    (void)down.data_ptr();
  }));
  check(down.to_vector<float>() == host, "to(cpu)");
  down = Tensor();
  std::vector<float> fresh;
  print(timed("kiln to_vector: GPU -> a new std::vector", bytes, reps,
              [&] { fresh = t.to_vector<float>(); }));
  check(fresh == host, "to_vector");
  overlap(host, pinned_src, reps);
  return 0;
}

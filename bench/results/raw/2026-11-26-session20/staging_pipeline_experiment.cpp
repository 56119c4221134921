// Experiment: pageable host -> GPU pipelines. Not part of kiln.
#include "runtime/cpu/thread_pool.h"
#include "runtime/cuda/host_copies.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <functional>
#include <thread>
#include <vector>
using namespace kiln::detail;
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static const size_t B = size_t(1) << 30;
static void report(const char* what, std::vector<double> s) {
  std::sort(s.begin(), s.end());
  std::printf("| %s | %.1f (%.1f-%.1f) |\n", what, B / s[s.size() / 2] / 1e9, B / s.back() / 1e9,
              B / s[0] / 1e9);
  std::fflush(stdout);
}
template <class F> static void bench(const char* what, F f) {
  f();
  std::vector<double> s;
  for (int i = 0; i < 7; ++i) {
    double t0 = now();
    f();
    s.push_back(now() - t0);
  }
  report(what, s);
}
// fork-join pipeline with the kiln pool
struct Ring {
  std::vector<char*> host;
  std::vector<cudaEvent_t> ev;
  size_t chunk;
  Ring(int n, size_t c) : chunk(c) {
    for (int i = 0; i < n; ++i) {
      char* p;
      cudaMallocHost((void**)&p, c);
      std::memset(p, 0, c);
      host.push_back(p);
      cudaEvent_t e;
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      ev.push_back(e);
    }
  }
};
static void forkjoin(Ring& r, char* d, const char* s, cudaStream_t st, int64_t grain) {
  for (size_t done = 0, i = 0; done < B; ++i) {
    size_t n = std::min(B - done, r.chunk);
    int k = i % r.host.size();
    cudaEventSynchronize(r.ev[k]);
    cpu::parallel_for(
        n, grain, [&](int64_t b, int64_t e) { std::memcpy(r.host[k] + b, s + done + b, e - b); });
    cudaMemcpyAsync(d + done, r.host[k], n, cudaMemcpyHostToDevice, st);
    cudaEventRecord(r.ev[k], st);
    done += n;
  }
  cudaStreamSynchronize(st);
}
// persistent threads, each owning its own slots; chunks handed out by an atomic counter
static void stripes(int T, int slots, size_t chunk, char* d, const char* s, cudaStream_t st,
                    std::vector<std::vector<char*>>& hb,
                    std::vector<std::vector<cudaEvent_t>>& ev) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> th;
  for (int t = 0; t < T; ++t)
    th.emplace_back([&, t] {
      int u = 0;
      for (size_t k; (k = next.fetch_add(1)) * chunk < B;) {
        size_t off = k * chunk, n = std::min(chunk, B - off);
        int j = u++ % slots;
        cudaEventSynchronize(ev[t][j]);
        std::memcpy(hb[t][j], s + off, n);
        cudaMemcpyAsync(d + off, hb[t][j], n, cudaMemcpyHostToDevice, st);
        cudaEventRecord(ev[t][j], st);
      }
    });
  for (auto& x : th) x.join();
  cudaStreamSynchronize(st);
}
int main() {
  std::vector<char> host(B);
  std::memset(host.data(), 1, B);
  char* dev;
  cudaMalloc(&dev, B);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  char* pin;
  cudaMallocHost((void**)&pin, B);
  std::memset(pin, 0, B);
  std::printf("threads %d\n| variant | GB/s |\n|---|---:|\n", cpu::num_threads());
  bench("memcpy 1 thread pageable->pinned", [&] { std::memcpy(pin, host.data(), B); });
  bench("parallel_memcpy pageable->pinned", [&] { parallel_memcpy(pin, host.data(), B); });
  bench("cudaMemcpy pinned->GPU", [&] {
    cudaMemcpyAsync(dev, pin, B, cudaMemcpyHostToDevice, st);
    cudaStreamSynchronize(st);
  });
  bench("cudaMemcpy pageable->GPU", [&] {
    cudaMemcpyAsync(dev, host.data(), B, cudaMemcpyHostToDevice, st);
    cudaStreamSynchronize(st);
  });
  HostCopies hc(0);
  bench("HostCopies::to_device (kiln now)", [&] {
    hc.to_device(dev, host.data(), B, st, "x");
    cudaStreamSynchronize(st);
  });
  for (size_t mib : {8, 16, 32})
    for (int n : {4, 8})
      for (int64_t g : {256 << 10, 1 << 20}) {
        if (size_t(n) * mib > 128) continue;
        Ring r(n, mib << 20);
        char name[128];
        std::snprintf(name, sizeof name, "forkjoin %zu MiB x %d, grain %lld KiB", mib, n,
                      (long long)g >> 10);
        bench(name, [&] { forkjoin(r, dev, host.data(), st, g); });
      }
  for (int T : {4, 8, 12, 16})
    for (size_t mib : {1, 2, 4}) {
      int slots = 3;
      std::vector<std::vector<char*>> hb(T);
      std::vector<std::vector<cudaEvent_t>> ev(T);
      for (int t = 0; t < T; ++t)
        for (int j = 0; j < slots; ++j) {
          char* p;
          cudaMallocHost((void**)&p, mib << 20);
          std::memset(p, 0, mib << 20);
          hb[t].push_back(p);
          cudaEvent_t e;
          cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
          ev[t].push_back(e);
        }
      char name[128];
      std::snprintf(name, sizeof name, "stripes %d threads, %zu MiB x %d each", T, mib, slots);
      bench(name, [&] { stripes(T, slots, mib << 20, dev, host.data(), st, hb, ev); });
    }
  // correctness of the last variant
  std::vector<char> back(B);
  cudaMemcpy(back.data(), dev, B, cudaMemcpyDeviceToHost);
  std::printf("check %s\n", back == host ? "ok" : "WRONG");
}
